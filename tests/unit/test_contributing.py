"""CONTRIBUTING.md's "Add a tier check" says what the registration API of
the tier is: tests/vllm/vllm_tier/registry.py (what a check is, `@check`,
`CHECKS`) and the checks, a module per theme in tests/vllm/vllm_tier/checks/
(served.py: `Served`, `Mode`). This holds it to those files, so the two
cannot drift apart (they had: the example's `applies` compared a typed
release, its `defaults` was not the check's):

- its Python example is a check defined in a module of checks/, the same
  code (its docstring may be cut short with `...`);
- each call it names, `name(args)` or `obj.name(args)` in a code span, is a
  function, method or dataclass of the tier with those parameters, in that
  order, with those defaults;
- each part its table lists is an attribute or method of `Check`.

And each name the whole file places in a module, "`NAME` in `path.py`" or
"`NAME` (`path.py`...", is defined or imported at that module's top level
(a path under src/vpatch/ may be given from its package: `checks/vllm.py`).

The tier's modules are read as text (ast), not imported: the project's
tests do not put the tier on their path. Its command lines (`vpatch ...`)
are test_docs.py's to check.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from support import top_level_names

ROOT = Path(__file__).resolve().parents[2]
CONTRIBUTING = ROOT / "CONTRIBUTING.md"
TIER = ROOT / "tests" / "vllm" / "vllm_tier"
# the checks, a module per theme (and the one that imports them)
THEMES = TIER / "checks"
# what the section's calls name: `res` is a Results, `runner.` the runner module
OWNERS = {"res": ("results.py", "Results"), "runner": ("runner.py", None)}

SPAN = re.compile(r"`([^`]+)`")
CALL = re.compile(r"^(?:(\w+)\.)?(\w+)\(([^()]*)\)$")
PYTHON = re.compile(r"^```python\n(.*?)^```", re.M | re.S)


def section(text: str, heading: str) -> str:
    """The text under `## heading`, to the next heading of that level."""
    start = text.index(f"## {heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def tree(name: str) -> ast.Module:
    return ast.parse((TIER / name).read_text())


def classes(mod: ast.Module) -> dict[str, ast.ClassDef]:
    return {n.name: n for n in mod.body if isinstance(n, ast.ClassDef)}


def defined_checks() -> dict[str, ast.ClassDef]:
    """The classes of the theme modules (checks/*.py)."""
    return {
        name: node
        for path in sorted(THEMES.glob("*.py"))
        for name, node in classes(ast.parse(path.read_text())).items()
    }


def signature(node: ast.AST) -> str:
    """`a, b=1, *c, d, **e` of a def (self left out), or of a dataclass from
    its fields."""
    if isinstance(node, ast.ClassDef):
        return ", ".join(
            f.target.id + (f"={ast.unparse(f.value)}" if f.value is not None else "")
            for f in node.body
            if isinstance(f, ast.AnnAssign) and isinstance(f.target, ast.Name)
        )
    assert isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    a = node.args
    plain = [*a.posonlyargs, *a.args]
    defaults = [None] * (len(plain) - len(a.defaults)) + list(a.defaults)
    out = [
        p.arg + (f"={ast.unparse(d)}" if d is not None else "")
        for p, d in zip(plain, defaults, strict=True)
        if p.arg != "self"
    ]
    if a.vararg:
        out.append(f"*{a.vararg.arg}")
    elif a.kwonlyargs:
        out.append("*")
    out += [
        p.arg + (f"={ast.unparse(d)}" if d is not None else "")
        for p, d in zip(a.kwonlyargs, a.kw_defaults, strict=True)
    ]
    if a.kwarg:
        out.append(f"**{a.kwarg.arg}")
    return ", ".join(out)


def definition(owner: str | None, name: str) -> ast.AST | None:
    """What `owner.name` (or `name`) names in the tier: a method of a check
    class (`Check`, `Served`), a function or dataclass of registry.py or of
    checks/served.py, or of OWNERS."""
    if owner is not None:
        if owner not in OWNERS:
            return None
        module, cls = OWNERS[owner]
        mod = tree(module)
        scope = classes(mod)[cls].body if cls else mod.body
    else:
        registry, served = tree("registry.py"), tree("checks/served.py")
        scope = [*registry.body, *classes(registry)["Check"].body]
        scope += [*served.body, *classes(served)["Served"].body]
    found = [n for n in scope if getattr(n, "name", None) == name]
    return found[0] if found else None


def drift(text: str) -> list[str]:
    """Where the "Add a tier check" section of `text` and the tier disagree."""
    part = section(text, "Add a tier check")
    out = []
    # the example: a check of a theme module, the same code
    real = defined_checks()
    examples = [c for b in PYTHON.findall(part) for c in classes(ast.parse(b)).values()]
    if not examples:
        out.append("no Python example of a check")
    for ex in examples:
        if ex.name not in real:
            out.append(f"example {ex.name}: no such check in checks/")
            continue
        mine, theirs = ast.get_docstring(ex) or "", ast.get_docstring(real[ex.name]) or ""
        if not theirs.startswith(mine.split("...")[0].rstrip()):
            out.append(f"example {ex.name}: its docstring is not the check's")
        if _code(ex) != _code(real[ex.name]):
            out.append(f"example {ex.name}: its code is not the check's")
    # each call it names, with its parameters
    for span in SPAN.findall(part.replace("\n", " ")):
        m = CALL.match(span.strip())
        if m is None:
            continue
        owner, name, args = m.groups()
        node = definition(owner, name)
        if node is None:
            out.append(f"`{span}`: no such name in the tier")
            continue
        said = ", ".join(a.strip() for a in args.split(",") if a.strip())
        real_sig = signature(node)
        if said != real_sig and not _prefix(said, real_sig):
            out.append(f"`{span}`: the tier has `{name}({real_sig})`")
    # each part the table lists is Check's
    check = classes(tree("registry.py"))["Check"]
    attrs = {n.name for n in check.body if isinstance(n, ast.FunctionDef)} | {
        n.target.id
        for n in check.body
        if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)
    }
    for row in re.findall(r"^\| `(\w+)`", part, re.M):
        if row not in attrs:
            out.append(f"table part `{row}`: Check has none")
    return out


def _code(c: ast.ClassDef) -> str:
    body = c.body[1:] if ast.get_docstring(c) is not None else c.body
    return ast.dump(ast.Module(body=body, type_ignores=[]))


def _prefix(said: str, real: str) -> bool:
    """`said` is `real` cut short before parameters that all have defaults
    (`runs(job)` may be named so where the real one adds `x=1`); a
    parameter it names must be the real one, with the real default."""
    rest = real[len(said) :].lstrip(", ")
    return (
        bool(said)
        and real.startswith(said + ", ")
        and all("=" in p or p.startswith("**") for p in rest.split(", "))
    )


# `CHECKS` (`checks/__init__.py`, ...), `SHARED` in `tests/unit/test_layers.py`
PLACED = re.compile(r"`([A-Za-z_]\w*)(?:\(\))?`\s+(?:in\s+|\()`([\w/.]+\.py)`")


def misplaced(text: str) -> list[str]:
    """Each `NAME` said to be in a module where that module lacks it."""
    out = []
    for name, where in PLACED.findall(text):
        found = [ROOT / where] if (ROOT / where).is_file() else []
        found = found or sorted((ROOT / "src" / "vpatch").rglob(where))
        if len(found) != 1:
            out.append(f"`{name}` in `{where}`: {len(found)} such modules")
        elif name not in top_level_names(found[0]):
            out.append(f"`{name}` in `{where}`: not there")
    return out


def test_every_name_placed_in_a_module_is_there():
    text = CONTRIBUTING.read_text()
    assert len(PLACED.findall(text)) >= 10  # the scan finds what it checks
    assert misplaced(text) == []


def test_a_name_placed_wrongly_is_caught():
    assert misplaced("listed once in `CHECKS` (`checks/__init__.py`)") == []
    assert misplaced("listed once in `CHECK_LIST` (`checks/__init__.py`)") == [
        "`CHECK_LIST` in `checks/__init__.py`: not there"
    ]
    assert misplaced("`SHARED` in\n`tests/unit/test_layers.py`") == []
    assert misplaced("`SHARED` in `tests/unit/test_lanes.py`") == [
        "`SHARED` in `tests/unit/test_lanes.py`: 0 such modules"
    ]


def test_contributing_holds_to_the_tier_check_api():
    assert drift(CONTRIBUTING.read_text()) == []


@pytest.mark.parametrize(
    ("old", "new", "found"),
    [
        # the example's code drifts from the check's
        ('"VPATCH_VLLM_SERVED_TP": "2"', '"VPATCH_VLLM_SERVED_TP": "4"', "code is not"),
        # a call names a parameter the API does not have, or drops a default
        ("`Mode(env, compiled=False, only=None)`", "`Mode(env, compiled=True)`", "Mode("),
        ("`res.run(check, release, key)`", "`res.run(name, release)`", "res.run"),
        # a part the table lists that Check lacks
        ("| `summary` |", "| `title` |", "`title`"),
    ],
)
def test_a_drifted_example_is_caught(old, new, found):
    text = CONTRIBUTING.read_text()
    assert text.count(old) == 1
    assert any(found in d for d in drift(text.replace(old, new)))
