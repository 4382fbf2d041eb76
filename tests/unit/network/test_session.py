"""network/session.py: the opener a reader is handed (no redirect followed
where it asks for none), and a body read under a cap and a clock: each
read checked, no byte past the cap, a body cut short of its Content-Length
refused. Through the readers, end to end: the index's page
(sources/test_index.py), a download (sources/test_cache.py) and a vLLM
server's answers (postflight/test_server.py, test_hostile_server.py)."""

from __future__ import annotations

import urllib.error

import pytest
from support import hub as H
from vpatch.errors import ConfigError, NetworkError
from vpatch.network import session


class Answer:
    """An answer as http.client gives one: its headers, and read1 bringing
    its chunks one at a time; `reads` counts the reads."""

    def __init__(self, chunks: list[bytes], length: str | None = None) -> None:
        self.headers = {} if length is None else {"Content-Length": length}
        self.chunks = iter(chunks)
        self.reads = 0

    def read1(self, n: int) -> bytes:
        self.reads += 1
        chunk = next(self.chunks, b"")
        assert len(chunk) <= n
        return chunk


def too_long(length: int | None) -> ConfigError:
    return ConfigError(f"too long: {length}")


def nothing() -> None:
    pass


def test_a_body_is_read_whole_with_a_check_after_each_read():
    resp, checked = Answer([b"ab", b"cd"], "4"), []
    assert session.body(resp, 4, "x", too_long, lambda: checked.append(resp.reads)) == b"abcd"
    assert checked == [1, 2, 3]  # after each read, the last (empty) one too


def test_the_check_stops_the_read():
    resp = Answer([b"ab", b"cd", b"ef"])

    def stop() -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        session.body(resp, 100, "x", too_long, stop)
    assert resp.reads == 1


def test_a_body_over_the_cap_is_not_read():
    """Declared: refused before a byte is read; undeclared: once more came."""
    resp = Answer([b"0123456789"], "11")
    with pytest.raises(ConfigError, match="^too long: 11$"):
        session.body(resp, 10, "x", too_long, nothing)
    assert resp.reads == 0
    resp = Answer([b"0123", b"4567", b"89", b"a", b"more"])
    with pytest.raises(ConfigError, match="^too long: None$"):
        session.body(resp, 10, "x", too_long, nothing)
    assert resp.reads == 4
    assert session.body(Answer([b"0123456789"], "10"), 10, "x", too_long, nothing)


def test_a_body_cut_short_broke_off():
    with pytest.raises(NetworkError) as e:
        session.body(Answer([b"12345678"], "10"), 100, "GET /x: the answer", too_long, nothing)
    assert str(e.value) == (
        "GET /x: the answer broke off (8 of the 10 bytes it declared came); try again"
    )
    session.whole(Answer([], "8"), 8, "x")  # all of it came


@pytest.mark.parametrize("length", ["", "ten", "\xb2", "-1", "1e3"])
def test_a_length_that_is_no_number_is_none_declared(length):
    """`Content-Length: ²` (a digit to str.isdigit, not to int) raised
    ValueError in `vpatch doctor --server`: an internal error."""
    assert session.declared(Answer([], length)) is None
    assert session.body(Answer([b"abc"], length), 10, "x", too_long, nothing) == b"abc"


def test_sizes_as_messages_say_them():
    assert (session.size(16 << 20), session.size(1 << 16), session.size(1 << 20)) == (
        "16 MiB",
        "64 KiB",
        "1 MiB",
    )


def test_an_opener_that_follows_no_redirect():
    """opener(Unfollowed()) (doctor --server's): a 3xx is an HTTPError with
    its status and Location, and the place it points to is not asked;
    opener() follows as urllib does."""
    s = H.StandIn()
    s.answer["^/from$"] = lambda h, p: h._send(302, b"", {"Location": "/to"})
    s.answer["^/to$"] = lambda h, p: h._send(200, b"here")
    with s.running():
        with pytest.raises(urllib.error.HTTPError) as e:
            session.opener(session.Unfollowed()).open(s.url + "/from", timeout=10)
        assert (e.value.code, e.value.headers["Location"]) == (302, "/to")
        e.value.close()
        assert [p for _, p, _ in s.log] == ["/from"]
        with session.opener().open(s.url + "/from", timeout=10) as r:
            assert r.read() == b"here"
