"""cli/releases.py: `vpatch releases` against a stand-in index that pip's
configuration names (support/simple.py). The releases it offers are made
from the newest the lock pins (the next minors), never written here."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
from packaging.version import Version
from support.simple import configured
from vpatch import cli, errors, lock
from vpatch.cli import releases
from vpatch.cli.options import INTERRUPTED
from vpatch.sources import index

NEWEST = lock.load().versions()[-1]


def later(n: int) -> str:
    """The n-th minor release after the newest pinned (n = 0: the newest)."""
    major, minor = Version(NEWEST).release[:2]
    return NEWEST if n == 0 else f"{major}.{minor + n}.0"


def sdist(v: str) -> str:
    return f"vllm-{v}.tar.gz"


@pytest.fixture
def stand(monkeypatch):
    with configured(monkeypatch) as s:
        yield s


def run(capsys, *args: str) -> tuple[int, str, str]:
    code = cli.main(["releases", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_up_to_date_is_exit_0(stand, capsys):
    stand.add("vllm", sdist(later(0)), sdist(f"{later(0)}.dev1"))
    code, out, err = run(capsys)
    assert (code, err) == (0, "")
    said = f"up to date: VERSIONS.lock pins vLLM up to {NEWEST}; the package index has no newer"
    assert out == said + "\n"


def test_one_new_release_proposes_its_carry(stand, capsys):
    stand.add("vllm", sdist(later(0)), sdist(later(1)))
    code, out, _ = run(capsys)
    assert code == releases.NEW == 100
    lines = out.splitlines()
    assert "the package index has 1 newer release." in lines[0]
    assert lines[1:] == [f"  vpatch carry {later(1)}"]


def test_several_new_releases_oldest_first(stand, capsys):
    stand.add("vllm", *map(sdist, [later(3), later(1), later(0), later(10), later(2)]))
    code, out, _ = run(capsys)
    assert code == releases.NEW
    assert "has 4 newer releases" in out.splitlines()[0]
    assert out.splitlines()[1:] == [f"  vpatch carry {later(n)}" for n in (1, 2, 3, 10)]


def test_pre_releases_and_dev_releases_are_not_new(stand, capsys):
    stand.add("vllm", *map(sdist, [f"{later(1)}rc1", f"{later(1)}.dev0", f"{later(2)}b1"]))
    code, out, _ = run(capsys)
    assert code == 0 and out.startswith("up to date")


def test_json_for_a_workflow(stand, capsys):
    stand.add("vllm", sdist(later(2)), sdist(later(1)), sdist(f"{later(3)}rc1"))
    code, out, _ = run(capsys, "--format", "json")
    assert code == releases.NEW
    assert json.loads(out) == {
        "newest_pinned": NEWEST,
        "new": [later(1), later(2)],
        "carry": [f"vpatch carry {later(1)}", f"vpatch carry {later(2)}"],
    }


def test_json_when_up_to_date(stand, capsys):
    stand.add("vllm", sdist(NEWEST))
    code, out, _ = run(capsys, "--format", "json")
    assert code == 0
    assert json.loads(out) == {"newest_pinned": NEWEST, "new": [], "carry": []}


@pytest.mark.parametrize(
    "answer, said",
    [
        ((500, "text/plain", b"down"), "the server answered 500"),
        ((200, "text/html", b"<html></html>"), "does not speak the JSON API"),
        ((200, "application/vnd.pypi.simple.v1+json", b'{"files": ['), "broken JSON"),
        ((200, "application/vnd.pypi.simple.v1+json", b'{"files": [{}]}'), "malformed file"),
        (
            (200, "application/vnd.pypi.simple.v1+json", b'{"files": [{"filename": 5}]}'),
            "the package index lists a malformed file",
        ),
        (
            (200, "application/vnd.pypi.simple.v1+json", b'{"files": [{"filename": null}]}'),
            "the package index lists a malformed file",
        ),
    ],
    ids=["error", "html", "broken-json", "malformed-file", "int-filename", "null-filename"],
)
def test_an_index_that_fails_is_one_line_exit_3(stand, capsys, answer, said):
    stand.answer = answer
    code, out, err = run(capsys)
    assert (code, out) == (3, "")
    assert len(err.splitlines()) == 1 and err.startswith("vpatch: error: "), err
    assert said in err


@pytest.mark.parametrize(
    "size",
    ["1e999", "Infinity", "NaN", "1.5", "123.0", "true", '"123"', "-1", str(2**40 + 1), "9" * 400],
    ids=["1e999", "inf", "nan", "float", "round-float", "bool", "text", "below-0", "huge", "long"],
)
def test_a_file_size_that_is_no_byte_count_is_one_line_exit_3(stand, capsys, size):
    """A file's `size` must be a whole number of bytes, at most what
    VERSIONS.lock takes: 1e999 (JSON's inf) was exit 70 from int(), and a
    float, a bool or text became some other size unsaid."""
    entry = f'{{"filename": "vllm-1.0.tar.gz", "url": "/x", "hashes": {{}}, "size": {size}}}'
    stand.answer = (200, index.ACCEPT, f'{{"files": [{entry}]}}'.encode())
    code, out, err = run(capsys)
    assert (code, out) == (3, "")
    assert len(err.splitlines()) == 1, err
    assert err.startswith("vpatch: error: the package index lists a malformed file for 'vllm'")
    assert "size" in err


def test_an_index_that_hangs_is_exit_3_within_the_timeout(stand, capsys, monkeypatch):
    stand.hang = True
    monkeypatch.setenv(index.TIMEOUT, "1")
    start = time.monotonic()
    code, out, err = run(capsys)
    assert time.monotonic() - start < 4
    assert (code, out) == (3, "")
    assert err.splitlines() == [f"vpatch: error: cannot reach the package index at "
                                f"{stand.url}vllm/: no answer within 1s"]  # fmt: skip


def test_the_new_release_code_is_no_other_codes():
    """A script tells "carry proposed" from any failure by the code alone."""
    failures = {c.exit_code for c in vars(errors).values()
                if isinstance(c, type) and issubclass(c, errors.VpatchError)}  # fmt: skip
    taken = failures | {0, cli.INTERNAL, INTERRUPTED, cli.BROKEN_PIPE}
    assert releases.NEW not in taken


def test_the_help_documents_both_codes():
    helped = cli.parser().commands["releases"].format_help()  # type: ignore[attr-defined]
    assert "\n  0    up to date" in helped
    assert f"\n  {releases.NEW}  new releases: carry proposed" in helped
    # the parser names the index's timeout without importing sources/index.py
    said = f"{index.TIMEOUT} seconds (default {index.TIMEOUT_DEFAULT:g})"
    assert said in " ".join(helped.split())


def test_the_workflow_reads_what_releases_gives():
    """.github/workflows/carry.yml acts on `vpatch releases`' exit codes and
    its JSON: a code or key changed here without it would fail every run."""
    workflow = (Path(__file__).parents[3] / ".github" / "workflows" / "carry.yml").read_text()
    assert "vpatch releases --format json" in workflow
    case = re.search(r'case "\$code" in\n(.*?)\n\s*esac', workflow, re.S)
    assert case, "the workflow's case over the exit code"
    handled = re.findall(r"^\s*(\d+)\)", case.group(1), re.M)
    assert handled == ["0", str(releases.NEW)]
    assert "jq -r '.new[0]'" in workflow


def test_a_private_index_as_pip_reaches_it(stand, capsys, monkeypatch, tmp_path):
    """`PIP_INDEX_URL=http://user:TOKEN@host/simple vpatch releases` failed
    with "Name or service not known" and printed TOKEN. It is read as pip
    reads it (basic auth), and a refusal names the index without TOKEN."""
    stand.add("vllm", sdist(later(1)))
    stand.auth = "user:TOKEN-123"
    monkeypatch.setenv("NETRC", str(tmp_path / "none"))
    monkeypatch.setenv("PIP_INDEX_URL", stand.url.replace("http://", "http://user:TOKEN-123@"))
    index.index_url.cache_clear()
    code, out, err = run(capsys)
    assert (code, err) == (releases.NEW, "") and f"vpatch carry {later(1)}" in out
    monkeypatch.setenv("PIP_INDEX_URL", stand.url.replace("http://", "http://user:TOKEN-12@"))
    index.index_url.cache_clear()
    index.project.cache_clear()
    code, out, err = run(capsys)
    assert (code, out) == (3, "") and "TOKEN" not in err, err
    assert err.startswith("vpatch: error: cannot reach the package index at http://***@127.0.0.1")
