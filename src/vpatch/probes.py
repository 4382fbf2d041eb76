"""What we know about each patch beyond its bytes: patches/patches.toml.

One table per patch, keyed by its slug (quilt.slug: a series' file name
without `NNNN-` and `.patch`); its `releases` are patchset.py's. This module
reads the rest:

  probe     checks that a release's own source already does what the patch
            does; all must hold. They read the structure of the code with
            `ast`, never our patch text: upstream writes the same behaviour
            differently.

A check names a `file` (a path, or a glob whose `*` stays within one folder:
any match will do), an optional scope (`class`, or `function` as
"Class.method" or "name"), and one test:

  has_base = "B"         the class lists B among its bases
  defines = "m"          the class defines method m
  uses = "x"             the scope mentions name or attribute x
  lacks = "x"            the scope exists and does not mention x (code
                         upstream removed); a missing scope does not hold
  when = "S", uses = "x" an if/elif whose test mentions the string S
                         reads x in its body
  guard = ["n", ...], uses = "x"
                         an if/elif whose test mentions every name n reads x
                         in its body (`if self.end_layer in self.aux_...:`);
                         an integer n is a constant the test holds
                         (`if 0 in self.aux_...:`)
  when = "S", includes = ["a", ...]
                         an if/elif whose test mentions the string S has in
                         its body a list/tuple/set literal holding every
                         string (an allowlist written inline in a branch)
  list = "n", includes = ["a", ...]
                         a list/tuple/set literal assigned to n holds every
                         string; with `or_absent = true` it also holds when
                         nothing is assigned to n (the allowlist is gone)
  is_none = "x"          the scope tests `x is None` or `x is not None`
  unconditional = "x"    the scope reads x outside every if/elif whose test
                         mentions x (a value applied always, not only when
                         set)

A check's anchor is the code it reads: a file matching `file` that defines
its scope (its class and function; the file itself when it names neither).
Where no check's anchor is left (`gone()`), the probe cannot hold whatever
upstream did; whether that means the defect is gone too is a maintainer's
decision, read from the release's source: patches.toml's `gone`
(patchset.About, env/readiness.py).

A table may also say how `vpatch pr` titles the patch for vLLM:
`pr_prefix` (vLLM's title prefixes, e.g. "[Bugfix][Model]") and `pr_title`.
"""

from __future__ import annotations

import ast
import functools
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from . import patchset
from .errors import ConfigError

TESTS = ("has_base", "defines", "uses", "lacks", "list", "is_none", "unconditional")
PR_KEYS = tuple(sorted(patchset.PROBE_KEYS - {"probe"}))  # pr_prefix, pr_title
_KEYS = {"file", "class", "function", "when", "guard", "includes", "or_absent", *TESTS}


@dataclass(frozen=True)
class Check:
    file: str
    cls: str = ""
    function: str = ""
    has_base: str = ""
    defines: str = ""
    uses: str = ""
    lacks: str = ""
    when: str = ""
    guard: tuple[str | int, ...] = ()
    list_name: str = ""  # the TOML key `list`
    includes: tuple[str, ...] = ()
    or_absent: bool = False
    is_none: str = ""
    unconditional: str = ""

    def words(self) -> list[str]:
        """Names the file must contain for the check to hold: a cheap text
        filter that spares parsing most files."""
        words = [self.cls, self.function.rsplit(".", 1)[-1], self.has_base, self.defines]
        names = [g for g in self.guard if isinstance(g, str)]
        words += [self.uses, self.when, *names, self.is_none, self.unconditional]
        if not self.or_absent:
            words += [self.list_name, *self.includes]
        return [w for w in words if w]


Probes = dict[str, list[Check]]


def _read(source: Path | patchset.PatchSet) -> tuple[Path, dict[str, Any]]:
    """patches.toml's tables: a patch set's, as parsed when it was loaded,
    or those of the file `source` (a series folder's)."""
    if isinstance(source, patchset.PatchSet):
        return source.toml, source.tables
    return source, patchset.read(source)


def load(source: Path | patchset.PatchSet) -> Probes:
    """{patch slug: checks} of every patch that declares a probe."""
    path, data = _read(source)
    for name, t in data.items():
        if not isinstance(t, dict):
            raise ConfigError(f"{path.name} [{name}]: not a table")
        unknown = set(t) - patchset.TABLE_KEYS - patchset.PROBE_KEYS
        if unknown:
            raise ConfigError(f"{path.name} [{name}]: unknown keys {', '.join(sorted(unknown))}")
    return {
        name: [_check(path, name, c) for c in t["probe"]]
        for name, t in data.items()
        if t.get("probe")
    }


def pr_titles(source: Path | patchset.PatchSet) -> dict[str, dict[str, str]]:
    """{patch slug: {"pr_prefix": ..., "pr_title": ...}} of the patches that say how
    `vpatch pr` titles them (either key may be absent)."""
    path, data = _read(source)
    out = {}
    for name, t in data.items():
        got = {k: t[k] for k in PR_KEYS if k in t}
        if not all(isinstance(v, str) and v.strip() for v in got.values()):
            raise ConfigError(f"{path.name} [{name}]: pr_prefix and pr_title are strings")
        if got:
            out[name] = got
    return out


