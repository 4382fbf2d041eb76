"""postflight/server.py: a running vLLM read (its URL, the three requests, their
limits), against the stand-in of tests/support/vllm_server.py on 127.0.0.1.
Its metrics page, parsed: test_metrics.py. Hostile servers end to end, as a
user runs doctor: tests/unit/test_hostile_server.py."""

from __future__ import annotations

import time

import pytest
from support import hub as H
from support import vllm_server as V
from vpatch import settings
from vpatch.errors import ConfigError, NetworkError
from vpatch.postflight import server
from vpatch.postflight.metrics import Counters


@pytest.mark.parametrize(
    ("url", "base"),
    [
        ("http://127.0.0.1:8000", "http://127.0.0.1:8000"),
        ("http://127.0.0.1:8000/", "http://127.0.0.1:8000"),
        ("https://vllm.internal/v1", "https://vllm.internal"),  # an OpenAI client's base URL
        ("http://[::1]:8000/serve/kimi/v1/", "http://[::1]:8000/serve/kimi"),  # behind a proxy
    ],
)
def test_a_base_url(url, base):
    assert server.base(url) == base


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("ftp://h/", "http:// and https:// URLs only"),
        ("file:///etc/passwd", "http:// and https:// URLs only"),
        ("127.0.0.1:8000", "http:// and https:// URLs only"),
        ("http://", "no host"),
        ("http://u:p@h:8000", "a user or password"),
        ("http://h:8000/?x=1", r"without \?query"),
        ("http://h:8000/#x", r"without \?query"),
        ("http://h:99999", "not a URL"),
        ("http://h:8000/a b", "no spaces or control"),
        ("http://h:80" + "0" * 5000, "not a URL"),
    ],
)
def test_a_bad_url_is_bad_input(url, said):
    with pytest.raises(ConfigError, match=said) as e:
        server.base(url)
    assert len(str(e.value)) < 200


def test_the_limit(monkeypatch):
    monkeypatch.delenv(server.VARIABLE, raising=False)
    assert server.limit() == server.DEFAULT == 30.0
    monkeypatch.setenv(server.VARIABLE, "2.5")
    assert server.limit() == 2.5
    monkeypatch.setenv(server.VARIABLE, "never")
    with pytest.raises(ConfigError, match="VPATCH_SERVER_TIMEOUT='never': not a number"):
        server.limit()


# -- against the stand-in -------------------------------------------------------------


@pytest.fixture
def vllm():
    with V.Vllm().running() as v:
        yield v


def test_a_server_read(vllm):
    vllm.cards = [V.card(V.MODEL, "moonshotai/Kimi-K2.5", 262144), V.card("lora", None, 8)]
    r = server.read(vllm.url + "/v1/")
    assert (r.url, r.version, r.models_unread) == (vllm.url, V.NEWEST, "")
    assert r.cards == (
        server.Card(V.MODEL, "moonshotai/Kimi-K2.5", 262144),
        server.Card("lora", "/models/lora", 8),
    )
    assert r.engines == {(V.MODEL, "0"): V.WORKING}
    assert vllm.asked == ["/version", "/v1/models", "/metrics"]


def test_a_model_length_that_is_no_whole_number_in_range_is_unsaid(vllm):
    """A card's max_model_len is kept when it is a whole number doctor reads
    (settings.MOST at most), else unsaid: a float (inf from 1e999 too), a
    bool, text, below 0, or 400 digits long, which the report printed whole."""
    odd = [True, 1.5, float("inf"), "8", -1, 10**400, settings.MOST + 1]
    vllm.cards = [V.card(f"m{i}", None, n) for i, n in enumerate(odd)]
    vllm.cards.append(V.card("ok", None, settings.MOST))
    lengths = [c.max_model_len for c in server.read(vllm.url).cards]
    assert lengths == [None] * len(odd) + [settings.MOST]


def test_behind_an_api_key_the_models_are_not_read(vllm):
    """vLLM asks the key for /v1 paths only: the rest is read."""
    vllm.hub.answer[V.MODELS] = V.status(401, b'{"error": "Unauthorized"}', "application/json")
    r = server.read(vllm.url)
    assert r.cards == () and r.models_unread == "asks for an API key (401; `vllm serve --api-key`)"
    assert r.engines == {(V.MODEL, "0"): V.WORKING}


