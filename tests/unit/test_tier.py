"""The tier program's shape (tests/vllm, project python; nothing here runs
vLLM): a check is one definition in the module of its theme
(vllm_tier/checks/), named nowhere else, registered in the order one place
imports the themes (vllm_tier/checks/__init__.py); the registry
(vllm_tier/registry.py), plan, prepare, session, verdicts and the outer
tests hold no check of their own; a new check is one more definition; where
the stand-ins act is stated once (release/tier_plugins/stand_ins.py), in a
module both sides import as any module is imported, which imports only the
standard library, packaging and the other shared module (versions.py); no
tier module is loaded by its file path; the tier's generated tables are
fresh."""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from release.tier_plugins import stand_ins
from release.tier_plugins.versions import Span, version
from support.cli import environment
from vllm_tier import TierError, docs, models, plan, prepare, releases, runner, verdicts
from vllm_tier.checks import CHECKS, served
from vllm_tier.registry import Check, Verdict, check, run
from vllm_tier.session import Session

ROOT = Path(__file__).resolve().parents[2]
TIER = ROOT / "tests" / "vllm"
INNER = TIER / "release"
# two releases the tier runs by default, for made-up plans and runs
FIRST, LAST = releases.default()[0], releases.default()[-1]
# What the tier side (project python) may import from the inner suite's
# folder (as `release.<module>`, tests/vllm on its path): modules that run on
# vLLM's python too and import only the stdlib, packaging (which vLLM and
# vpatch both require) and each other.
SHARED = {"tier_plugins.stand_ins", "tier_plugins.versions"}
# Scripts of tests/vllm that run in a tier venv themselves (as a whole, or a
# worker of theirs: docs/tier.md's "What runs where").
IN_A_VENV = {"fixtures.py", "bench_forward.py", "bench_spec.py", "bench_spec_train.py"}
# Ways to load a module by its file path, which no import check sees.
BY_PATH = {"spec_from_file_location", "SourceFileLoader", "run_path", "load_source"}


def sources(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*.py") if "series" not in p.relative_to(TIER).parts)


def imported(path: Path) -> set[str]:
    """The top-level names of every module ``path`` imports, anywhere in it."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found.add(node.module.split(".")[0])
    return found


def module_file(dotted: str) -> Path:
    """The file of the inner suite's module ``dotted`` (``tier_plugins.x``)."""
    return INNER / (dotted.replace(".", "/") + ".py")


def from_inner(path: Path) -> set[str]:
    """The inner suite's modules ``path`` imports through the folder's name
    (``from release.tier_plugins import x``, ``import release.x``): each
    dotted from the folder (``tier_plugins.x``)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name.split(".", 1)[1] for a in node.names if a.name.startswith("release.")}
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            head, _, rest = node.module.partition(".")
            if head != "release":
                continue
            if rest and module_file(rest).is_file():
                found.add(rest)
            else:
                found |= {f"{rest}.{a.name}" if rest else a.name for a in node.names}
    return found


def relative(path: Path) -> set[str]:
    """The modules of its own package ``path`` imports relatively, dotted
    from the inner suite's folder."""
    package = ".".join(path.parent.relative_to(INNER).parts)
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            if node.module:
                found.add(f"{package}.{node.module}")
            else:
                found |= {f"{package}.{a.name}" for a in node.names}
    return found


def loads_by_path(path: Path) -> list[str]:
    hits = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.Attribute, ast.Name)):
            name = node.attr if isinstance(node, ast.Attribute) else node.id
            if name in BY_PATH:
                hits.append(f"{path.relative_to(ROOT)}:{node.lineno} {name}")
        elif isinstance(node, ast.Call) and getattr(node.func, "id", None) == "exec":
            hits.append(f"{path.relative_to(ROOT)}:{node.lineno} exec")
    return hits


def test_no_tier_module_is_loaded_by_its_file_path():
    hits = [h for p in sources(TIER) for h in loads_by_path(p)]
    assert not hits, f"import it by name (its folder on the path), as layer checks see: {hits}"


def test_the_tier_imports_from_the_inner_suite_only_what_is_shared():
    inner = {p.stem for p in INNER.glob("*.py")}
    inner |= {p.name for p in INNER.iterdir() if (p / "__init__.py").is_file()}
    outer = [p for p in sources(TIER) if INNER not in p.parents and p.name not in IN_A_VENV]
    wrong = {
        str(p.relative_to(ROOT)): sorted((imported(p) & inner) | from_inner(p) - SHARED)
        for p in outer
        if (imported(p) & inner) | from_inner(p) - SHARED
    }
    assert not wrong, f"the tier imports inner modules that need vLLM's python: {wrong}"


