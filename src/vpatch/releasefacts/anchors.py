"""What a fact probe reads of a release, and whether the release has it.

A Source holds a release's files ({path: text}) by the keys of the probes'
FILES (facts.py) and records every anchor a probe asks for: a file,
and a class, function or method in it, each with whether the release has
it. facts.unreadable() compares two releases' anchors; moved() searches a
release for where an anchor's scope went."""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .. import probes


@dataclass(frozen=True, order=True)
class Anchor:
    """What a probe reads: a file (a path or glob of FILES), and a class,
    function or method in it ("" for the file itself)."""

    file: str
    scope: str = ""

    def __str__(self) -> str:
        return f"{self.file} {self.scope}" if self.scope else self.file


class Source:
    """A release's files by FILES' keys: text, parsed scopes; every file and
    scope asked for is recorded with whether the release has it."""

    def __init__(
        self,
        files: Mapping[str, str],
        paths: Mapping[str, str],
        reads: Mapping[str, Callable[[Source], Any]],
        gated: bool = True,
    ):
        self.files = files
        self.paths = paths  # {key: a path or glob} (facts.FILES)
        self.reads = reads  # {fact: its probe} (facts.PROBES)
        self.gated = gated  # False: the probes as they were before any gate
        self.asked: dict[Anchor, bool] = {}
        self._facts: dict[str, tuple[Any, dict[Anchor, bool]]] = {}

    def _mark(self, anchor: Anchor, found: bool) -> bool:
        self.asked[anchor] = self.asked.get(anchor, False) or found
        return found

    def text(self, key: str) -> str:
        pattern = self.paths[key]
        got = next((t for p, t in self.files.items() if probes.matches(p, pattern)), "")
        self._mark(Anchor(pattern), bool(got))
        return got

    def either(self, *keys: str) -> tuple[str, str]:
        """(key, text) of the first of `keys` the release has (one anchor:
        any of them), else ("", "")."""
        pattern = " | ".join(self.paths[k] for k in keys)
        for k in keys:
            got = next((t for p, t in self.files.items() if probes.matches(p, self.paths[k])), "")
            if got:
                self._mark(Anchor(pattern), True)
                return k, got
        self._mark(Anchor(pattern), False)
        return "", ""

    def all(self, key: str) -> dict[str, str]:
        got = {p: t for p, t in self.files.items() if probes.matches(p, self.paths[key])}
        self._mark(Anchor(self.paths[key]), bool(got))
        return got

    def segment(self, key: str, path: str) -> str:
        """The source of `path` (Class.method, a class or a function) in the
        file; "" where either is missing."""
        text = self.text(key)
        node = _find(parse(text), path) if text else None
        self._mark(Anchor(self.paths[key], path), node is not None)
        return (ast.get_source_segment(text, node) or "") if node else ""

    def defines(self, key: str, name: str) -> dict[str, str]:
        """{path: text} of the files of `key` (a glob) that define class or
        function `name`."""
        got = {p: t for p, t in self.all(key).items() if _find(parse(t), name) is not None}
        self._mark(Anchor(self.paths[key], name), bool(got))
        return got

    def holds(self, key: str, **check: Any) -> bool:
        """A probes.py check on the file (the patch probes' mechanism)."""
        c = probes.Check(file=self.paths[key], **check)
        scope = ".".join(x for x in (c.cls, c.function) if x)
        if scope:
            self.segment(key, scope)
        return probes.holds([c], self.all(key))

    def fact(self, name: str) -> Any:
        """Another field's value, its anchors counted as this probe's too
        (a gate: what the release has decides what else there is to read)."""
        if name not in self._facts:
            outer, self.asked = self.asked, {}
            try:
                self._facts[name] = (self.reads[name](self), self.asked)
            finally:
                self.asked = outer
        value, anchors = self._facts[name]
        for a, found in anchors.items():
            self._mark(a, found)
        return value


@functools.lru_cache(maxsize=16)
def parse(text: str) -> ast.AST:
    """A file's tree, once per text: the probes read a few large files often."""
    try:
        return ast.parse(text)
    except SyntaxError:
        return ast.Module(body=[], type_ignores=[])


def _find(tree: ast.AST, path: str) -> ast.AST | None:
    node = tree
    for part in path.split("."):
        found = next(
            (
                n
                for n in ast.walk(node)
                if isinstance(n, (ast.ClassDef, ast.FunctionDef)) and n.name == part
            ),
            None,
        )
        if found is None:
            return None
        node = found
    return node


# Where moved() looks: every Python file of the release's vllm/, to this depth.
SEARCHED = frozenset("vllm/" + "*/" * depth + "*.py" for depth in range(8))


def moved(anchor: Anchor, files: Mapping[str, str]) -> list[str]:
    """Where the release has what `anchor` names: the files that define its
    scope's last name (a class or function), or, for a file, the files of
    the same name elsewhere."""
    if anchor.scope:
        name = anchor.scope.split(".")[-1].split(":")[0].strip()
        pattern = re.compile(rf"^\s*(?:async\s+)?(?:def|class)\s+{re.escape(name)}\b", re.M)
        hits = sorted(p for p, t in files.items() if p.endswith(".py") and pattern.search(t))
        return [f"{p} defines {name}" for p in hits]
    base = anchor.file.rsplit("/", 1)[-1]
    return sorted(p for p in files if p.rsplit("/", 1)[-1] == base and "*" not in base)
