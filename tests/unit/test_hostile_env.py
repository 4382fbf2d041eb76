"""The caller's environment cannot change what vpatch makes: `vpatch apply`
and the overlay `vpatch wheel` give the same bytes (tree files and modes,
commit ids, wheel) with and without a hostile environment: a ~/.gitconfig
that would rewrite whitespace, line ends and messages and sign commits,
GIT_* variables pointing at another repository, index and configuration,
prompts turned back on, SOURCE_DATE_EPOCH, TZ. The repository GIT_DIR
names is left alone."""

from __future__ import annotations

import fcntl
import http.server
import os
import pty
import select
import shutil
import ssl
import subprocess
import termios
import threading
import urllib.request
from pathlib import Path

import pytest
from support import synthetic as S
from support.cli import command, environment, vpatch
from vpatch.errors import NetworkError
from vpatch.sources import index

GITCONFIG = """\
[apply]
    whitespace = fix
[am]
    messageid = true
    keepcr = false
    threeWay = true
[core]
    autocrlf = true
    eol = crlf
    whitespace = trailing-space,space-before-tab
    abbrev = 12
    fileMode = false
[commit]
    gpgsign = true
    cleanup = strip
[gpg]
    program = false
[user]
    name = Someone Else
    email = someone@example.com
[diff]
    context = 7
    noprefix = true
    algorithm = histogram
[format]
    signoff = true
[tag]
    gpgSign = true
[init]
    defaultBranch = trunk
[safe]
    directory = *
"""


@pytest.fixture(scope="module")
def rel(tmp_path_factory) -> S.Release:
    r = S.make_release(tmp_path_factory.mktemp("envrel"))
    # a Message-Id header: am.messageid=true would copy it into the commit message
    first = sorted(r.series.glob("*.patch"))[0]
    text = first.read_text()
    first.write_text(text.replace("\nSubject: ", "\nMessage-Id: <x@example.com>\nSubject: ", 1))
    return r


def hostile(base: Path) -> dict[str, str]:
    home = base / "home"
    home.mkdir()
    (home / ".gitconfig").write_text(GITCONFIG)
    other = base / "other-repo"
    other.mkdir()
    S.git(other, "init", "-q")
    return {
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home),
        "GIT_DIR": str(other / ".git"),
        "GIT_WORK_TREE": str(other),
        "GIT_INDEX_FILE": str(base / "hostile-index"),
        "GIT_OBJECT_DIRECTORY": str(other / ".git" / "objects"),
        "GIT_CONFIG_PARAMETERS": "'core.autocrlf'='true' 'apply.whitespace'='fix'",
        "GIT_CONFIG_COUNT": "1",
        "GIT_CONFIG_KEY_0": "am.messageid",
        "GIT_CONFIG_VALUE_0": "true",
        "GIT_TERMINAL_PROMPT": "1",
        "GIT_AUTHOR_NAME": "Mallory",
        "GIT_AUTHOR_DATE": "2031-05-05T00:00:00+00:00",
        "GIT_COMMITTER_NAME": "Mallory",
        "GIT_COMMITTER_DATE": "2031-05-05T00:00:00+00:00",
        "GIT_DIFF_OPTS": "--unified=9",
        "SOURCE_DATE_EPOCH": "1",
        "TZ": "Pacific/Kiritimati",
    }


def run(rel: S.Release, base: Path, url: str, extra: dict[str, str]) -> tuple[object, bytes]:
    base.mkdir(exist_ok=True)
    env: dict[str, str | None] = {k: None for k in os.environ if k.startswith("GIT_")}
    env.update(VPATCH_ROOT=str(rel.root), VPATCH_CACHE=str(base / "cache"), PIP_INDEX_URL=url)
    env.update(extra)
    tree, dist = base / "tree", base / "dist"
    for argv in (["apply", "--dest", str(tree)], ["wheel", "--out", str(dist)]):
        r = vpatch(*argv, env=env, cwd=base)
        assert r.returncode == 0, r.stderr
    heads = S.git(tree, "rev-parse", "HEAD", "vpatch/base-9.9.0^{commit}")
    (wheel,) = dist.iterdir()
    return (heads, S.snapshot(tree, skip=(".git",))), wheel.read_bytes()


