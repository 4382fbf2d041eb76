"""The probes of patches/patches.toml on real trees (sources from the cache):
false on the unpatched release, true on the patched tree and on the release
that has the change upstream."""

from __future__ import annotations

import pytest
from packaging.version import Version
from support import series_of
from vpatch import lock, probes
from vpatch.commands import apply
from vpatch.sources import files

pytestmark = pytest.mark.integration

PINS = lock.load()
NEWEST = PINS.default()
PS = PINS.patchset
LAYER0 = PS.fixes()["layer0"]
# the releases after the newest patched one: EAGLE-3 for these targets upstream
LATER = [v for v in PINS.versions() if Version(v) > Version(NEWEST.version)]
UPSTREAM = LATER[0]
# the EAGLE-3 patches: those of the newest patched series that no later release carries
EAGLE3 = [v.slug for v in PS.carried(NEWEST.version) if not PS.serving(v.slug, LATER)]


def test_probes_missing_on_baseline_present_when_patched_and_upstream(tmp_path):
    checks = probes.load(PS)
    series = series_of(PINS, NEWEST)
    globs = probes.patterns(checks)
    base = files.release_files(NEWEST, globs | set(series.files))
    tree = tmp_path / "patched"
    apply.apply(NEWEST.version, dest=tree, source=str(base), pins=PINS)
    up = files.release_files(PINS.get(UPSTREAM), globs)
    seen = {
        "baseline": probes.folder_files(base, globs),
        "patched": probes.folder_files(tree, globs),
        UPSTREAM: probes.folder_files(up, globs),
    }
    # the EAGLE-3 patches, each upstream from UPSTREAM by its DEP-3; the fixes
    # it shares with UPSTREAM's series: test_fix_probe_false_before_upstream_true_when_patched
    assert EAGLE3
    for slug in EAGLE3:
        assert PS.upstream(slug).release == UPSTREAM, slug
        got = {k: probes.holds(checks[slug], files) for k, files in seen.items()}
        assert got == {"baseline": False, "patched": True, UPSTREAM: True}, slug


def test_layer_0_probe_tells_the_copy_from_no_fix_and_from_the_alias(tmp_path):
    """False on every unpatched release (those with EAGLE-3 upstream crash,
    older ones have no aux states); true on the patched trees of the first
    and the last release of each variant of the fix;
    false again when the fix takes `hidden_states` itself at layer 0 (the
    tensor the decoder layer makes its residual and, on CUDA, overwrites)."""
    checks = probes.load(PS)[LAYER0]
    globs = probes.patterns({LAYER0: checks})
    for v in PINS.versions():
        have = probes.folder_files(files.release_files(PINS.releases[v], globs), globs)
        assert not probes.holds(checks, have), v
    for v in sorted({e for var in PS.variants[LAYER0] for e in (var.first, var.last)}, key=Version):
        series = series_of(PINS, PINS.get(v))
        base = files.release_files(PINS.get(v), globs | set(series.files))
        tree = tmp_path / v
        apply.apply(v, dest=tree, source=str(base), pins=PINS)
        patched = probes.folder_files(tree, globs)
        assert probes.holds(checks, patched), v
        aliased = {
            f: text.replace("hidden_states.clone()", "hidden_states") for f, text in patched.items()
        }
        assert aliased != patched and not probes.holds(checks, aliased), v


# The fixes of the series from UPSTREAM on but the layer-0 fix (its own test
# above): (slug, the first release whose own source has the fix, or None
# while upstream lacks it), read from its DEP-3 Applied-Upstream.
FIXES = [(s, PS.upstream(s).release) for s in PS.slugs if PS.serving(s, LATER) and s != LAYER0]


@pytest.mark.parametrize("slug, fixed_in", FIXES, ids=[s for s, _ in FIXES])
def test_fix_probe_false_before_upstream_true_when_patched(tmp_path, slug, fixed_in):
    """False on every release before upstream's fix (true from it on); true on
    the patched tree of the first release of each variant."""
    checks = probes.load(PS)[slug]
    globs = probes.patterns({slug: checks})
    for v in PINS.versions():
        have = probes.folder_files(files.release_files(PINS.releases[v], globs), globs)
        if slug in PS.gone(v):  # its code removed upstream: no anchor left, no claim
            assert probes.gone(checks, have) and not probes.holds(checks, have), v
            continue
        upstream = fixed_in is not None and Version(v) >= Version(fixed_in)
        assert probes.holds(checks, have) is upstream, v
    for variant in PINS.patchset.variants[slug]:
        v = variant.first
        series = series_of(PINS, v)
        base = files.release_files(PINS.get(v), globs | set(series.files))
        tree = tmp_path / v
        apply.apply(v, dest=tree, source=str(base), pins=PINS)
        assert probes.holds(checks, probes.folder_files(tree, globs)), v


def test_every_release_as_released_is_what_doctor_takes_from_the_patch_set():
    """`vpatch doctor --vllm R` takes `vpatch check`'s report of R as released
    from the patch set (readiness.expected: a patch of R's own series missing,
    any other gone from its `gone` release on, else upstream from its DEP-3
    Applied-Upstream on). Here check's own
    statuses() on each pinned release's own files (no RECORD, no receipt:
    the probes decide) give the same report, on every pinned release."""
    from vpatch.env import readiness
    from vpatch.env.dist import Dist

    checks = probes.load(PS)
    globs = probes.patterns(checks)
    seen = set()
    for v in PINS.versions():
        root = files.release_files(PINS.releases[v], globs)
        own = PINS.series(v)
        d = Dist("python", "vllm", v, root, None, "cpython-311")
        got = readiness.statuses(d, readiness.subjects(PINS, own), own, None, None, checks)
        assert got == readiness.expected(PINS, v, False), v
        seen |= set(got.values())
    # `gone` too once a release whose upstream removed a patch's code is
    # pinned (patches.toml's `gone`: the V1 proposer's patches have one)
    assert {"missing", "upstream"} <= seen <= {"missing", "upstream", "gone"}
