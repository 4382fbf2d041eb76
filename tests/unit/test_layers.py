"""The package's shape: imports point one way (core, git, sources, checkout,
the wheel/env/doctor/pr libraries, commands, cli), no import cycles counting
function-level imports, and gitutil (a package) is the only one that runs git."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[2] / "src" / "vpatch"
# lowest first; a module may import modules of its own layer or below
LAYERS = (
    (
        "core",
        (
            "errors",
            "paths",
            "resources",
            "jsontext",
            "settings",
            "record",
            "rules",
            "lock",
            "quilt",
            "patchset",
            "probes",
        ),
    ),
    ("git", ("gitutil",)),
    ("sources", ("sources",)),
    ("checkout", ("checkout",)),
    ("libraries", ("wheel", "env", "doctor", "pr", "maintain")),
    ("commands", ("commands",)),
    ("cli", ("cli", "__main__")),
)


def modules() -> dict[str, Path]:
    out = {}
    for p in PKG.rglob("*.py"):
        parts = p.relative_to(PKG).with_suffix("").parts
        name = ".".join(parts).removesuffix(".__init__").removesuffix("__init__")
        out[name or "__init__"] = p
    return out


MODULES = modules()


def layer(module: str) -> int:
    head = module.split(".")[0]
    for i, (_, names) in enumerate(LAYERS):
        if head in names:
            return i
    if module == "__init__":
        return 0
    raise AssertionError(f"vpatch.{module} belongs to no layer: add it to LAYERS")


def imports(module: str) -> set[str]:
    """The vpatch modules `module` imports, anywhere in it."""
    path = MODULES[module]
    package = module.split(".")[:-1] if path.name != "__init__.py" else module.split(".")
    if module == "__init__":
        package = []
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                parts = [*base, *(node.module.split(".") if node.module else [])]
            elif node.module and node.module.split(".")[0] == "vpatch":
                parts = node.module.split(".")[1:]
            else:
                continue
            target = ".".join(parts)
            # `from .pkg import name` reads name from pkg/__init__.py (or runs it
            # before its submodule): pkg is imported too
            found.add(target)
            for alias in node.names:
                sub = f"{target}.{alias.name}" if target else alias.name
                found.add(sub if sub in MODULES else target)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "vpatch":
                    found.add(".".join(alias.name.split(".")[1:]))
    return {m for m in found if m in MODULES and m != module}


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_point_down(module):
    mine = layer(module)
    up = sorted(m for m in imports(module) if layer(m) > mine)
    assert not up, f"vpatch.{module} ({LAYERS[mine][0]}) imports higher layers: {up}"


def test_commands_do_not_import_each_other():
    for module in MODULES:
        if module.startswith("commands."):
            others = [m for m in imports(module) if m.startswith("commands.")]
            assert not others, f"vpatch.{module} imports {others}: move the shared part down"


def test_no_import_cycles():
    graph = {m: imports(m) for m in MODULES}
    state: dict[str, int] = {}

    def visit(m: str, path: list[str]) -> None:
        state[m] = 1
        for n in graph[m]:
            if state.get(n) == 1:
                raise AssertionError("import cycle: " + " -> ".join([*path, m, n]))
            if n not in state:
                visit(n, [*path, m])
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [])


def runs_git(path: Path) -> list[str]:
    """Lines where a module imports GitPython or starts a `git` process."""
    hits = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module]
            if any(n and n.split(".")[0] in ("git", "gitdb") for n in names):
                hits.append(f"{path.name}:{node.lineno} imports GitPython")
        elif isinstance(node, (ast.List, ast.Tuple)) and node.elts:
            first = node.elts[0]
            if isinstance(first, ast.Constant) and first.value == "git":
                hits.append(f"{path.name}:{node.lineno} runs git")
    return hits


def test_only_gitutil_runs_git():
    ours = [m for m in MODULES if m.split(".")[0] == "gitutil"]
    assert any(runs_git(MODULES[m]) for m in ours), "the check itself must see gitutil's git"
    hits = [h for m, p in MODULES.items() if m not in ours for h in runs_git(p)]
    assert not hits, hits


# a package's __init__ with code is tested under another name
TESTED_AS = {"sources": "sources/test_materialize.py"}


def test_every_module_has_its_test_module():
    unit = Path(__file__).resolve().parent
    missing = []
    for module, path in sorted(MODULES.items()):
        body = ast.parse(path.read_text()).body
        docstring_only = all(
            isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant) for n in body
        )
        if module.split(".")[-1] in ("__init__", "__main__") or docstring_only:
            continue  # entry points and package files with nothing but a docstring
        parts = module.split(".")
        test = TESTED_AS.get(module) or "/".join([*parts[:-1], f"test_{parts[-1]}.py"])
        if not (unit / test).is_file():
            missing.append(f"vpatch.{module}: tests/unit/{test}")
    assert not missing, missing


def loads_the_lock(path: Path) -> list[str]:
    """Lines where a module loads VERSIONS.lock (calls vpatch.lock.load)."""
    hits, names = [], {"lock"}
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            for a in node.names:
                if a.name == "load" and (node.module or "").split(".")[-1] == "lock":
                    hits.append(f"{path.name}:{node.lineno} imports lock.load")
                elif a.name == "lock" and a.asname:
                    names.add(a.asname)
    for node in ast.walk(tree):
        f = node.func if isinstance(node, ast.Call) else None
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.attr == "load":
            hits += [f"{path.name}:{node.lineno} calls {f.value.id}.load()"] * (f.value.id in names)
    return hits


def test_only_the_cli_loads_the_lock():
    """The CLI loads VERSIONS.lock (and with it the patch set) once and passes
    it down as `pins`: a library or command that loads it again reads and
    parses the files again, and may read other data than the caller's."""
    assert loads_the_lock(MODULES["cli.lock"]), "the check itself must see the CLI's load"
    hits = [h for m, p in MODULES.items() if layer(m) < len(LAYERS) - 1 for h in loads_the_lock(p)]
    assert not hits, hits


LONGEST = 600  # lines: a module past it does more than one job (issue 36)


def test_no_module_is_over_600_lines():
    over = {m: n for m, p in MODULES.items() if (n := len(p.read_text().splitlines())) > LONGEST}
    assert not over, f"split these by job: {over}"
