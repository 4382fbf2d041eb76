"""The tier program's shape (tests/vllm, project python; nothing here runs
vLLM): where the stand-ins act is stated once (release/stand_ins.py), in a
module both sides import as any module is imported, which imports nothing
but the standard library; no tier module is loaded by its file path."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TIER = ROOT / "tests" / "vllm"
INNER = TIER / "release"
for folder in (TIER, INNER):  # as tier.py's folder, and as vllm_tier puts the inner one
    if str(folder) not in sys.path:
        sys.path.append(str(folder))

import stand_ins  # noqa: E402
from vllm_tier import plan, releases  # noqa: E402

# What the tier side (project python) may import from the inner suite's
# folder: modules that run on vLLM's python too and import only the stdlib.
SHARED = {"stand_ins"}
# Scripts of tests/vllm that run in a tier venv themselves (as a whole, or a
# worker of theirs: tests/vllm/README.md's "What runs where").
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
    outer = [p for p in sources(TIER) if INNER not in p.parents and p.name not in IN_A_VENV]
    wrong = {
        str(p.relative_to(ROOT)): sorted(imported(p) & inner - SHARED)
        for p in outer
        if imported(p) & inner - SHARED
    }
    assert not wrong, f"the tier imports inner modules that need vLLM's python: {wrong}"


@pytest.mark.parametrize("name", sorted(SHARED))
def test_a_shared_module_imports_only_the_stdlib(name):
    got = imported(INNER / f"{name}.py") - {"__future__"}
    assert got <= set(sys.stdlib_module_names), sorted(got - set(sys.stdlib_module_names))


def test_each_stand_in_spans_pinned_releases_without_overlap():
    pinned = releases.pins().versions()
    for s in stand_ins.STAND_INS:
        assert s.first in pinned and s.last in pinned, s.span()
        assert stand_ins.version(s.first) <= stand_ins.version(s.last), s.span()
    for kind in {s.kind for s in stand_ins.STAND_INS}:
        for v in pinned:
            acting = [s.span() for s in stand_ins.STAND_INS if s.kind == kind and s.covers(v)]
            assert len(acting) <= 1, f"{kind} on {v}: {acting}"


def test_the_stand_ins_decide_what_the_tier_derives():
    for v in releases.pins().versions():
        acting = stand_ins.acting(v)
        assert (releases.stand_in(v) is None) == (not acting), v
        assert releases.triton_interpreted(v) == any(s.kind == stand_ins.KERNELS for s in acting)


def test_the_default_served_releases_meet_each_unpatched_refusal():
    """The stood-in releases served by default are there to meet each text
    of the unpatched refusal (0.15-0.17): each text is met."""
    import unpatched  # release/: needs pytest only

    served = plan.default_served()["served_speculative_decoding"]
    for span in unpatched.EAGLE3_REFUSED:
        met = [r for r in served if span.covers(stand_ins.version(r))]
        assert met, f"no default served release meets {span.describe()}"
