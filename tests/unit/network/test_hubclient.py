"""huggingface_hub's client under the hub reads' deadline: the limit
(VPATCH_HUB_TIMEOUT), the hooks on its session (a request waits no longer
than the time left, a body stops between chunks) and its log silenced while
the reads run. End to end, against a hostile hub: tests/unit/test_hostile_hub.py."""

from __future__ import annotations

import logging

import httpx2
import pytest
from vpatch.errors import ConfigError, NetworkError
from vpatch.network import deadline, hubclient


def test_the_limit(monkeypatch):
    monkeypatch.delenv("VPATCH_HUB_TIMEOUT", raising=False)
    assert hubclient.limit() == hubclient.DEFAULT
    monkeypatch.setenv("VPATCH_HUB_TIMEOUT", "2.5")
    assert hubclient.limit() == 2.5
    assert hubclient.reads().budget.seconds == 2.5
    for bad in ("0", "-1", "soon", "inf", "nan"):
        monkeypatch.setenv("VPATCH_HUB_TIMEOUT", bad)
        with pytest.raises(ConfigError, match="VPATCH_HUB_TIMEOUT=.*not a number of seconds"):
            hubclient.limit()


def test_a_request_waits_no_longer_than_the_time_left():
    with hubclient.bounded(5, "acme/d") as b:
        r = httpx2.Request("GET", "http://hub/api/models/acme/d?x=1")
        r.extensions["timeout"] = {"connect": 10.0, "read": 1.0, "write": None, "pool": 10.0}
        hubclient._on_request(r)
        got = r.extensions["timeout"]
        assert got["read"] == 1.0 and all(0 < got[k] <= 5 for k in ("connect", "write", "pool"))
        assert b.asked["acme/d"] == ("GET http://hub/api/models/acme/d", None, False)
        b.stop()
        with pytest.raises(KeyboardInterrupt):
            hubclient._on_request(r)
    assert deadline.current() is None


def test_a_body_stops_between_chunks():
    with hubclient.bounded(5, "acme/d") as b:
        said = ("GET http://f", 200)
        stream = hubclient._checked(iter([b"a", b"b", b"c"]), b, "acme/d", said, "f", 3)
        got = []
        with pytest.raises(KeyboardInterrupt):
            for chunk in stream:
                got.append(chunk)
                b.stop()
        assert got == [b"a"]


@pytest.mark.parametrize("length", [5, None])
def test_a_body_cut_short_broke_off(length):
    """The RemoteProtocolError of a body cut short (httpx's, for a short
    Content-Length or a chunked body without its last chunk) stays one to
    huggingface_hub, which tries again, and is doctor's NetworkError
    (exit 3), found through an error raised from it too."""

    def cut():
        yield b"ab"
        raise httpx2.RemoteProtocolError("peer closed connection")

    with hubclient.bounded(5, "acme/d") as b:
        said = ("GET http://f", 200)
        stream = hubclient._checked(cut(), b, "acme/d", said, "http://f: the answer", length)
        with pytest.raises(httpx2.RemoteProtocolError) as e:
            list(stream)
    error = hubclient.broke_off(e.value)
    assert isinstance(error, NetworkError) and error.exit_code == 3
    came = "2 of the 5 bytes it declared came" if length else "2 bytes came, not the last chunk"
    assert str(error).startswith(f"http://f: the answer broke off ({came}")
    assert str(error).endswith("; try again")
    try:
        raise OSError("wrapped") from e.value
    except OSError as wrapped:
        assert hubclient.broke_off(wrapped) is error
    assert hubclient.broke_off(httpx2.RemoteProtocolError("before any answer")) is None


def test_the_hubs_log_is_silenced_while_the_reads_run():
    """huggingface_hub's retry warnings came before the error line: its log
    says nothing while the hub reads run, and what it said before after."""
    log = logging.getLogger("huggingface_hub")
    before = log.level
    log.setLevel(logging.WARNING)
    try:
        with hubclient.bounded(5, "acme/d"):
            assert not log.isEnabledFor(logging.CRITICAL)
        assert log.level == logging.WARNING
    finally:
        log.setLevel(before)