def _check(path: Path, name: str, c: dict[str, Any]) -> Check:
    where = f"{path.name} [{name}]"
    unknown = set(c) - _KEYS
    if unknown:
        raise ConfigError(f"{where}: unknown check keys {', '.join(sorted(unknown))}")
    tests = [t for t in TESTS if t in c]
    if not tests and "when" in c and "includes" in c:
        tests = ["when"]  # when + includes: an inline allowlist in a branch
    if "when" in c and not set(tests) & {"uses", "when"}:
        raise ConfigError(f"{where}: when needs uses or includes")
    guard = c.get("guard", [])
    if "guard" in c and (
        tests != ["uses"]
        or "when" in c
        or not guard
        or not all(isinstance(g, str) or type(g) is int for g in guard)
    ):
        raise ConfigError(
            f"{where}: guard takes a list of names (or integers) and uses, without when"
        )
    if "file" not in c or len(tests) != 1:
        raise ConfigError(f"{where}: each check needs a file and one of {', '.join(TESTS)}")
    if "**" in c["file"]:
        raise ConfigError(f"{where}: '**' is not supported in file globs")
    if tests[0] in ("has_base", "defines") and "class" not in c:
        raise ConfigError(f"{where}: {tests[0]} needs a class")
    return Check(
        file=c["file"],
        cls=c.get("class", ""),
        function=c.get("function", ""),
        has_base=c.get("has_base", ""),
        defines=c.get("defines", ""),
        uses=c.get("uses", ""),
        lacks=c.get("lacks", ""),
        when=c.get("when", ""),
        guard=tuple(guard),
        list_name=c.get("list", ""),
        includes=tuple(c.get("includes", ())),
        or_absent=bool(c.get("or_absent", False)),
        is_none=c.get("is_none", ""),
        unconditional=c.get("unconditional", ""),
    )


def patterns(probes: Probes) -> set[str]:
    return {c.file for checks in probes.values() for c in checks}


def matches(path: str, pattern: str) -> bool:
    """Glob match where `*` does not cross folders, as Path.glob does."""
    p, pat = PurePosixPath(path), PurePosixPath(pattern)
    return len(p.parts) == len(pat.parts) and p.match(pattern)


def folder_files(root: Path, globs: set[str]) -> dict[str, str]:
    """The text of every file under root matching one of the globs."""
    out = {}
    for g in globs:
        for p in root.glob(g):
            if p.is_file():
                out[p.relative_to(root).as_posix()] = p.read_text(errors="replace")
    return out


def holds(checks: list[Check], files: Mapping[str, str]) -> bool:
    """Whether every check holds on files ({path: text}); no checks, no claim."""
    if not checks:
        return False
    return all(_holds(c, files) for c in checks)


def anchored(c: Check, files: Mapping[str, str]) -> bool:
    """Whether the code `c` reads is in files ({path: text}): a file matching
    c.file that defines c's class and function (any such file, when it names
    neither). A file that is not Python we can parse counts as holding it:
    absence is what must be shown."""
    names = [n for n in (c.cls, c.function.rsplit(".", 1)[-1]) if n]
    for path, text in files.items():
        if not matches(path, c.file) or not all(n in text for n in names):
            continue
        tree = _tree(text) if names else None
        if not names or tree is None or _scope(c, tree) is not None:
            return True
    return False


def gone(checks: list[Check], files: Mapping[str, str]) -> bool:
    """Whether no check's anchor is in files: the code the probe reads is
    absent (no checks, no claim)."""
    return bool(checks) and not any(anchored(c, files) for c in checks)


@functools.lru_cache(maxsize=32)
def _tree(text: str) -> ast.AST | None:
    """A file's syntax tree (None: not Python we can parse), once per text in
    a process: every patch's probe reads the same few large vLLM files
    (doctor parsed 22 times, a third of its time). Only read, never changed."""
    try:
        return ast.parse(text)
    except SyntaxError:
        return None


def _holds(c: Check, files: Mapping[str, str]) -> bool:
    for path, text in files.items():
        if not matches(path, c.file) or not all(w in text for w in c.words()):
            continue
        tree = _tree(text)
        if tree is not None and _test(c, tree):
            return True
    return False


def _scope(c: Check, tree: ast.AST) -> ast.AST | None:
    node: ast.AST | None = tree
    if c.cls:
        node = _find(tree, ast.ClassDef, c.cls)
    if node is not None and c.function:
        *outer, name = c.function.split(".")
        for part in outer:
            node = _find(node, ast.ClassDef, part)
            if node is None:
                return None
        node = _find(node, (ast.FunctionDef, ast.AsyncFunctionDef), name)
    return node


