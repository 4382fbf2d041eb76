"""A run's deadline and its stop: reads on daemon threads that the main
thread leaves at the deadline or on Ctrl-C / SIGTERM, taking back what they
made, worded by their kind (the hub's reads, hubclient.HUB, and another's).
The hooks on huggingface_hub's session: test_hubclient.py. End to end,
against a hostile hub: tests/unit/test_hostile_hub.py."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest
from vpatch.errors import ConfigError, NetworkError
from vpatch.network import deadline, hubclient

STUCK = threading.Event()  # never set: a read stuck in a socket


def stuck(made: list[str]) -> None:
    """A read stuck in a socket (30 s: a test that waits for it fails on its
    time, rather than hang)."""
    with deadline.on_stop(lambda: made.append("taken back")):
        deadline.current().begin()  # as resolve does once huggingface_hub is imported
        STUCK.wait(30)


def test_a_stuck_read_is_left_at_the_deadline_and_taken_back():
    made: list[str] = []
    t0 = time.monotonic()
    with pytest.raises(hubclient.Expired) as e, hubclient.reads(0.3) as reads:
        job = reads.start("acme/d", stuck, made)
        reads.result(job)
    assert time.monotonic() - t0 < 5  # not waited for (generous: the signal is a hang)
    assert str(e.value).startswith("acme/d: not read within 0.3s, the time doctor gives")
    assert "VPATCH_HUB_TIMEOUT=SECONDS sets it): no request made yet" in str(e.value)
    assert made == ["taken back"]


def test_the_clock_starts_with_the_first_read():
    """Importing huggingface_hub is no hub read: a job that has not begun is
    not timed out."""
    with hubclient.reads(0.2) as reads:
        job = reads.start("acme/d", lambda: time.sleep(0.5) or "read")
        assert reads.result(job) == "read"


def test_what_is_no_hub_read_is_awaited_past_the_deadline():
    with hubclient.reads(0.1) as reads:
        reads.start("acme/d", lambda: deadline.current().begin())
        job = reads.start("PY", lambda: time.sleep(0.4) or "answered", bounded=False)
        assert reads.result(job) == "answered"


def test_a_read_that_fails_says_its_own_error():
    def fails() -> None:
        raise ConfigError("acme/d: no such repo")

    with pytest.raises(ConfigError, match="no such repo"), hubclient.reads(5) as reads:
        reads.result(reads.start("acme/d", fails))


def test_the_main_thread_says_what_it_awaits(monkeypatch):
    monkeypatch.setattr(deadline, "NOTICE", 0.1)
    said: list[str] = []

    def slow() -> str:
        deadline.current().begin()
        time.sleep(0.4)
        return "read"

    with hubclient.reads(30, said.append) as reads:
        assert reads.result(reads.start("acme/d", slow)) == "read"
    assert said == [
        "waiting for the hub (acme/d: no request made yet); gives up 30s after it started "
        "(VPATCH_HUB_TIMEOUT=SECONDS sets the limit)"
    ]


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_ends_the_wait_and_takes_back(sig):
    made: list[str] = []
    before = signal.getsignal(signal.SIGTERM)
    threading.Timer(0.3, os.kill, (os.getpid(), sig)).start()
    t0 = time.monotonic()
    with pytest.raises(KeyboardInterrupt), hubclient.reads(600) as reads:
        reads.result(reads.start("acme/d", stuck, made))
    assert time.monotonic() - t0 < 5
    assert made == ["taken back"]
    assert signal.getsignal(signal.SIGTERM) == before


def test_a_stopped_read_goes_no_further():
    b = deadline.Budget(600, hubclient.HUB)
    b.check()
    b.stop()
    with pytest.raises(KeyboardInterrupt):
        b.check()
    b = deadline.Budget(0.01, hubclient.HUB)
    b.begin()
    time.sleep(0.02)
    with pytest.raises(hubclient.Expired):
        b.check()
    assert b.stopped.is_set() and b.expired


def within(seconds: float, fn):
    """fn()'s result or error, or a failure when it has not returned in
    `seconds` (rather than a test that hangs)."""
    got: dict = {}

    def run() -> None:
        try:
            got["value"] = fn()
        except BaseException as e:
            got["error"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), f"still running after {seconds}s"
    if "error" in got:
        raise got["error"]
    return got["value"]


def test_each_keeps_the_order_and_raises_the_first_failure():
    squares = within(10, lambda: deadline.each(lambda i: i * i, list(range(20)), workers=4))
    assert squares == [i * i for i in range(20)]
    started: list[int] = []

    def one(i: int) -> int:
        started.append(i)
        if i >= 3:
            raise ValueError(i)
        return i

    with pytest.raises(ValueError, match="^3$"):
        within(10, lambda: deadline.each(one, list(range(100)), workers=2))
    assert len(started) < 10  # nothing started after a failure


class Late(NetworkError):
    pass


OTHER = deadline.Kind("server reads", "the server", "VPATCH_X_TIMEOUT", "try again", Late)


def test_a_kind_words_the_deadline_and_raises_its_error(monkeypatch):
    """Reads of another kind (doctor --server's) say their own variable and
    raise their own error when the time is up, and in the notice."""
    monkeypatch.setattr(deadline, "NOTICE", 0.05)
    said: list[str] = []
    with pytest.raises(Late) as e, deadline.Reads(0.3, said.append, kind=OTHER) as reads:
        reads.budget.begin()
        reads.result(reads.start("http://h:1", STUCK.wait, 30))
    assert str(e.value) == (
        "http://h:1: not read within 0.3s, the time doctor gives its server reads in all "
        "(VPATCH_X_TIMEOUT=SECONDS sets it): no request made yet; try again"
    )
    assert said == [
        "waiting for the server (http://h:1: no request made yet); gives up 0.3s after it "
        "started (VPATCH_X_TIMEOUT=SECONDS sets the limit)"
    ]


def test_asked_is_where_a_read_was():
    def read() -> None:
        deadline.asked("GET http://h:1/metrics", 200)
        STUCK.wait(30)

    said = r"the answer to GET http://h:1/metrics \(200\) had not"
    with pytest.raises(Late, match=said), deadline.Reads(0.2, kind=OTHER) as reads:
        reads.budget.begin()
        reads.result(reads.start("http://h:1", read))
    deadline.asked("GET nowhere")  # outside a read: nothing to note, no error


def test_the_clock_stands_still_in_a_pause():
    b = deadline.Budget(0.3, hubclient.HUB)
    b.begin()
    with b.pause():
        time.sleep(0.4)
    assert b.left() > 0.25
    b.check()  # not expired
    time.sleep(0.35)
    with pytest.raises(hubclient.Expired):
        b.check()


def test_the_notice_of_many_reads_is_one_short_line(monkeypatch):
    """`--server` with 1000 URLs that hang: the notice on stderr was one line
    of 80 KB. It names the first reads awaited and counts the rest."""
    monkeypatch.setattr(deadline, "NOTICE", 0.05)
    said: list[str] = []
    with pytest.raises(Late), deadline.Reads(0.3, said.append, kind=OTHER) as reads:
        jobs = [reads.start(f"http://h:{i}", STUCK.wait, 30) for i in range(1, 1001)]
        reads.budget.begin()  # the clock from here: starting 1000 threads takes a while
        reads.result(jobs[0])
    (line,) = said
    assert line.startswith("waiting for the server (http://h:1: no request made yet; http://h:2")
    assert "; and 997 more); gives up 0.3s after it started" in line, line[:400]
    assert len(line) < 300, line[:400]
