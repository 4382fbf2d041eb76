"""network/auth.py: basic auth as pip sends it to a package index (the
URL's user and password, the index URL's on its host, netrc's; never to
another host), end to end through the client the index is handed
(sources/index.py), against the stand-in index asking for it; and never
printed in what the index's reads say."""

from __future__ import annotations

import subprocess
import sys

import pytest
from support.simple import basic, configured, pip_names
from vpatch.errors import NetworkError
from vpatch.network import auth
from vpatch.sources import index


@pytest.fixture
def stand(monkeypatch):
    with configured(monkeypatch) as s:
        yield s


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


@pytest.mark.parametrize(
    "netloc, found",
    [
        ("host", None),
        ("user:pass@host", ("user", "pass")),
        ("TOKEN@host", ("TOKEN", "")),
        ("us%40er:p%3Ass@host:8080", ("us@er", "p:ss")),  # quoted, as pip unquotes them
        ("a@b:c@host", ("a@b", "c")),  # the last @ ends the user part
    ],
)
def test_the_user_and_password_of_a_url(netloc, found):
    assert auth.userinfo(netloc) == found
