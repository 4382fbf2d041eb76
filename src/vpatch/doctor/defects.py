"""The defects of vLLM that vpatch's series fixes, by the key each has in
doctor (DEFECTS), and which patch fixes each: the one whose table in
patches.toml gives that key as `doctor` (fixes(), fix()); which releases
carry it are that patch's spans (carried()). doctor reads from `vpatch
check`'s per-patch report whether an environment has the fix installed.

`vpatch docs` renders the defects table into docs/doctor.md
(maintain/docs.py)."""

from __future__ import annotations

from .. import lock

# each the `doctor` key of the patch table (patches.toml) whose patch fixes it
DEFECTS = (
    "layer0",  # aux layer 0 crashes (Rules.upstream_eagle3: every release with it)
    "forced_backend_v1",  # Rules.forced_backend_crash, V1 runner
    "forced_backend_v2",  # the same on the V2 runner: another file, another patch
    "draft_positions",  # Rules.draft_positions_short
    "mla_rope_theta",  # Rules.mla_rope_without_theta
    "mla_fc_norm",  # Rules.mla_fc_norm (where Rules.fc_norm)
    "kimi_k2_mla",  # Rules.kimi_k2_drafter_not_mla
    "final_norm_id",  # not Rules.final_norm_id: id n matches no layer (EAGLE-3 upstream)
    # serving.toml's: a family's `fixes` maps each serving-file fact to its key,
    # and doctor/served.py has_defect() says where a release has it
    "v32_aux_capture",  # V3.2's own package: partial sums at TP > 1, id n, ROCm's id 0
    "v4_id0",  # DeepSeek-V4's package (every platform): id 0 never captured
    "v41_id0",  # DeepSeek-V4.1's package: id 0 never captured
)


def fixes(pins: lock.Lock) -> dict[str, str]:
    """{defect key: the slug of the patch that fixes it}, from patches.toml."""
    return pins.patchset.fixes()


def fix(pins: lock.Lock, key: str) -> str | None:
    """The slug of the patch that fixes defect `key` (one of DEFECTS); None
    when the patch set has none."""
    return fixes(pins).get(key)


def carried(pins: lock.Lock, key: str) -> set[str]:
    """The pinned releases whose series carry the fix of defect `key`."""
    slug = fix(pins, key)
    return set(pins.patchset.serving(slug, pins.versions())) if slug else set()


# The patched releases' series add EAGLE-3 for DeepSeek/Kimi with their own aux-state
# rules (id n = final-norm input, out-of-range ids and ids off the last PP rank
# raise ValueError, layer 0 = the embeddings); later series fix the layer-0 crash.
def patched_eagle3(pins: lock.Lock) -> set[str]:
    """Releases where EAGLE-3 for these targets is vpatch's series (status
    `patched` in VERSIONS.lock)."""
    return set(pins.versions("patched"))


def patched_layer0(pins: lock.Lock) -> set[str]:
    """Releases with EAGLE-3 upstream whose series carries the layer-0 fix."""
    return carried(pins, "layer0")