@pytest.mark.parametrize("name", sorted(SHARED))
def test_a_shared_module_imports_only_the_stdlib_and_packaging(name):
    allowed = set(sys.stdlib_module_names) | {"packaging"}
    got = imported(module_file(name)) - {"__future__"}
    assert got <= allowed, sorted(got - allowed)
    assert relative(module_file(name)) <= SHARED, "a shared module imports only shared ones"
    package = module_file(name).parent / "__init__.py"
    assert imported(package) <= {"__future__"}, "its package imports nothing when imported"


def test_each_stand_in_spans_pinned_releases_without_overlap():
    pinned = releases.pins().versions()
    for s in stand_ins.STAND_INS:
        assert s.first in pinned and s.last in pinned, s.span()
        assert version(s.first) <= version(s.last), s.span()
    for kind in {s.kind for s in stand_ins.STAND_INS}:
        for v in pinned:
            acting = [s.span() for s in stand_ins.STAND_INS if s.kind == kind and s.covers(v)]
            assert len(acting) <= 1, f"{kind} on {v}: {acting}"


def test_the_stand_ins_decide_what_the_tier_derives():
    for v in releases.pins().versions():
        acting = stand_ins.acting(v)
        greedy = [s for s in acting if s.kind != stand_ins.SAMPLED]
        assert releases.serves_eagle3_natively(v) == (releases.serves_eagle3(v) and not greedy), v
        kinds = (stand_ins.KERNELS, stand_ins.SAMPLED)
        assert releases.triton_interpreted(v) == any(s.kind in kinds for s in acting)


def test_the_default_served_releases_meet_each_unpatched_refusal():
    """The stood-in releases served by default are there to meet each text
    of the unpatched refusal (the patched releases'): each text is met. unpatched.py is
    the inner suite's, imported as the inner runs import it (their folder on
    PYTHONPATH; it needs pytest, packaging and vpatch only)."""
    code = (
        "import json, unpatched; print(json.dumps("
        "[[str(f.span), f.describe()] for f in unpatched.EAGLE3_REFUSED]))"
    )
    env = environment({"PYTHONPATH": str(INNER)})
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    served = CHECKS["served_speculative_decoding"].defaults()
    for span, describe in json.loads(r.stdout):
        first, _, last = span.partition("-")
        met = [r for r in served if Span(first, last or first).covers(r)]
        assert met, f"no default served release meets {describe}"


# -- the checks: one definition each ------------------------------------------

# the checks, one module per theme, and the one place that imports them
THEMES = TIER / "vllm_tier" / "checks"
# the modules that read the registry (and the program around them)
READERS = ("plan", "prepare", "session", "verdicts", "results")


def constants(path: Path) -> list[tuple[int, str]]:
    return [
        (n.lineno, n.value)
        for n in ast.walk(ast.parse(path.read_text()))
        if isinstance(n, ast.Constant) and isinstance(n.value, str)
    ]


def definition(c: Check) -> tuple[Path, range]:
    """The file of a check's class and the lines of its definition."""
    path = Path(inspect.getfile(type(c)))
    tree = ast.parse(path.read_text())
    node = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == type(c).__name__)
    return path, range(node.lineno, (node.end_lineno or node.lineno) + 1)


def test_a_check_is_named_in_its_definition_only():
    """Its name is one string in the code: its definition's ``name``, in
    the module of its theme."""
    where: dict[str, list[tuple[Path, int]]] = {name: [] for name in CHECKS}
    for path in sources(TIER):
        for line, value in constants(path):
            for name in CHECKS:
                if value in (name, f"test_{name}"):
                    where[name].append((path, line))
    for name, found in where.items():
        path, lines = definition(CHECKS[name])
        assert path.parent == THEMES and len(found) == 1 and found[0][0] == path, (
            f"{name} is named in {found}: its definition in vllm_tier/checks/ says it once"
        )
        assert found[0][1] in lines, f"{name} is named outside its class in {path.name}"


def themes() -> list[str]:
    """The theme modules checks/__init__.py imports, in its order."""
    tree = ast.parse((THEMES / "__init__.py").read_text())
    return [
        a.name
        for n in tree.body
        if isinstance(n, ast.ImportFrom) and n.level == 1 and n.module is None
        for a in n.names
    ]