def test_a_window_two_reads_apart_and_its_clock(vllm):
    """The deadline is the reads' time: the wait between them is not
    counted (a deadline shorter than the interval still holds)."""
    first, later = V.WORKING, Counters(601, 1803, 800, (360, 260, 180), 1460, 10, 2)
    vllm.metrics = V.render({(V.MODEL, "0"): first})

    def change(h, p):
        h._send(200, V.render({(V.MODEL, "0"): later}), {"Content-Type": V.TEXT})
        return None

    said: list[str] = []
    t0 = time.monotonic()
    calls = iter([False, True])

    def metrics(h, p):
        if next(calls):
            return change(h, p)
        h._send(200, vllm.metrics, {"Content-Type": V.TEXT})
        return None

    vllm.hub.answer[V.METRICS] = metrics
    (w,) = server.watch([vllm.url], interval=1, say=said.append, seconds=0.8)
    assert time.monotonic() - t0 >= 1
    assert said == ["reading again in 1s (--interval)"]
    assert w.first.engines[(V.MODEL, "0")] == first
    assert w.last.engines[(V.MODEL, "0")] == later and w.interval == 1
    assert w.second is not None and w.second.at - w.first.at >= 1


def test_a_fleet_in_order_and_the_first_error_first():
    with V.Vllm().running() as a, V.Vllm().running() as b:
        ws = server.watch([b.url, a.url])
        assert [w.first.url for w in ws] == [b.url, a.url]
        a.hub.answer[V.VERSION] = V.status(404, b"not found")
        b.hub.answer[V.METRICS] = V.status(500)
        with pytest.raises(NetworkError, match=f"^{b.url}/metrics: the server answered 500"):
            server.watch([b.url, a.url])


@pytest.mark.parametrize(
    ("path", "answer", "error", "said"),
    [
        (V.VERSION, V.status(404, b"<html>"), ConfigError, "/version: answered 404: http"),
        (V.VERSION, V.status(200, b"<html>"), ConfigError, "/version: not valid JSON"),
        (V.VERSION, V.status(200, b'{"v": 1}'), ConfigError, "/version: no vLLM version"),
        (V.VERSION, V.status(200, b'{"version": 7}'), ConfigError, "/version: no vLLM version"),
        (V.MODELS, V.status(200, b'{"data": 1}'), ConfigError, "no list of models"),
        (V.MODELS, V.status(200, b'{"data": [{}]}'), ConfigError, "a model without an id"),
        (V.MODELS, V.status(200, b"[" * 100000), ConfigError, "nested too deep"),
        (V.VERSION, V.redirect("https://elsewhere/version"), ConfigError, "a redirect to 'https"),
        (V.METRICS, V.redirect("/metrics/", 307), ConfigError, "answered 307, a redirect"),
        (V.METRICS, V.status(503), NetworkError, "/metrics: the server answered 503; try again"),
        (V.METRICS, H.body(b"x" * 10, {"Content-Encoding": "gzip"}), ConfigError, "gzip"),
        (V.METRICS, H.drip(), ConfigError, "an answer of 1000000000 bytes, more than the 32"),
        (V.VERSION, V.stream(1 << 20), ConfigError, "longer than the 64 KiB doctor reads"),
    ],
)
def test_an_answer_vllm_does_not_give(vllm, path, answer, error, said):
    vllm.hub.answer[path] = answer
    t0 = time.monotonic()
    with pytest.raises(error) as e:
        server.read(vllm.url, seconds=10)
    assert said in str(e.value) and str(e.value).startswith(vllm.url)
    assert isinstance(e.value, NetworkError) is (error is NetworkError)
    assert time.monotonic() - t0 < 5


def test_a_huge_page_without_a_length_is_not_read_past_the_most(vllm, monkeypatch):
    monkeypatch.setitem(server.MOST, "/metrics", 1 << 20)
    vllm.hub.answer[V.METRICS] = V.stream(64 << 20)
    with pytest.raises(ConfigError, match="an answer longer than the 1 MiB doctor reads of it"):
        server.read(vllm.url, seconds=10)


