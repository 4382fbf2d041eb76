"""The docs name only paths that exist: README.md, docs/*.md and
tests/vllm/README.md, checked for

- repository paths (under src/, tests/, docs/, benchmarks/, .ci/, and the
  old scripts/) anywhere in
  the text, prose and code alike, and top-level files (Makefile,
  pyproject.toml, ...) in backticks: each must exist. A path with a
  placeholder or a glob (`patches/<slug>/<first>.patch`, `tests/vllm/*`) is
  checked up to its last fixed folder;
- markdown links: a relative target must exist (from the doc's folder), and
  its `#anchor` must be a heading of the doc it points to. URLs are not
  fetched.

vLLM's own test paths (tests/v1/..., tests/models/...) are vLLM's, not ours."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from vpatch.commands import docs

ROOT = Path(__file__).resolve().parents[2]
DOCS = sorted(
    [ROOT / "README.md", *(ROOT / "docs").glob("*.md"), ROOT / "tests" / "vllm" / "README.md"]
)

# folders of vLLM's source tree that share a prefix with ours (a patch adds
# tests/v1/spec_decode/...; the tier runs vLLM's tests/models/test_registry.py)
VLLM_PATHS = ("tests/v1/", "tests/models/", "tests/transformers_utils/")
TOP_LEVEL = ("Makefile", "pyproject.toml", "setup.py", "setup.cfg", "MANIFEST.in", "tox.ini")

# a path starts a token (not after a word, a slash or `$X/`) and runs until
# whitespace, a quote or a bracket
PATH = re.compile(r"(?<![\w./$~-])((?:src|tests|docs|benchmarks|scripts|\.ci)/[^\s`'\"()\[\]|,;]*)")
CODE = re.compile(r"`([^`\n]+)`")
LINK = re.compile(r"\[[^\]\n]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.M)
FENCE = re.compile(r"^```.*?^```", re.M | re.S)
WILD = re.compile(r"[<>*?{}]|\.\.\.|…")


def fixed_part(path: str) -> str:
    """The path up to its first component with a placeholder or a glob."""
    path = path.split("::")[0].split("#")[0].rstrip(".:")
    parts = path.split("/")
    for i, part in enumerate(parts):
        if WILD.search(part):
            return "/".join(parts[:i])
    return path


def named_paths(text: str) -> set[str]:
    """The repository paths a doc names (fixed parts only)."""
    found = {m.group(1) for m in PATH.finditer(text)}
    found |= {
        token
        for span in CODE.findall(text)
        for token in span.split()
        if token.rstrip(".,:") in TOP_LEVEL
    }
    return {fixed_part(p) for p in found if not p.startswith(VLLM_PATHS) and fixed_part(p)}


def missing_paths(text: str, root: Path = ROOT) -> list[str]:
    return sorted(p for p in named_paths(text) if not (root / p).exists())


def anchors(text: str) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to
    hyphens; a repeated heading gets -1, -2, ..."""
    seen: dict[str, int] = {}
    out = set()
    for title in HEADING.findall(FENCE.sub("", text)):
        slug = re.sub(r"[^\w\- ]", "", title.replace("`", "").lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        out.add(slug if n == 0 else f"{slug}-{n}")
        seen[slug] = n + 1
    return out


def broken_links(doc: Path) -> list[str]:
    broken = []
    for target in LINK.findall(FENCE.sub("", doc.read_text())):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
            continue
        where, _, anchor = target.partition("#")
        dest = (doc.parent / where).resolve() if where else doc
        if not dest.exists() or (
            anchor and dest.suffix == ".md" and anchor not in anchors(dest.read_text())
        ):
            broken.append(target)
    return broken


@pytest.mark.parametrize("doc", DOCS, ids=lambda d: str(d.relative_to(ROOT)))
def test_every_path_a_doc_names_exists(doc):
    assert missing_paths(doc.read_text()) == []


@pytest.mark.parametrize("doc", DOCS, ids=lambda d: str(d.relative_to(ROOT)))
def test_every_link_resolves(doc):
    assert broken_links(doc) == []


def test_the_docs_are_found():
    names = {str(d.relative_to(ROOT)) for d in DOCS}
    assert {"README.md", "docs/install.md", "tests/vllm/README.md"} <= names


def test_a_stale_path_is_caught():
    """The line the old README had, after the helpers moved to tests/support."""
    line = "on a synthetic release served by a stand-in package index (`tests/synthetic.py`)."
    assert missing_paths(line) == ["tests/synthetic.py"]
    assert missing_paths("see tests/unit/test_nothing.py.") == ["tests/unit/test_nothing.py"]
    assert missing_paths("`setup.py` copies the data") == ["setup.py"]
    assert missing_paths("(`scripts/vpatch/errors.py`)") == ["scripts/vpatch/errors.py"]
    assert missing_paths("`tests/unit/test_docs.py::test_a_stale_path_is_caught`") == []


def test_placeholders_globs_urls_and_vllm_paths():
    assert named_paths("`src/vpatch/data/patches/<slug>/<first>.patch`") == {
        "src/vpatch/data/patches"
    }
    assert named_paths("`tests/vllm/*`, `docs/*.md`") == {"tests/vllm", "docs"}
    assert missing_paths("`src/nowhere/<x>.py`") == ["src/nowhere"]
    assert (
        named_paths("`tests/v1/spec_decode/test_x.py` and `tests/models/test_registry.py`") == set()
    )
    assert (
        named_paths("https://github.com/vllm-project/vllm/tree/main/tests/v2 $X/tests/a") == set()
    )
    assert named_paths("`make test`, `VERSIONS.lock`, build/vllm-0.17.1") == set()


def test_anchors_follow_github(tmp_path):
    doc = tmp_path / "a.md"
    doc.write_text(
        "# A\n\n## Wheels for B200 (sm_100)\n\n## `vpatch install`: the series\n\n"
        "## Notes\n\n## Notes\n\n```\n# not a heading\n```\n"
        "[x](#wheels-for-b200-sm_100) [y](#vpatch-install-the-series) [z](#notes-1)\n"
        "[w](#not-a-heading) [v](b.md#x) [u](https://example.com/#x)\n"
    )
    assert broken_links(doc) == ["#not-a-heading", "b.md#x"]


def test_the_readme_command_list_is_the_parsers():
    """README.md's command list is generated from the parser (issue 31: it
    lacked matrix --jobs/--offline, port --work/--keep/--source, lint
    --offline, verify-wheel --offline); `python tests/support/usage.py
    --write` rewrites it."""
    from support import usage

    assert usage.block((ROOT / "README.md").read_text(), "commands") == usage.commands()


def test_a_generated_block_is_found_between_its_own_markers():
    from support import usage

    text = (
        "a\n<!-- commands: generated by x, do not edit -->\nold\n<!-- end of commands -->\n"
        "<!-- other: generated -->\nkept\n<!-- end of other -->\n"
    )
    assert usage.block(text, "commands") == "old\n"
    new = usage.replace(text, "commands", "new\n")
    assert usage.block(new, "commands") == "new\n" and usage.block(new, "other") == "kept\n"
    with pytest.raises(ValueError, match="no 'check example' block"):
        usage.block(text, "check example")


def test_the_generated_parts_are_fresh():
    """The README's patch table, docs/patches.md and doctor.md's tables are
    what `vpatch docs` makes of patches.toml and RULES (`make docs` mends)."""
    assert docs.stale(ROOT) == []