def test_same_bytes_in_a_hostile_environment(rel, tmp_path):
    with S.serve(rel.www) as idx:
        plain = run(rel, tmp_path / "plain", idx.url, {"HOME": str(tmp_path)})
        (tmp_path / "hostile").mkdir()
        env = hostile(tmp_path / "hostile")
        other = S.snapshot(tmp_path / "hostile" / "other-repo")
        assert run(rel, tmp_path / "hostile", idx.url, env) == plain
    assert S.snapshot(tmp_path / "hostile" / "other-repo") == other
    assert not (tmp_path / "hostile" / "hostile-index").exists()
    # and the settings would have mattered: the tree has the patch's trailing
    # whitespace and CRLF line ends as they are
    (heads, files), _ = plain
    tree = tmp_path / "plain" / "tree"
    assert b"line 30   \n" in (tree / "vllm/model.py").read_bytes()
    assert (tree / "vllm/windows.py").read_bytes() == b"a = 1\r\nb = 2\r\n"
    assert "Message-Id" not in S.git(tree, "log", "--format=%B")


class _Auth(http.server.BaseHTTPRequestHandler):
    """A git remote that wants a password."""

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        self.send_response(401)
        self.send_header("WWW-Authenticate", 'Basic realm="git"')
        self.send_header("Content-Length", "0")
        self.end_headers()


def _controlling_tty() -> None:
    os.setsid()
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


def test_no_password_prompt_even_when_asked_for(rel, tmp_path):
    """With a terminal and GIT_TERMINAL_PROMPT=1, a remote asking for a
    password still gets none: git fails at once instead of waiting."""
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Auth)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    remote = f"http://127.0.0.1:{httpd.server_address[1]}/vllm.git"
    env = {"VPATCH_ROOT": str(rel.root), "VPATCH_CACHE": str(tmp_path / "c")}
    env.update(GIT_TERMINAL_PROMPT="1", GIT_ASKPASS="", SSH_ASKPASS="", HOME=str(tmp_path))
    argv = ["fetch", "--source", "git", "--remote", remote, "--dest", str(tmp_path / "d")]
    leader, follower = pty.openpty()
    try:
        p = subprocess.Popen(
            [*command(), *argv],
            env=environment(env),
            stdin=follower,
            stdout=follower,
            stderr=follower,
            preexec_fn=_controlling_tty,
        )
        try:
            code = p.wait(timeout=120)  # a prompt would wait for ever
        finally:
            p.kill()
        out = b""
        while select.select([leader], [], [], 0.5)[0]:
            try:
                chunk = os.read(leader, 4096)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
    finally:
        os.close(leader)
        os.close(follower)
        httpd.shutdown()
    text = out.decode(errors="replace")
    assert code == 10 and "Username" not in text and "Password" not in text, text
    assert text.strip().splitlines()[-1].startswith("vpatch: error: git clone failed")
    assert not (tmp_path / "d").exists()


def test_certificate_checks_cannot_be_switched_off(monkeypatch):
    """What PYTHONHTTPSVERIFY=0 (on the distributions that honour it) or a
    sitecustomize does: swap Python's default HTTPS context for one that
    checks nothing. vpatch's requests keep their own."""
    monkeypatch.setattr(ssl, "_create_default_https_context", ssl._create_unverified_context)
    monkeypatch.setenv("PYTHONHTTPSVERIFY", "0")
    index.opener.cache_clear()
    try:
        (https,) = [
            h for h in index.opener().handlers if isinstance(h, urllib.request.HTTPSHandler)
        ]
        ctx = https._context
    finally:
        index.opener.cache_clear()
    assert ctx.verify_mode == ssl.CERT_REQUIRED and ctx.check_hostname


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs openssl for a certificate")
def test_a_self_signed_index_is_refused(tmp_path, monkeypatch):
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"]
        + ["-subj", "/CN=127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True,
        capture_output=True,
    )
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Auth)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    httpd.socket = ctx.wrap_socket(httpd.socket, server_side=True)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    monkeypatch.setattr(ssl, "_create_default_https_context", ssl._create_unverified_context)
    index.opener.cache_clear()
    try:
        with pytest.raises(NetworkError, match="CERTIFICATE_VERIFY_FAILED|certificate verify"):
            index.open_url(f"https://127.0.0.1:{httpd.server_address[1]}/simple/", "index")
    finally:
        index.opener.cache_clear()
        httpd.shutdown()
