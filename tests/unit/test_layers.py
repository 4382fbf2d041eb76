"""The package's shape: imports point one way (core, network, git, sources,
checkout, the libraries, commands, cli), no import cycles counting
function-level imports, and gitutil (a package) is the only one that runs git.
Each cli module is a command of the registry (cli.COMMANDS) and imports only
what it calls (CALLS, the one list kept by hand: it is a decision); commands/
holds only what orchestrates, each module called by a cli module; and two
modules share a base name only where they are one command in parallel
places; each package's docstring names every module it holds. And of the
tests and the benchmarks: none edits sys.path (the path is pyproject.toml's
`pythonpath`, a script's own folder, or a subprocess's PYTHONPATH)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from vpatch import cli as vpatch_cli

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
            "untrusted",
            "shown",
            "record",
            "rules",
            "serving",
            "lock",
            "quilt",
            "patchset",
            "patchset_write",
            "probes",
        ),
    ),
    ("network", ("network",)),
    ("git", ("gitutil",)),
    ("sources", ("sources",)),
    ("checkout", ("checkout", "threeway", "patchfiles")),
    ("libraries", ("releasefacts", "wheel", "env", "doctor", "postflight", "pr", "maintain")),
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


# -- commands: one layer where a command only forwards ---------------------------------

# commands/ holds a module only where a command orchestrates libraries (resolves
# what the user named, calls several in order); where one library function does
# the whole job, the cli module's execute calls it, as auditwheel's main_<cmd>.py do.
# Which modules those are is the folder's: each must orchestrate (no function of
# it only forwards) and be what a cli module calls (CALLS).
ORCHESTRATING = {m.split(".")[1] for m in MODULES if m.startswith("commands.")}
# The commands, from the registry `vpatch --help` lists (cli/__init__.py)
COMMANDS = {f"cli.{m.__name__.rsplit('.', 1)[1]}" for m in vpatch_cli.COMMANDS}

# What each cli module calls: its command module, or the one library module that
# does the whole job. Beside it a cli module imports cli/ siblings and the core
# modules that do no work (CLI_CORE: the lock it loads, the errors it raises, the
# bounds options read, the results' type and the escaping of what it prints), and
# nothing else: no library helper, and no formatter, since a result says itself
# (shown.Shown: lines, to_json) and options.show prints it (test_one_way_to_the_screen).
CALLS = {
    "cli": {"gitutil", "maintain.docs"},  # scrub_environ; the docs' Block, a type
    "cli.options": set(),
    "cli.apply": {"commands.apply"},
    "cli.carry": {"commands.carry"},
    "cli.check": {"env.check"},
    "cli.docs": {"maintain.docs"},
    "cli.doctor": {"commands.doctor"},
    "cli.export": {"commands.export"},
    "cli.fetch": {"commands.apply"},
    "cli.install": {"env.install"},
    "cli.lint": {"maintain.lint"},
    "cli.lock": {"sources.refresh"},
    "cli.matrix": {"commands.matrix"},
    "cli.port": {"maintain.port"},
    "cli.pr": {"pr.draft"},
    "cli.releases": {"sources.releases"},
    "cli.series": {"commands.export"},
    "cli.status": {"commands.apply"},
    "cli.unapply": {"commands.apply"},
    "cli.uninstall": {"env.install"},
    "cli.verify_wheel": {"commands.verify_wheel"},
    "cli.wheel": {"commands.wheel"},
}
CLI_CORE = {"lock", "errors", "settings", "untrusted", "shown"}


def test_each_command_module_is_what_a_cli_module_calls():
    called = {c for calls in CALLS.values() for c in calls}
    orphans = sorted(f"commands.{m}" for m in ORCHESTRATING if f"commands.{m}" not in called)
    assert not orphans, f"no cli module calls {orphans}: list the call in CALLS, or remove it"


def test_each_cli_module_is_a_registered_command():
    """Every cli module but the package's own parts (cli/__init__.py, its
    options and __main__) is a command of cli.COMMANDS, and each command
    is one of them."""
    ours = {m for m in MODULES if m.split(".")[0] == "cli"} - {"cli", "cli.options", "cli.__main__"}
    assert ours == COMMANDS, "register a command in cli.COMMANDS, in `vpatch --help`'s order"


def forwards(fn: ast.FunctionDef) -> bool:
    """Whether a function is one `return f(...)` of its own parameters, as given."""
    body = [
        n for n in fn.body if not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant))
    ]
    if len(body) != 1 or not isinstance(body[0], ast.Return):
        return False
    call = body[0].value
    if not isinstance(call, ast.Call):
        return False
    params = {a.arg for a in [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]}
    given = [*call.args, *(k.value for k in call.keywords)]
    return all(isinstance(v, ast.Name) and v.id in params for v in given)


@pytest.mark.parametrize("module", sorted(m for m in MODULES if m.startswith("commands.")))
def test_no_command_only_forwards(module):
    tree = ast.parse(MODULES[module].read_text())
    functions = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
    assert functions, f"vpatch.{module} defines no function: it only re-exports"
    passing = [f.name for f in functions if forwards(f)]
    assert not passing, f"vpatch.{module}: {passing} only forward: call the library from cli/"


def test_the_cli_imports_only_what_it_calls():
    ours = sorted(m for m in MODULES if m.split(".")[0] == "cli" and m != "cli.__main__")
    assert set(ours) == set(CALLS) == COMMANDS | {"cli", "cli.options"}, (
        "list what a new cli module calls in CALLS"
    )
    for module in ours:
        allowed = CLI_CORE | CALLS[module]
        allowed |= {".".join(m.split(".")[:i]) for m in CALLS[module] for i in range(1, 3)}
        wrong = sorted(m for m in imports(module) if m.split(".")[0] != "cli" and m not in allowed)
        assert not wrong, f"vpatch.{module} calls {CALLS[module]} and imports {wrong} too"


# -- one way to the screen -------------------------------------------------------------

# A command's result reaches stdout through one function, which escapes each line
# (cli/options.py show); what else vpatch prints goes to stderr (progress, the one
# error line), and no module writes to sys.stdout itself.
SHOW = ("cli.options", "show")


def printing(path: Path) -> list[tuple[str, int, bool]]:
    """Each print() or sys.stdout write in a module: (the function it is in,
    its line, whether it writes to stdout)."""
    found = []

    def visit(node: ast.AST, where: str) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            where = node.name
        if isinstance(node, ast.Call):
            f = node.func
            if isinstance(f, ast.Name) and f.id == "print":
                to = next((k.value for k in node.keywords if k.arg == "file"), None)
                stderr = isinstance(to, ast.Attribute) and to.attr == "stderr"
                found.append((where, node.lineno, not stderr))
            elif isinstance(f, ast.Attribute) and f.attr == "write":
                if ast.unparse(f.value) == "sys.stdout":
                    found.append((where, node.lineno, True))
        for child in ast.iter_child_nodes(node):
            visit(child, where)

    visit(ast.parse(path.read_text()), "")
    return found


def test_one_way_to_the_screen():
    """stdout is cli.options.show's alone, and each command shows its result
    through it: no command prints a line of its own."""
    other = [
        f"vpatch.{m}:{line} ({fn or 'the module'})"
        for m, p in MODULES.items()
        for fn, line, stdout in printing(p)
        if stdout and (m, fn) != SHOW
    ]
    assert not other, f"show the result with cli.options.show: {other}"
    assert [s for _, _, s in printing(MODULES[SHOW[0]]) if s], "the check must see show's print"
    silent = sorted(
        c
        for c in COMMANDS
        if "show"
        not in {
            n.id for n in ast.walk(ast.parse(MODULES[c].read_text())) if isinstance(n, ast.Name)
        }
    )
    assert not silent, f"these commands do not show their result: {silent}"


def test_a_print_of_its_own_is_seen(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import sys\n\ndef f():\n    print('x')\n    print('e', file=sys.stderr)\n"
        "    sys.stdout.write('y')\n    sys.stdout.flush()\n    out.write('w')\n\nprint('z')\n"
    )
    assert printing(probe) == [("f", 4, True), ("f", 5, False), ("f", 6, True), ("", 10, True)]


# -- names: one base name, one thing --------------------------------------------------

# A base name more than one module (or package) has is one command in parallel
# places: cli/<name>.py, commands/<name>.py, and the library it calls. Any other
# two modules with one name mean two things: name them for what they are.


def base_names() -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for m in MODULES:
        name = m.split(".")[-1]
        if name not in ("__init__", "__main__"):
            out.setdefault(name, set()).add(m)
    return {name: ms for name, ms in out.items() if len(ms) > 1}


SHARED = base_names()


def test_names_are_shared_at_all():
    """The check below has names to hold (the commands share theirs today)."""
    assert {"cli.apply", "commands.apply"} <= SHARED.get("apply", set()), SHARED


@pytest.mark.parametrize("name", sorted(SHARED))
def test_a_shared_name_is_one_command_in_parallel_places(name):
    """cli/<name>.py is there, and each other module of the name is its
    commands/<name>.py or what that or the cli module imports (a package:
    a module of it)."""
    cli, command = f"cli.{name}", f"commands.{name}"
    assert cli in SHARED[name], (
        f"{sorted(SHARED[name])} share a name and are no command's: name them for what they are"
    )
    called = imports(cli) | (imports(command) if command in MODULES else set())
    for m in SHARED[name] - {cli, command}:
        assert any(c == m or c.startswith(f"{m}.") for c in called), f"{cli} does not call {m}"


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


LONGEST = 600  # lines: a module past it does more than one job


def test_no_module_is_over_600_lines():
    over = {m: n for m, p in MODULES.items() if (n := len(p.read_text().splitlines())) > LONGEST}
    assert not over, f"split these by job: {over}"


# -- what a package says it holds -------------------------------------------------


def named(doc: str, name: str) -> bool:
    """Whether a docstring names a module or subpackage: its name as a word
    of its own (`server`, `server.py`, `checks/`), not part of a longer name
    (`port` is not named by `export` or `vpatch.port`)."""
    return re.search(rf"(?<![\w.-]){re.escape(name)}(?![\w-])", doc) is not None


def unnamed(package: Path, registered: frozenset[str] = frozenset()) -> list[str]:
    """The modules and subpackages of `package` its docstring does not name,
    but for those its `__init__` registers."""
    doc = ast.get_docstring(ast.parse((package / "__init__.py").read_text())) or ""
    held = [p.stem for p in package.glob("*.py") if not p.stem.startswith("__")]
    held += [p.name for p in package.iterdir() if (p / "__init__.py").is_file()]
    return [name for name in sorted(held) if name not in registered and not named(doc, name)]


# A package whose __init__ lists its modules in a registry, which names them there
# (cli.COMMANDS, in `vpatch --help`'s order): its docstring says what they are.
REGISTERED = {"cli": frozenset(c.split(".")[1] for c in COMMANDS)}


def test_each_package_names_what_it_holds():
    """Each package's docstring says what it holds: every module and
    subpackage in it is named there (or in its registry), so that a module
    added or moved is said where a reader of the package looks first. The
    top-level modules are LAYERS' (a module in no layer fails
    test_imports_point_down)."""
    packages = sorted(p.parent for p in PKG.rglob("__init__.py") if p.parent != PKG)
    missing = [
        f"{p.relative_to(PKG)}/{name}"
        for p in packages
        for name in unnamed(p, REGISTERED.get(p.relative_to(PKG).as_posix(), frozenset()))
    ]
    assert not missing, f"name these in their package's __init__.py docstring: {missing}"


def test_a_package_that_does_not_name_a_module_is_seen(tmp_path):
    (tmp_path / "__init__.py").write_text('"""port (3-way), the verify-wheel\nlint."""\n')
    for name in ("port", "lint", "verify", "export"):
        (tmp_path / f"{name}.py").write_text("")
    (tmp_path / "checks").mkdir()
    (tmp_path / "checks" / "__init__.py").write_text("")
    assert unnamed(tmp_path) == ["checks", "export", "verify"]
    assert unnamed(tmp_path, frozenset({"export"})) == ["checks", "verify"]


# -- the tests' and the benchmarks' path -----------------------------------------------

TESTS = PKG.parents[1] / "tests"
BENCHMARKS = PKG.parents[1] / "benchmarks"  # modules of their package (benchmarks/__init__.py)
# Mutating sys.path: a method that changes the list in place, or a function
# that adds to it.
PATH_EDITS = {"insert", "append", "extend", "remove", "pop", "clear", "addsitedir"}
# The one module that puts a folder on the path as what it stands in for, not
# to import a test's module: the V2-runner plugin puts the stand-in Triton
# backend and the "vllm" dist-info of a vLLM process on that process's path
# (and its children's PYTHONPATH) when a run asks for the V2 runner, as an
# installed triton-cpu or vllm distribution would be (see its docstring).
STANDS_IN_ON_THE_PATH = {"vllm/release/tier_plugins/cpu_v2_runner.py"}


def path_edits(path: Path) -> list[int]:
    """The lines where ``path`` changes sys.path: a mutating call on it, an
    assignment to it or to an item of it, or site.addsitedir."""

    def is_sys_path(node: ast.AST) -> bool:
        if isinstance(node, ast.Subscript):
            node = node.value
        return (
            isinstance(node, ast.Attribute)
            and node.attr == "path"
            and isinstance(node.value, ast.Name)
            and node.value.id == "sys"
        )

    lines = []
    for node in ast.walk(ast.parse(path.read_text())):
        edit = False
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            edit = node.func.attr == "addsitedir" or (
                node.func.attr in PATH_EDITS and is_sys_path(node.func.value)
            )
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            edit = any(is_sys_path(t) for t in targets)
        if edit:
            lines.append(node.lineno)
    return lines


def test_no_test_or_benchmark_edits_sys_path():
    """A test module, helper, tier script or benchmark imports what the
    configured path holds: editing sys.path makes a bare import work only by
    path order."""
    sources = sorted([*TESTS.rglob("*.py"), *BENCHMARKS.rglob("*.py")])
    assert any(p.is_relative_to(BENCHMARKS) for p in sources), "the benchmarks are gone"
    exempt = {TESTS / rel for rel in STANDS_IN_ON_THE_PATH}
    assert exempt <= set(sources), "STANDS_IN_ON_THE_PATH names a module that is gone"
    hits = [
        f"{p.relative_to(PKG.parents[1])}:{n}"
        for p in sources
        if p not in exempt
        for n in path_edits(p)
    ]
    assert not hits, f"put the folder on the path in pyproject.toml or PYTHONPATH: {hits}"


@pytest.mark.parametrize(
    "edit",
    [
        "sys.path.insert(0, 'x')",
        "sys.path.append('x')",
        "sys.path.extend(['x'])",
        "sys.path[:0] = ['x']",
        "sys.path += ['x']",
        "sys.path = ['x']",
        "site.addsitedir('x')",
    ],
)
def test_each_way_of_editing_the_path_is_seen(tmp_path, edit):
    probe = tmp_path / "probe.py"
    probe.write_text(f"import site\nimport sys\n\nif 'x' not in sys.path:\n    {edit}\n")
    assert path_edits(probe) == [5]


# One helper runs the CLI in a child process: support/cli.py (vpatch(), or
# command() and environment() for other stdio). The tier's program builds
# and applies with the project's python in modules of its own (vllm_tier),
# where no test runs.
RUNS_THE_CLI = {"support/cli.py"}
SPELLING = '"vpatch' + '.cli"'  # as a child's argv spells the module (not here)


def test_one_helper_runs_the_cli():
    spelled = [
        str(p.relative_to(TESTS))
        for p in sorted(TESTS.rglob("*.py"))
        if "vllm_tier" not in p.parts and SPELLING in p.read_text()
    ]
    assert sorted(spelled) == sorted(RUNS_THE_CLI), "run it with support.cli.vpatch"


# A test file past LONGEST lines says why at its top: a comment beginning
# "# Over 600 lines:" before its first import (after the module docstring).
REASON = "# Over 600 lines:"


def over_without_a_reason(path: Path) -> bool:
    lines = path.read_text().splitlines()
    top = next((i for i, ln in enumerate(lines) if ln.startswith(("import ", "from "))), 0)
    return len(lines) > LONGEST and not any(ln.startswith(REASON) for ln in lines[:top])


def test_no_test_file_is_over_600_lines_without_a_reason():
    over = [
        f"{p.relative_to(TESTS)} ({len(p.read_text().splitlines())})"
        for p in sorted(TESTS.rglob("*.py"))
        if over_without_a_reason(p)
    ]
    assert not over, f"split these by concern, or say why at the top ({REASON} ...): {over}"


def test_a_long_file_without_its_reason_is_seen(tmp_path):
    body = "x = 1\n" * LONGEST
    (tmp_path / "short.py").write_text(body)
    (tmp_path / "long.py").write_text(body + "x = 2\n")
    (tmp_path / "said.py").write_text(f'"""Doc."""\n\n{REASON} one table.\nimport os\n' + body)
    (tmp_path / "late.py").write_text(f"import os\n\n{REASON} one table.\n" + body)
    names = ("short", "long", "said", "late")
    got = [over_without_a_reason(tmp_path / f"{n}.py") for n in names]
    assert got == [False, True, False, True]
