"""huggingface_hub's client under the hub reads' deadline: the limit
(VPATCH_HUB_TIMEOUT), the hooks on its session (a request waits no longer
than the time left, a body stops between chunks) and its log silenced while
the reads run. End to end, against a hostile hub: tests/unit/test_hostile_hub.py."""

from __future__ import annotations

import logging

import httpx2
import pytest
from vpatch.errors import ConfigError
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
        stream = hubclient._checked(iter([b"a", b"b", b"c"]), b, "acme/d", ("GET http://f", 200))
        got = []
        with pytest.raises(KeyboardInterrupt):
            for chunk in stream:
                got.append(chunk)
                b.stop()
        assert got == [b"a"]


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
