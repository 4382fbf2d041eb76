"""No text of the repository points into an issue tracker it does not have.

The work was once tracked in numbered issues that live nowhere a reader of
this repository can open; a comment "(issue NN)" or "since issues NN-MM
landed" tells such a reader nothing. Where the issue's point matters, the
text says it. References into trackers that exist stay: vLLM's (`vllm#NNNNN`,
"vLLM issue #NNNNN", "PR #NNNNN"), since a number after a `#` names a
GitHub thread.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# a bare number after "issue"/"issues" (not "#NNN"), also across a line break,
# in a comment too ("issues\n# 18")
BARE = re.compile(r"\bissues?\s+(?:#\s+)?\d", re.IGNORECASE)

TOPS = ("src", "tests", "benchmarks", "docs", ".ci", ".github")
TEXT = {".py", ".md", ".toml", ".yml", ".yaml", ".cfg", ".ini", ".txt", ".sh"}
TOP_FILES = (
    "README.md",
    "CONTRIBUTING.md",
    "Makefile",
    "pyproject.toml",
    ".pre-commit-config.yaml",
)
SKIP = {".venv", "build", "dist", "__pycache__", ".git", ".ruff_cache", ".mypy_cache"}


def texts(root: Path = ROOT) -> list[Path]:
    """Every text file of the repository a person wrote (not the shipped
    vLLM patches, which are upstream's mail)."""
    found = [root / name for name in TOP_FILES if (root / name).is_file()]
    found += [root / ".ci" / "run"] if (root / ".ci" / "run").is_file() else []
    for top in TOPS:
        for p in (root / top).rglob("*"):
            if p.is_file() and p.suffix in TEXT and not SKIP & set(p.relative_to(root).parts):
                found.append(p)
    return sorted(set(found))


def references(text: str) -> list[str]:
    """Each bare issue number in `text`, as `line N: <the match>`."""
    return [
        f"line {text.count(chr(10), 0, m.start()) + 1}: {m.group(0)!r}" for m in BARE.finditer(text)
    ]


def test_the_scan_reads_the_repository():
    names = {p.relative_to(ROOT).as_posix() for p in texts()}
    # a scan that found nothing would pass on anything
    assert {"README.md", "Makefile", "docs/tier.md", "tests/unit/test_layers.py"} <= names


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("a fix (issue" + " 31: it dropped it)", 1),
        ("since issues" + " 18-20 landed", 1),
        ("with the V2 runner (issues" + "\n38 and 39)", 1),
        ("# -- Issue" + " 7: a heading", 1),
        ("x = 1  # since issues" + "\n# 18-20", 1),
        ("vLLM issue #45760; PR #45764 adds it", 0),
        ("upstream vllm#55005", 0),
        ("no issues with it", 0),
    ],
)
def test_what_counts_as_a_reference(text, found):
    assert len(references(text)) == found


def test_no_reference_to_an_issue_tracker_the_repository_lacks():
    bad = []
    for p in texts():
        rel = p.relative_to(ROOT).as_posix()
        refs = references(p.read_text(errors="replace"))
        if refs:
            bad += [f"{rel} {r}" for r in refs]
    assert bad == [], "say what the issue said instead:\n" + "\n".join(bad)
