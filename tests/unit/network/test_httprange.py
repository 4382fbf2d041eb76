"""network/httprange.py: the one rule for a range answer (a 206 with the range asked
for, short only where the file ends), a 200 refused with its body unread, and
the bounded plain-GET fallback, against answers made here."""

from __future__ import annotations

import contextlib
import itertools

import pytest
from vpatch.errors import RangeUnsupported
from vpatch.network import httprange

FILE = bytes(range(100))


class Server:
    """Answers one GET as told; counts the body's chunks a reader pulled."""

    def __init__(self, status: int, headers: dict[str, str], body: bytes, endless: bool = False):
        self.status, self.headers, self.body, self.endless = status, headers, body, endless
        self.pulled = 0
        self.asked: list[dict[str, str]] = []

    def chunks(self):
        pieces = [self.body[i : i + 8] for i in range(0, len(self.body), 8)]
        for piece in itertools.cycle(pieces) if self.endless else pieces:
            self.pulled += 1
            yield piece

    @contextlib.contextmanager
    def get(self, headers):
        self.asked.append(headers)
        yield httprange.Answer(self.status, self.headers, self.chunks())


def ranged(start: int, end: int, size: int = len(FILE), **kw) -> Server:
    last = min(end, size) - 1
    return Server(
        206, {"Content-Range": f"bytes {start}-{last}/{size}"}, FILE[start : last + 1], **kw
    )


def test_a_206_with_the_range_asked_for():
    s = ranged(10, 30)
    assert httprange.read(s.get, "f", 10, 30) == httprange.Part(FILE[10:30], 100)
    assert s.asked == [{"Range": "bytes=10-29"}]


def test_short_only_where_the_file_ends():
    assert httprange.read(ranged(90, 120).get, "f", 90, 120) == httprange.Part(FILE[90:], 100)
    s = Server(206, {"Content-Range": "bytes 10-29/100"}, FILE[10:25])  # cut short
    with pytest.raises(RangeUnsupported, match="asked the server for 20 bytes, got 15"):
        httprange.read(s.get, "f", 10, 30)


@pytest.mark.parametrize(
    ("headers", "body", "said"),
    [
        ({"Content-Range": "bytes 0-19/100"}, FILE[0:20], "the server sent 'bytes 0-19/100'"),
        ({}, FILE[10:31], "asked the server for 20 bytes, got more"),
        ({"Content-Range": "bytes 10-29/100"}, FILE[10:31], "got more"),
    ],
    ids=["another-range", "oversized-no-content-range", "oversized"],
)
def test_any_other_206_is_refused(headers, body, said):
    with pytest.raises(RangeUnsupported, match=said):
        httprange.read(Server(206, headers, body).get, "f", 10, 30)


def test_a_200_is_refused_and_its_body_not_read():
    s = Server(200, {"Content-Length": "100"}, FILE, endless=True)
    with pytest.raises(RangeUnsupported, match="ignores range requests \\(answered 200\\)"):
        httprange.read(s.get, "f", 10, 30)
    assert s.pulled == 0


def test_a_416_is_no_bytes():
    s = Server(416, {"Content-Range": "bytes */100"}, b"")
    assert httprange.read(s.get, "f", 200, 300) == httprange.Part(b"", 100)


def test_head_reads_a_plain_get_no_further_than_asked():
    s = Server(200, {"Content-Length": "100"}, FILE, endless=True)  # never ends
    assert httprange.head(s.get, "f", 8, 24) == httprange.Part(FILE[8:24], 100)
    assert s.asked == [{}] and s.pulled == 3  # 24 bytes: three chunks of 8
    short = Server(200, {}, FILE[:10])
    assert httprange.head(short.get, "f", 8, 24) == httprange.Part(FILE[8:10], None)
    with pytest.raises(RangeUnsupported, match="a plain GET answered 206"):
        httprange.head(ranged(0, 10).get, "f", 0, 10)