@pytest.mark.parametrize("how", ["never", "trickle"])
def test_a_server_that_hangs_or_trickles_ends_at_the_deadline(vllm, how):
    vllm.hub.answer[V.METRICS] = H.never if how == "never" else V.trickle(0.1)
    t0 = time.monotonic()
    with pytest.raises(server.Unanswered) as e:
        server.read(vllm.url, seconds=0.6)
    assert time.monotonic() - t0 < 3
    doing = "no answer to" if how == "never" else "the answer to"
    assert str(e.value).startswith(
        f"{vllm.url}: not read within 0.6s, the time doctor gives its server reads in all "
        f"(VPATCH_SERVER_TIMEOUT=SECONDS sets it): {doing} GET {vllm.url}/metrics"
    )
    assert isinstance(e.value, NetworkError)


def test_a_stopped_read_takes_no_byte_more(vllm):
    """The read's thread itself stops at the deadline (each chunk is read
    after a check), not only the wait for it: a trickle keeps no thread."""
    from vpatch.network import deadline

    vllm.hub.answer[V.METRICS] = V.trickle(0.05)
    with pytest.raises(server.Unanswered), deadline.Reads(0.5, kind=server.SERVER) as reads:
        reads.budget.begin()
        job = reads.start(vllm.url, server._read, vllm.url)
        reads.result(job)
    assert job.done.wait(2) and isinstance(job.error, server.Unanswered)


def test_nothing_listening_is_cannot_reach_a_serving_engine():
    from support import synthetic as S

    url = S.closed_port().removesuffix("/simple/")
    with pytest.raises(NetworkError) as e:
        server.read(url, seconds=5)
    assert str(e.value).startswith(f"cannot reach a serving engine at {url}: connection refused")


def test_the_docs_state_the_limits():
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[3] / "docs" / "doctor.md").read_text()
    section = " ".join(doc.split("## After it serves: `--server`")[1].split("\n## ")[0].split())
    assert f"`{server.VARIABLE}` seconds (default {server.DEFAULT:g};" in section
    most = server.MOST
    said = (
        f"{most['/version'] >> 10} KiB (`/version`), {most['/v1/models'] >> 20} MiB "
        f"(`/v1/models`) or {most['/metrics'] >> 20} MiB (`/metrics`"
    )
    assert said in section


def test_a_server_read_sends_no_credential_of_the_index(vllm, monkeypatch, tmp_path):
    """netrc and the index's credentials are the index's (network/auth.py):
    doctor's reads of a vLLM server, on the same host, send none of them."""
    from support.simple import pip_names

    netrc = tmp_path / "netrc"
    netrc.write_text("machine 127.0.0.1 login user password s3cret\n")
    monkeypatch.setenv("NETRC", str(netrc))
    seen = []

    def version(h, p):
        seen.append(h.headers.get("Authorization"))
        h._send(200, b'{"version": "%s"}' % V.NEWEST.encode(), {"Content-Type": "application/json"})

    vllm.hub.answer[V.VERSION] = version
    with pip_names(monkeypatch, vllm.url.replace("http://", "http://user:s3cret@") + "/simple"):
        server.read(vllm.url, seconds=10)
    assert seen == [None]


def test_no_message_shows_a_credential(vllm):
    """The refusal of a URL with a user or password, and a redirect's
    Location, said the credential in them (the library's message, before
    the CLI's line hides it too)."""
    with pytest.raises(ConfigError) as e:
        server.base("http://user:s3cret@h:8000/?token=t0ken")
    assert "s3cret" not in str(e.value) and "t0ken" not in str(e.value)
    assert "'http://***@h:8000/?token=***'" in str(e.value)
    vllm.hub.answer[V.VERSION] = V.redirect("http://u:s3cret@elsewhere/?sig=abc&x=1")
    with pytest.raises(ConfigError) as e:
        server.read(vllm.url, seconds=10)
    assert "a redirect to 'http://***@elsewhere/?sig=***&x=1'" in str(e.value), e.value


def test_a_length_that_is_no_number_is_no_length(vllm):
    """`Content-Length: ²` (one byte, 0xb2: a digit to str.isdigit, not to
    int) was a ValueError out of the read: an internal error. It is no
    length, as http.client takes it: the answer is read to its end."""

    def version(h, p):
        body = b'{"version": "%s"}' % V.NEWEST.encode()
        head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: \xb2\r\n\r\n"
        h.wfile.write(head + body)
        h.wfile.flush()
        h.close_connection = True

    vllm.hub.answer[V.VERSION] = version
    assert server.read(vllm.url, seconds=10).version == V.NEWEST


def test_the_servers_client_is_built_once():
    """Three requests a server a read: one TLS context for them all."""
    assert server._opener() is server._opener()