def _find(
    root: ast.AST, kind: type[ast.AST] | tuple[type[ast.AST], ...], name: str
) -> ast.AST | None:
    return next(
        (n for n in _statements(root) if isinstance(n, kind) and getattr(n, "name", None) == name),
        None,
    )


# The fields of a statement that hold statements (a match's cases and a try's
# handlers hold them one level down).
_BODIES = ("body", "orelse", "finalbody", "handlers", "cases")


def _statements(root: ast.AST) -> Iterator[ast.AST]:
    """root and the statements under it, in ast.walk's order (breadth first).
    Classes and functions are statements and no expression holds one, so
    _find skips the expressions: a fifth of the nodes of a vLLM file."""
    todo = deque([root])
    while todo:
        node = todo.popleft()
        yield node
        for name in _BODIES:
            for child in getattr(node, name, None) or ():
                if isinstance(child, ast.AST):
                    todo.append(child)


def _test(c: Check, tree: ast.AST) -> bool:
    scope = _scope(c, tree)
    if scope is None:
        return False
    if c.has_base:
        return isinstance(scope, ast.ClassDef) and any(_name(b) == c.has_base for b in scope.bases)
    if c.defines:
        return isinstance(scope, ast.ClassDef) and any(
            isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == c.defines
            for n in scope.body
        )
    if c.list_name:
        values = _assigned(scope, c.list_name)
        if not values:
            return c.or_absent
        return any(set(c.includes) <= _strings(v) for v in values)
    if c.is_none:
        return any(_tests_none(n, c.is_none) for n in ast.walk(scope))
    if c.guard:
        return any(
            isinstance(n, ast.If)
            and all(
                _holds_constant(n.test, g) if isinstance(g, int) else _mentions([n.test], g)
                for g in c.guard
            )
            and _mentions(n.body, c.uses)
            for n in ast.walk(scope)
        )
    if c.when:
        return any(
            isinstance(n, ast.If)
            and c.when in _strings_in(n.test)
            and (_mentions(n.body, c.uses) if c.uses else _literal_includes(n.body, c.includes))
            for n in ast.walk(scope)
        )
    if c.lacks:
        return not _mentions([scope], c.lacks)
    if c.unconditional:
        return _read_unconditionally(scope, c.unconditional)
    return _mentions([scope], c.uses)


def _name(node: ast.AST) -> str:
    """The last name of a base: B, mod.B, B[T] all give B."""
    if isinstance(node, ast.Subscript):
        node = node.value
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else ""


def _mentions(nodes: Sequence[ast.AST], name: str) -> bool:
    for root in nodes:
        for n in ast.walk(root):
            if (isinstance(n, ast.Name) and n.id == name) or (
                isinstance(n, ast.Attribute) and n.attr == name
            ):
                return True
    return False


def _holds_constant(node: ast.AST, value: int) -> bool:
    """node holds the integer constant value (True is no 1)."""
    return any(
        isinstance(n, ast.Constant) and type(n.value) is int and n.value == value
        for n in ast.walk(node)
    )


def _read_unconditionally(node: ast.AST, name: str) -> bool:
    """node reads name somewhere outside every if/elif whose test mentions it."""
    if isinstance(node, ast.If) and _mentions([node.test], name):
        return False  # its test, its body and its else are all conditional on name
    if (isinstance(node, ast.Name) and node.id == name) or (
        isinstance(node, ast.Attribute) and node.attr == name
    ):
        return True
    return any(_read_unconditionally(n, name) for n in ast.iter_child_nodes(node))


def _tests_none(n: ast.AST, name: str) -> bool:
    """n is `name is None` or `name is not None`."""
    return (
        isinstance(n, ast.Compare)
        and len(n.ops) == 1
        and isinstance(n.ops[0], (ast.Is, ast.IsNot))
        and isinstance(n.left, ast.Name)
        and n.left.id == name
        and isinstance(n.comparators[0], ast.Constant)
        and n.comparators[0].value is None
    )


def _assigned(scope: ast.AST, name: str) -> list[ast.AST]:
    out: list[ast.AST] = []
    targets: list[ast.expr]
    for n in ast.walk(scope):
        if isinstance(n, ast.Assign):
            targets = n.targets
        elif isinstance(n, ast.AnnAssign) and n.value is not None:
            targets = [n.target]
        else:
            continue
        if n.value is not None and any(isinstance(t, ast.Name) and t.id == name for t in targets):
            out.append(n.value)
    return out


def _literal_includes(nodes: Sequence[ast.AST], wanted: tuple[str, ...]) -> bool:
    """Some list/tuple/set literal under nodes holds every wanted string."""
    return any(set(wanted) <= _strings(n) for root in nodes for n in ast.walk(root))


def _strings(node: ast.AST) -> set[str]:
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        consts = [e.value for e in node.elts if isinstance(e, ast.Constant)]
        return {v for v in consts if isinstance(v, str)}
    return set()


def _strings_in(node: ast.AST) -> set[str]:
    return {
        n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)
    }