def registered_in(path: Path) -> list[str]:
    """The classes ``path`` registers (``@check`` on them), in its order."""
    return [
        n.name
        for n in ast.parse(path.read_text()).body
        if isinstance(n, ast.ClassDef)
        and any(isinstance(d, ast.Name) and d.id == "check" for d in n.decorator_list)
    ]


def test_the_checks_are_registered_in_one_place_in_its_order():
    """checks/__init__.py imports every theme module, and CHECKS (the order
    of the plan, the builds and runs, the report) is their checks in the
    order of its imports, each module's in the order of its definitions: a
    theme imports only the themes before it, and no other tier module
    registers a check."""
    order = themes()
    assert sorted(order) == sorted(p.stem for p in THEMES.glob("*.py") if p.stem != "__init__")
    want = [cls for t in order for cls in registered_in(THEMES / f"{t}.py")]
    assert [type(c).__name__ for c in CHECKS.values()] == want
    for i, theme in enumerate(order):
        tree = ast.parse((THEMES / f"{theme}.py").read_text())
        uses = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.level == 1}
        uses |= {
            a.name
            for n in ast.walk(tree)
            if isinstance(n, ast.ImportFrom) and n.level == 1 and n.module is None
            for a in n.names
        }
        assert uses & set(order) <= set(order[:i]), f"{theme} imports a theme after it"
    elsewhere = [str(p.relative_to(ROOT)) for p in sources(TIER) if p.parent != THEMES]
    assert not [p for p in elsewhere if registered_in(ROOT / p)], "a check outside checks/"


