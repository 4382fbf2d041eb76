"""The docs name only paths that exist: README.md, CONTRIBUTING.md, docs/*.md
and tests/vllm/README.md, checked for

- repository paths (under src/, tests/, docs/, benchmarks/, .ci/, and the
  old scripts/) anywhere in
  the text, prose and code alike, and top-level files (Makefile,
  pyproject.toml, ...) in backticks: each must exist. A path with a
  placeholder or a glob (`patches/<slug>/<first>.patch`, `tests/vllm/*`) is
  checked up to its last fixed folder;
- markdown links: a relative target must exist (from the doc's folder), and
  its `#anchor` must be a heading of the doc it points to. URLs are not
  fetched;
- the generated parts (`vpatch docs`) are fresh.

And, in the docs and in src/'s own text (docstrings, comments, messages),
the names that went stale after renames: package-relative paths
(`doctor/pair.py`), patch-set paths (`patches/<slug>/<first>.patch`),
modules and the names in them (`vpatch.doctor.defects.fix`), `vpatch`
commands and `make` targets on a command line.

vLLM's own test paths (tests/v1/..., tests/models/...) are vLLM's, not ours."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from support import top_level_names
from vpatch import cli, lock
from vpatch.maintain import docs

ROOT = Path(__file__).resolve().parents[2]
DOCS = sorted(
    [
        ROOT / "README.md",
        ROOT / "CONTRIBUTING.md",
        *(ROOT / "docs").glob("*.md"),
        ROOT / "tests" / "vllm" / "README.md",
    ]
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
    assert {"README.md", "CONTRIBUTING.md", "docs/install.md", "tests/vllm/README.md"} <= names


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
    assert named_paths("`make test`, `VERSIONS.lock`, build/vllm-9.9.1") == set()


def test_anchors_follow_github(tmp_path):
    doc = tmp_path / "a.md"
    doc.write_text(
        "# A\n\n## Wheels for B200 (sm_100)\n\n## `vpatch install`: the series\n\n"
        "## Notes\n\n## Notes\n\n```\n# not a heading\n```\n"
        "[x](#wheels-for-b200-sm_100) [y](#vpatch-install-the-series) [z](#notes-1)\n"
        "[w](#not-a-heading) [v](b.md#x) [u](https://example.com/#x)\n"
    )
    assert broken_links(doc) == ["#not-a-heading", "b.md#x"]


def test_the_generated_parts_are_fresh():
    """The README's patch table, docs/patches.md and doctor.md's tables are
    what `vpatch docs` makes of patches.toml and RULES, and the README's
    command list is the parser's (it once lacked matrix --jobs/--offline,
    port --work/--keep/--source, lint --offline, verify-wheel --offline);
    `make docs` mends them."""
    assert docs.stale(ROOT, pins=lock.load(), extra=cli.generated_here()) == []


# -- names the docs and the code's own text use: modules, package paths,
# commands, make targets. Checked in the docs above and in src/ (its
# docstrings, comments and messages), where the old names lingered.

PKG = ROOT / "src" / "vpatch"
SOURCES = sorted(PKG.rglob("*.py"))
SUBPACKAGES = sorted(p.name for p in PKG.iterdir() if (p / "__init__.py").is_file())
# `doctor/pair.py`: a path from src/vpatch/ (a test module's name aside)
PACKAGE_PATH = re.compile(
    rf"(?<![\w./$~-])((?:{'|'.join(SUBPACKAGES)})/(?:[\w<>*-]+/)*(?!test_)[\w<>*-]+\.py)\b"
)
# `patches/<slug>/<first>.patch`: the patch set's layout (src/vpatch/data/);
# placeholders and NNNN stand for a name, and the path must match a file
DATA_PATH = re.compile(r"(?<![\w./$~-])(patches/[\w<>*.-]+(?:/[\w<>*.-]+)*)")
# `vpatch.doctor.checks`, `vpatch.doctor.defects.fix`, `vllm_tier.releases`
MODULE = re.compile(r"(?<![\w.])((?:vpatch|vllm_tier)(?:\.\w+)+)")
FILE_SUFFIXES = ("json", "toml", "lock", "md", "py", "txt", "whl", "log", "patch")
# a command line: the start of a code span or of a line in a code block
# (`make bench-*` is a glob: not a target)
COMMAND = re.compile(r"^\s*(?:\$ )?(vpatch|make) ([a-z][\w.-]*)(?![\w.*-])", re.M)


def module_exists(dotted: str, root: Path = ROOT) -> bool:
    """vpatch.a.b (src/vpatch/a/b.py, or a name defined in vpatch/a.py) or
    vllm_tier.a (tests/vllm/vllm_tier/a.py), to one name inside a module."""
    parts = dotted.split(".")
    base = root / "src" if parts[0] == "vpatch" else root / "tests" / "vllm"
    for i in range(len(parts), 0, -1):
        here = base.joinpath(*parts[:i])
        found = next(
            (f for f in (here.with_suffix(".py"), here / "__init__.py") if f.is_file()), None
        )
        if found is not None:
            rest = parts[i:]
            return not rest or (len(rest) == 1 and rest[0] in top_level_names(found))
    return False


def stale_names(text: str, root: Path = ROOT) -> list[str]:
    """Package paths and patch-set paths that match no file, and modules (or
    names in them) that do not exist."""
    out = []
    for p in sorted({m.group(1) for m in PACKAGE_PATH.finditer(text)}):
        if not list((root / "src" / "vpatch").glob(re.sub(r"<[^>]*>", "*", p))):
            out.append(p)
    for p in sorted({m.group(1).rstrip(".:,") for m in DATA_PATH.finditer(text)}):
        pattern = re.sub(r"<[^>]*>", "*", p).replace("NNNN", "[0-9]" * 4)
        if not list((root / "src" / "vpatch" / "data").glob(pattern)):
            out.append(p)
    for d in sorted({m.group(1).rstrip(".") for m in MODULE.finditer(text)}):
        if d.rsplit(".", 1)[-1] not in FILE_SUFFIXES and not module_exists(d, root):
            out.append(d)
    return out


def command_lines(text: str, markdown: bool) -> list[tuple[str, str]]:
    """(vpatch or make, the command or target) of every command line in
    text's code spans, and in a markdown doc's code blocks."""
    spans = CODE.findall(FENCE.sub("", text) if markdown else text)
    blocks = FENCE.findall(text) if markdown else []
    return [m.groups() for part in [*spans, *blocks] for m in COMMAND.finditer(part)]


def known_commands() -> dict[str, set[str]]:
    from vpatch import cli

    makefile = (ROOT / "Makefile").read_text()
    targets = set(re.findall(r"^([\w.-]+):", makefile, re.M))
    return {"vpatch": set(cli.parser().commands), "make": targets}


def unknown_commands(text: str, markdown: bool) -> list[str]:
    known = known_commands()
    return sorted(
        {f"{tool} {name}" for tool, name in command_lines(text, markdown)}
        - {f"{tool} {name}" for tool, names in known.items() for name in names}
    )


TEXTS = [*DOCS, *SOURCES, *sorted((ROOT / "benchmarks").glob("*.py"))]


@pytest.mark.parametrize("path", TEXTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_module_and_package_path_named_exists(path):
    assert stale_names(path.read_text()) == []


@pytest.mark.parametrize("path", [*DOCS, *SOURCES], ids=lambda p: str(p.relative_to(ROOT)))
def test_every_command_and_make_target_named_exists(path):
    assert unknown_commands(path.read_text(), path.suffix == ".md") == []


def test_stale_names_of_their_kind_are_caught():
    """The kinds the docs and comments kept after renames: a module path, a
    name gone from a module, a package-relative path, a command, a target."""
    assert stale_names("doctor's one-call run() in `vpatch.deploy.checks`") == [
        "vpatch.deploy.checks"
    ]
    assert stale_names("`vpatch.doctor.defects.FIXES` names the patch") == [
        "vpatch.doctor.defects.FIXES"
    ]
    assert stale_names("see doctor/run.py and doctor/pair.py") == ["doctor/run.py"]
    # the layout before the patch set, and after it
    assert stale_names("(by slug: patches/<release>/NNNN-<slug>.patch)") == [
        "patches/<release>/NNNN-<slug>.patch"
    ]
    assert stale_names("patches/<slug>/<first>.patch, patches/patches.toml") == []
    assert stale_names("`commands/<name>.py`, vpatch.json, `vpatch.doctor.defects.fix`") == []
    assert unknown_commands("run `vpatch deploy --python PY`, then `make docs`", False) == [
        "vpatch deploy"
    ]
    assert unknown_commands(
        "```\nmake check\nvpatch lint\n```\n`make test-vllm VLLM=9.9.1`", True
    ) == ["make check"]
    assert unknown_commands("a vpatch checkout, `make` alone, `make bench-*`", True) == []


def test_pre_commit_runs_what_make_lint_runs():
    """.pre-commit-config.yaml's hooks are `make lint`'s targets, each once."""
    makefile = (ROOT / "Makefile").read_text()
    lint = re.search(r"^lint: (.*)$", makefile, re.M)
    assert lint and all(re.search(rf"^{t}: ", makefile, re.M) for t in lint.group(1).split())
    hooks = re.findall(r"entry: make -s (\S+)", (ROOT / ".pre-commit-config.yaml").read_text())
    assert hooks == lint.group(1).split()


# -- the options a `vpatch` command line names are that command's ---------------------
# A command line in a code span or block, up to the end of its line: every
# `--flag` on it before a lone `--` (after which comes a serve command's own
# flags) must be an option of that command's parser. A line ending in `\`
# goes on to the next one.
COMMAND_LINE = re.compile(r"^\s*(?:\$ )?vpatch ([a-z][\w-]*)((?:[^\n]*\\\n)*[^\n]*)", re.M)
FLAG = re.compile(r"(?<![\w-])(--[a-z][\w-]*)")
# a code span may run across a line break (`git am\n --continue`)
SPAN = re.compile(r"`([^`]+)`")


def unknown_flags(text: str, markdown: bool) -> list[str]:
    """`vpatch CMD --flag` where CMD's parser has no --flag."""
    commands = cli.parser().commands  # type: ignore[attr-defined]
    spans = SPAN.findall(FENCE.sub("", text) if markdown else text)
    blocks = FENCE.findall(text) if markdown else []
    out = set()
    for part in [*spans, *blocks]:
        for m in COMMAND_LINE.finditer(part):
            name, rest = m.groups()
            if name not in commands:
                continue  # unknown_commands names it
            known = set(commands[name]._option_string_actions)
            own = re.split(r"\s--(?:\s|$)", rest)[0]
            out |= {f"vpatch {name} {f}" for f in FLAG.findall(own) if f not in known}
    return sorted(out)


@pytest.mark.parametrize("path", [*DOCS, *SOURCES], ids=lambda p: str(p.relative_to(ROOT)))
def test_every_option_named_on_a_command_line_exists(path):
    assert unknown_flags(path.read_text(), path.suffix == ".md") == []


def test_an_option_a_command_lacks_is_caught():
    assert unknown_flags("`vpatch check --python PY --json`", True) == ["vpatch check --json"]
    assert unknown_flags("```\nvpatch carry NEW \\\n  --write --force\n```", True) == [
        "vpatch carry --force"
    ]
    # a serve command's flags are vLLM's, and prose is not a command line
    assert unknown_flags("`vpatch doctor --offline -- vllm serve M --tp 8`", True) == []
    assert unknown_flags("vpatch check --json, said in prose", True) == []
    # a span across a line break does not shift the spans after it
    assert unknown_flags("`git am\n  --continue`, `vpatch carry N --resume`", True) == [
        "vpatch carry --resume"
    ]
