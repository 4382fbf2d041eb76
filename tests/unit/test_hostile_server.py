"""Hostile servers and bad URLs for `vpatch doctor --server`.

`vpatch doctor --server URL` runs as a user runs it (a process of its own)
against the stand-in vLLM server (tests/support/vllm_server.py), whose
answers a case replaces with a hostile one. Each case checks the documented
exit code (docs/install.md, docs/doctor.md), exactly one `vpatch: error:`
line, last on stderr, no traceback, the words that say what went wrong,
and that nothing was written (the sandbox HOME, caches and TMPDIR as they
were). A server that hangs or trickles gets a deadline of a few seconds:
the subprocess's own generous timeout is the failure signal, and the run
must end well inside it.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import pytest
from support import cli
from support import hub as H
from support import synthetic as S
from support import vllm_server as V
from vpatch.postflight.metrics import Counters

DEADLINE = "2"  # VPATCH_SERVER_TIMEOUT for a case: a hang ends in 2 s
LONGEST = 20.0  # seconds a case may take at most (start-up included)


@pytest.fixture
def vllm():
    with V.Vllm().running() as v:
        yield v


@pytest.fixture
def home(tmp_path) -> Path:
    h = tmp_path / "home"
    (h / "tmp").mkdir(parents=True)
    (h / "victim.txt").write_text("precious\n")
    return h


def files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def doctor(home: Path, *args: str, env: dict[str, str] | None = None):
    """`vpatch doctor ARGS` as a user runs it, in a sandbox HOME."""
    sandbox = {
        "HOME": str(home),
        "HF_HOME": str(home / "hf"),
        "VPATCH_CACHE": str(home / "cache"),
        "TMPDIR": str(home / "tmp"),
        "VPATCH_SERVER_TIMEOUT": DEADLINE,
    }
    before = files(home)
    t0 = time.monotonic()
    r = cli.vpatch("doctor", *args, env={**sandbox, **(env or {})}, timeout=60)
    r.took = time.monotonic() - t0  # type: ignore[attr-defined]
    assert files(home) == before, "a run wrote in the sandbox"
    return r


def one_line(r: subprocess.CompletedProcess, code: int) -> str:
    lines = r.stderr.strip().splitlines()
    errors = [ln for ln in lines if ln.startswith("vpatch: error:")]
    assert r.returncode == code, r.stderr + r.stdout
    assert len(errors) == 1 and lines[-1] == errors[0], r.stderr
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr, r.stderr
    assert r.stdout == "" and r.took < LONGEST  # type: ignore[attr-defined]
    return errors[0]


def page_without(word: str) -> bytes:
    return "\n".join(ln for ln in V.page(V.NEWEST).decode().splitlines() if word not in ln).encode()


# (path, the answer there, exit code, the words of the one line)
CASES = {
    "not vLLM: no /version": (V.VERSION, V.status(404, b"<html>"), 2, "/version: answered 404: "),
    "not vLLM: a web page": (V.VERSION, V.status(200, b"<html>"), 2, "is not a vLLM OpenAI server"),
    "not vLLM: no models": (V.MODELS, V.status(200, b"{}"), 2, "no list of models"),
    "not vLLM's metrics": (V.METRICS, V.status(200, b"up 1\n"), 2, "no vllm: metric on the page"),
    "no spec-decode counters": (
        V.METRICS,
        H.body(page_without("spec_decode")),
        2,
        "serves without speculative decoding: no vllm:spec_decode_* counters",
    ),
    "a malformed value": (
        V.METRICS,
        H.body(V.page(V.NEWEST).replace(b"} 501.0", b"} five")),
        2,
        "the value 'five' is no number",
    ),
    "a page not UTF-8": (V.METRICS, H.body(b"vllm:\xff\xfe"), 2, "not UTF-8 text"),
    "a huge page, said": (V.METRICS, H.drip(), 2, "an answer of 1000000000 bytes, more than"),
    "a huge page, unsaid": (V.METRICS, V.stream(40 << 20), 2, "an answer longer than the 32 MiB"),
    "a redirect elsewhere": (
        V.VERSION,
        V.redirect("http://evil.invalid/version"),
        2,
        "answered 302, a redirect to 'http://evil.invalid/version'; doctor follows none",
    ),
    "a redirect on the host": (V.METRICS, V.redirect("/metrics/", 307), 2, "answered 307"),
    "a server error": (V.METRICS, V.status(500), 3, "/metrics: the server answered 500"),
    "a hang": (V.VERSION, H.never, 3, "not read within 2s, the time doctor gives its server"),
    "a trickle": (V.METRICS, V.trickle(0.2), 3, "not read within 2s"),
}


@pytest.mark.parametrize("case", CASES)
def test_a_hostile_server(vllm, home, case):
    path, answer, code, said = CASES[case]
    vllm.hub.answer[path] = answer
    line = one_line(doctor(home, "--server", vllm.url), code)
    assert said in line, line
    if code == 3 and "not read within" in said:
        assert "VPATCH_SERVER_TIMEOUT=SECONDS sets it" in line


def test_nothing_listening(home):
    """What a user sees when `vllm serve` failed to start."""
    url = S.closed_port().removesuffix("/simple/")
    line = one_line(doctor(home, "--server", url), 3)
    assert line.startswith(
        f"vpatch: error: cannot reach a serving engine at {url}: connection refused"
    )


@pytest.mark.parametrize(
    ("args", "env", "said"),
    [
        (["--server", "ftp://h/"], {}, "doctor reads http:// and https:// URLs only"),
        (["--server", "file:///etc/passwd"], {}, "doctor reads http:// and https:// URLs only"),
        (["--server", "http://u:secret@h/"], {}, "a user or password in the URL is not sent"),
        (["--server", "http://secret@h/?token=secret"], {}, "a user or password in the URL"),
        (["--server", "URL", "--interval", "1_0"], {}, "--interval"),
        (["--server", "URL", "--interval", " 1"], {}, "--interval"),
        (["--server", "URL", "--interval", "１"], {}, "--interval"),
        (["--server", "URL", "--interval", "0"], {}, "--interval"),
        (["--interval", "5", "--target", "t", "--drafter", "d"], {}, "goes with --server URL"),
        (["--server", "URL"], {"VPATCH_SERVER_TIMEOUT": "soon"}, "not a number of seconds"),
    ],
)
def test_bad_input_asks_nothing(vllm, home, args, env, said):
    args = [vllm.url if a == "URL" else a for a in args]
    line = one_line(doctor(home, *args, env=env), 2)
    assert said in line and "secret" not in line, line
    assert vllm.asked == []


def test_a_healthy_server_writes_nothing_and_exits_0(vllm, home):
    r = doctor(home, "--server", vllm.url, "--interval", "1")
    assert r.returncode == 0, r.stderr
    assert "reading again in 1s (--interval)" in r.stderr
    assert "acceptance rate 0.433" in r.stdout and "last 1s" in r.stdout


def test_no_drafts_at_all_exits_1(vllm, home):
    vllm.metrics = V.render({(V.MODEL, "0"): Counters(0, 0, 0, (0, 0, 0), 1008, 8, 0)})
    r = doctor(home, "--server", vllm.url)
    assert r.returncode == 1 and "error    drafts" in r.stdout, r.stdout + r.stderr


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_ends_a_hung_read_at_once(vllm, home, sig):
    """Ctrl-C (or SIGTERM) while a server hangs: 130 at once, nothing written."""
    vllm.hub.answer[V.METRICS] = H.never
    env = {"HOME": str(home), "TMPDIR": str(home / "tmp"), "VPATCH_SERVER_TIMEOUT": "60"}
    before = files(home)
    p = subprocess.Popen(
        [*cli.command(), "doctor", "--server", vllm.url],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=cli.environment(env),
    )
    deadline = time.monotonic() + 20
    while "/metrics" not in vllm.asked and time.monotonic() < deadline:
        time.sleep(0.05)
    t0 = time.monotonic()
    p.send_signal(sig)
    out, err = p.communicate(timeout=30)
    assert time.monotonic() - t0 < 5
    assert p.returncode == 130, err
    assert err.strip().splitlines()[-1] == "vpatch: error: interrupted; nothing was left half done"
    assert "Traceback" not in err and out == ""
    assert files(home) == before


# -- what a server sends is shown escaped; no credential is printed ----------------------

FORGED = f"{V.NEWEST}\nok: 0 errors\x1b]0;pwned\x07"


def test_what_a_server_sends_reaches_the_terminal_escaped(vllm, home):
    """A /version of FORGED and a model name (a metrics label) holding a
    newline, ESC[2J and a bidi override reached the terminal as sent: a
    forged `ok: 0 errors` line, a cleared screen, a new window title. Now
    each control character is shown as its escape, in the report and on
    stderr; --format json keeps the text as sent."""
    model = "m\x1b[2J\nok: 0 errors\u202eevil"
    vllm.version = FORGED
    vllm.cards = [V.card(model, root="/models/\x1b]0;root\x07")]
    vllm.metrics = V.render({(model, "0"): V.WORKING})
    r = doctor(home, "--server", vllm.url)
    assert r.returncode == 0, r.stderr
    for out in (r.stdout, r.stderr):
        assert not [ch for ch in out if (ord(ch) < 32 and ch != "\n") or 0x7F <= ord(ch) < 0xA0]
        assert "\u202e" not in out
    assert [ln for ln in r.stdout.splitlines() if ln.startswith("ok:")] == [
        "ok: 0 errors, 1 warning"
    ]
    assert f"vLLM {V.NEWEST}\\nok: 0 errors\\x1b]0;pwned\\x07" in r.stdout
    assert "model  m\\x1b[2J\\nok: 0 errors\\u202eevil (root /models/\\x1b]0;root\\x07" in r.stdout
    j = doctor(home, "--server", vllm.url, "--format", "json")
    server = json.loads(j.stdout)["servers"][0]
    assert server["version"] == FORGED and server["models"][0]["id"] == model


def test_a_servers_words_in_an_error_are_escaped(vllm, home):
    """A metrics label in a malformed page, quoted in the one error line."""
    page = V.render({("m\x1b]0;pwned\x07", "0"): V.WORKING}).replace(b"} 501.0", b"} five")
    vllm.hub.answer[V.METRICS] = H.body(page)
    line = one_line(doctor(home, "--server", vllm.url), 2)
    assert "\x1b" not in line and "\x07" not in line and "the value 'five' is no number" in line


def test_a_redirect_is_shown_without_its_credentials(vllm, home):
    """A redirect's Location was echoed whole, `user:pass@` and `?token=` in it."""
    to = "http://user:hunter2@evil.invalid/version?token=abc123&x=1"
    vllm.hub.answer[V.VERSION] = V.redirect(to)
    line = one_line(doctor(home, "--server", vllm.url), 2)
    assert "a redirect to 'http://***@evil.invalid/version?token=***&x=1'" in line, line
    assert "hunter2" not in line and "abc123" not in line


# -- a short read is a broken read ---------------------------------------------------------

WHOLE = {
    V.VERSION: ("/version", json.dumps({"version": V.NEWEST}).encode()),
    V.MODELS: ("/v1/models", json.dumps({"object": "list", "data": [V.card(V.MODEL)]}).encode()),
    V.METRICS: ("/metrics", V.page(V.NEWEST)),
}


@pytest.mark.parametrize("how", ["content-length", "chunked"])
@pytest.mark.parametrize("path", list(WHOLE), ids=[p for p, _ in WHOLE.values()])
def test_an_answer_cut_short_is_exit_3(vllm, home, path, how):
    """A server that declares Content-Length N, sends N - 2 bytes and
    closes: /metrics was read as whole (`... 501` read as `50`, the
    position-0 warning gone, exit 0), a /version was "not a vLLM OpenAI
    server" (exit 2). A chunked answer without its last chunk, the same.
    Now either is the answer broken off: exit 3, try again."""
    name, data = WHOLE[path]
    vllm.hub.answer[path] = V.cut_short(data) if how == "content-length" else V.chunks_cut(data)
    line = one_line(doctor(home, "--server", vllm.url), 3)
    assert f"{vllm.url}{name}: the answer broke off" in line and "try again" in line, line


# -- the so-so cases --------------------------------------------------------------------------


def test_a_server_named_twice_is_read_once(vllm, home):
    r = doctor(home, "--server", vllm.url, vllm.url + "/", vllm.url + "/v1")
    assert r.returncode == 0, r.stderr
    assert vllm.asked == ["/version", "/v1/models", "/metrics"]
    assert r.stdout.count(f"server   {vllm.url}:") == 1


@pytest.mark.parametrize("version", ["abc", "0.26", "dev"])
def test_a_version_that_names_no_release_is_said_so(vllm, home, version):
    """vLLM answers `dev` when built without its version (vllm/version.py);
    `abc` and `0.26` name no release either. Alone, the server is judged
    and the series finding says the release is unknown and why."""
    vllm.version = version
    r = doctor(home, "--server", vllm.url)
    assert r.returncode == 0, r.stderr
    (line,) = [ln for ln in r.stdout.splitlines() if " series " in ln]
    assert f"the server's /version is '{version}', which names no vLLM release" in line, line
    assert "older than" not in r.stdout
