"""Releases made of stubs for doctor's fact probes (releasefacts/facts.py): one
that holds every anchor any probe asks for, and the same with one anchor
gone (tests/unit/releasefacts/test_facts.py, tests/unit/maintain/test_reading.py)."""

from __future__ import annotations

import re

from vpatch.releasefacts import facts
from vpatch.releasefacts.anchors import Anchor


def render(tree: dict, indent: str = "", method: bool = False) -> str:
    """Python for nested scopes {name: {inner: ...}}: classes holding the
    scopes under them, a function for a leaf below the top."""
    out = []
    for name, inner in tree.items():
        if inner or not method:
            out.append(
                f"{indent}class {name}:\n"
                + (render(inner, indent + "    ", True) if inner else f"{indent}    pass\n")
            )
        else:
            out.append(f"{indent}def {name}(self):\n{indent}    pass\n")
    return "".join(out)


def stub(scope: str) -> str:
    tree: dict = {}
    node = tree
    for part in scope.split("."):
        node = node.setdefault(part, {})
    return render(tree)


def path_of(pattern: str) -> str:
    """A file a FILES pattern (a glob, or "a | b") names."""
    return pattern.split(" | ")[0].replace("*", "x")


def every_anchor() -> dict[str, str]:
    """A release made of stubs, holding every anchor any probe asks for: a
    stub for each missing one, read again until none is missing. The GPU
    worker builds both runners (so the probes gated on the V1 runner ask
    for its code too)."""
    head = {
        facts.FILES["worker"]: f"class Worker:\n    {facts.V1_MODULE} x\n    {facts.V2_MODULE} y\n"
        "    def __init__(self):\n        pass\n"
    }
    scopes: dict[str, dict] = {}
    extra: dict[str, str] = {}

    def files() -> dict[str, str]:
        out = {p: render(t) for p, t in scopes.items()}
        for p, text in {**extra, **head}.items():
            out[p] = out.get(p, "") + text
        return out

    for _ in range(20):
        missing = {
            a for field in facts.read(files()).anchors.values() for a, ok in field.items() if not ok
        }
        if not missing:
            return files()
        for a in missing:
            path = path_of(a.file)
            scope = a.scope.split(":")[0].strip()
            if scope == "_SPECULATIVE_DECODING_MODELS":
                extra[path] = extra.get(path, "") + "_SPECULATIVE_DECODING_MODELS = {}\n"
            elif scope == "_CONFIG_REGISTRY":
                extra[path] = (
                    extra.get(path, "") + "_CONFIG_REGISTRY = LazyConfigDict(\n    a=1,\n)\n"
                )
            elif path == facts.FILES["worker"]:
                raise AssertionError(f"the stub worker lacks {a}")
            elif scope:
                node = scopes.setdefault(path, {})
                for part in scope.split("."):
                    node = node.setdefault(part, {})
            else:
                extra.setdefault(path, "# present\n")
    raise AssertionError(f"anchors still missing: {sorted(missing)}")


def without(files: dict[str, str], a: Anchor) -> dict[str, str]:
    """`files` with anchor `a` gone: its file, or its scope renamed."""
    path = path_of(a.file)
    if not a.scope:
        return {p: t for p, t in files.items() if p != path}
    name = re.escape(a.scope.split(".")[-1])
    return {**files, path: re.sub(rf"\b{name}\b", f"{name}_gone", files[path])}