def test_the_readers_hold_no_check_of_their_own():
    """plan, prepare, session, verdicts, results, the program and the outer
    tests reach a check only through the registry, and the registry and the
    place that fills it hold none: none names a check's class."""
    classes = {type(c).__name__ for c in CHECKS.values()}
    paths = [TIER / "vllm_tier" / f"{m}.py" for m in (*READERS, "registry")]
    paths += [TIER / "tier.py", TIER / "test_releases.py", THEMES / "__init__.py"]
    for path in paths:
        tree = ast.parse(path.read_text())
        names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
        names |= {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
        names |= {a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}
        assert not names & classes, f"{path.name} names {sorted(names & classes)}"


@pytest.mark.parametrize("name", sorted(CHECKS))
def test_each_check_defines_every_part(name):
    c = CHECKS[name]
    for part in ("why_none", "runs", "verdict"):
        assert getattr(type(c), part) is not getattr(Check, part), f"{name} has no {part}"
    assert c.summary, name
    assert isinstance(c.why_none([FIRST]), str) and c.why_none([FIRST])
    if isinstance(c, served.Served):
        assert c.modes and set(c.defaults()) <= set(releases.default()), name


def test_one_check_is_quoted_and_served_modes_are_unique():
    """`vpatch pr` quotes one check's runs; mutants.py names a served run by
    its mode."""
    assert sum(c.quoted for c in CHECKS.values()) == 1
    modes = [m for c in served.registered() for m in c.modes]
    assert len(modes) == len(set(modes)), modes


def test_a_name_is_one_check():
    with pytest.raises(TypeError, match="two checks named 'patch_effects'"):

        @check
        class Again(Check):
            """Again."""

            name = "patch_effects"


def test_run_check_cuts_the_plan_to_the_named_checks():
    """`tier.py run --check NAME` runs that check's releases of the plan
    alone; a name no check has is bad input, one line naming the checks."""
    default = list(releases.default())
    wanted = plan.plan(default)
    present = {c for checks in wanted.values() for c in checks}
    name = min(present, key=lambda c: sum(c in checks for checks in wanted.values()))
    cut = plan.only(wanted, [name])
    assert cut == {r: [name] for r, checks in wanted.items() if name in checks} != {}
    assert set(cut) < set(wanted)  # releases without it are left out
    with pytest.raises(TierError, match=f"no check named nope .*{name}"):
        plan.only(wanted, [name, "nope"])


def test_a_new_check_is_one_definition(tmp_path, monkeypatch):
    """Registered, a check is planned, built, run and judged, and its outer
    test is made: nothing else is written for it."""
    calls = []

    @check
    class Tried(Check):
        """An outer test's docstring."""

        name = "tried_here"

        def applies(self, release):
            return release == FIRST

        def why_none(self, selected):
            return f"not {FIRST}"

        def build(self, release):
            calls.append(("build", release))
            return tmp_path / "made"

        def runs(self, job):
            return [run(v, f"x-{v}", extra_env={"MADE": str(job.made)}) for v in ("u", "p")]

        def verdict(self, res, release):
            got = res.run(self.name, release, "x-p")
            return Verdict(f"tried {release} {got.variant}", bad=[] if got.cases else ["none"])

    def fake_run(release, variant, out, *, fixtures, **options):
        calls.append(("run", release, variant, options["extra_env"]["MADE"]))
        case = runner.Case("t::a", "passed")
        return runner.InnerRun(release, variant, 0, 1.0, out / "j", out / "l", {"a": case})

    monkeypatch.setattr(runner, "run_inner", fake_run)
    monkeypatch.setattr(models, "ensure", lambda release: tmp_path / "fixtures")
    try:
        selected = [FIRST, LAST]
        planned = plan.plan(selected)
        assert "tried_here" in planned[FIRST] and "tried_here" not in planned[LAST]
        assert plan.why_none("tried_here", [LAST]) == f"not {FIRST}"
        session = Session(tmp_path, selected, {FIRST: ["tried_here"]})
        session.start("tried_here", FIRST, prepare.build("tried_here", FIRST))
        session.finish()
        made = str(tmp_path / "made")
        assert sorted(calls) == [("build", FIRST), *(("run", FIRST, v, made) for v in "pu")]
        report = verdicts.report(session.results())
        assert f"tried {FIRST} p: OK" in report
        outer = _outer_tests()
        assert outer["test_tried_here"].__doc__ == "An outer test's docstring."
    finally:
        del CHECKS["tried_here"]


def _outer_tests() -> dict:
    """test_releases.py's outer tests, made anew from the registry."""
    import test_releases

    module = importlib.reload(test_releases)
    return {k: v for k, v in vars(module).items() if k.startswith("test_")}


# -- the tier's generated tables ----------------------------------------------


def test_the_tiers_generated_tables_are_fresh():
    """docs/tier.md, docs/cpu-bugs.md and tests/vllm/README.md's tables are
    what `tier.py docs` makes of the stand-ins and the checks (`make docs`
    mends them)."""
    stale = [label for _, _, changed in docs.generated(ROOT).values() for label in changed]
    assert stale == [], "stale: run `make docs`"


def test_a_stale_table_is_caught(tmp_path):
    for rel in {b.path for b in docs.blocks()}:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text((ROOT / rel).read_text())
    cpu_bugs = tmp_path / "docs" / "cpu-bugs.md"
    # the serving table's first row of a span, cut to its first release
    cut = re.sub(r"^\| ([\d.]+)-[\d.]+ \|", r"| \1 |", cpu_bugs.read_text(), count=1, flags=re.M)
    cpu_bugs.write_text(cut)
    got = [label for _, _, changed in docs.generated(tmp_path).values() for label in changed]
    assert got == ["docs/cpu-bugs.md (serving)"]


def test_the_results_file_is_what_vpatch_pr_reads(tmp_path):
    """results.json's "releases" are the quoted check's runs, in the shape
    `vpatch pr --results` reads; the file loads back."""
    from vllm_tier.results import Results
    from vpatch.pr.body import load_results

    quoted = next(name for name, c in CHECKS.items() if c.quoted)
    runs = {}
    for variant, outcome in (("unpatched", "xfailed"), ("patched", "passed")):
        case = runner.Case("t::a", outcome)
        got = runner.InnerRun(FIRST, variant, 0, 1.0, tmp_path / "j", tmp_path / "l", {"a": case})
        runs[quoted, FIRST, variant] = got
    other = runner.Case("t::b", "failed")
    runs["other", FIRST, "eager-patched"] = runner.InnerRun(
        FIRST, "patched", 1, 1.0, tmp_path / "j", tmp_path / "l", {"b": other}
    )
    res = Results([FIRST], {FIRST: [quoted]}, runs, when="now", quoted=quoted)
    res.save(tmp_path / "results.json")
    assert load_results(tmp_path / "results.json") == {
        FIRST: {
            "unpatched": {"passed": [], "failed": ["t::a"]},
            "patched": {"passed": ["t::a"], "failed": []},
            "when": "now",
        }
    }
    again = Results.load(tmp_path / "results.json")
    assert again.plan == res.plan and set(again.runs) == set(runs)
