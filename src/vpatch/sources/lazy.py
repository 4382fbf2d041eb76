"""A remote file read through HTTP range requests, as pip's lazy wheel does:
`zipfile` reads the central directory and the few members it is asked for,
and only those bytes cross the network (a few MB of a 509 MB wheel).

Reads are served from blocks fetched on demand; `prefetch` fetches a list of
ranges up front, merging neighbours, so reading many members costs a handful
of requests instead of one per member.

The HTTP client is handed to it (pip hands its session to lazy_wheel):
the package index's (index.opener(), with its credentials) unless the
caller gives another.

Mirrors and proxies do not all honour ranges. As pip's lazy wheel does,
the file is first asked for with HEAD, which must say `Accept-Ranges: bytes`
(and the size the index gave): the package index used here sends that
header on a HEAD or a 200, not on a 206. Then every answer is held to
network/httprange.py's one rule (a 206 with the range asked for; a 200's
body is not read), and to the size the index gave. Anything else raises
RangeUnsupported, on which callers fall back to a whole download, checked
against the lock's sha256.
"""

from __future__ import annotations

import contextlib
import http.client
import io
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator

from ..errors import NetworkError, RangeUnsupported
from ..network import httprange
from ..network.session import HTTP_ERRORS
from .index import opener as index_opener

BLOCK = 1 << 16
MERGE_GAP = 1 << 20  # fetch a gap this small rather than make another request


class RangeFile(io.RawIOBase):
    def __init__(self, url: str, size: int, opener: urllib.request.OpenerDirector | None = None):
        self.url = url
        self.opener = opener or index_opener()
        # the file's name as messages say it: no query (a signed URL's signature)
        self.name = urllib.parse.urlsplit(url).path.rsplit("/", 1)[-1]
        if size <= 0:
            raise RangeUnsupported(f"{self.name}: the index gives no size to read ranges of")
        self.size = size
        self.pos = 0
        self.fetched = 0  # bytes that crossed the network
        self._spans: list[tuple[int, bytes]] = []  # (start, data), fetched so far
        self._probed = False  # HEAD said Accept-Ranges: bytes

    # -- io.RawIOBase ---------------------------------------------------------

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self.pos, io.SEEK_END: self.size}[whence]
        self.pos = max(0, base + offset)
        return self.pos

    def read(self, n: int = -1) -> bytes:
        end = self.size if n is None or n < 0 else min(self.size, self.pos + n)
        if end <= self.pos:
            return b""
        data = self._get(self.pos, end)
        self.pos = end
        return data

    def readinto(self, b: bytearray | memoryview) -> int:  # type: ignore[override]
        data = self.read(len(b))
        b[: len(data)] = data
        return len(data)

    # -- fetching -------------------------------------------------------------

    def prefetch(self, ranges: list[tuple[int, int]]) -> None:
        """Fetch [start, end) ranges now, merging those close together."""
        merged: list[list[int]] = []
        for start, end in sorted(ranges):
            start, end = max(0, start), min(self.size, end)
            if merged and start - merged[-1][1] <= MERGE_GAP:
                merged[-1][1] = max(merged[-1][1], end)
            else:
                merged.append([start, end])
        for start, end in merged:
            if not self._have(start, end):
                self._spans.append((start, self._fetch(start, end)))

    def _have(self, start: int, end: int) -> bytes | None:
        for s, data in self._spans:
            if s <= start and end <= s + len(data):
                return data[start - s : end - s]
        return None

    def _get(self, start: int, end: int) -> bytes:
        hit = self._have(start, end)
        if hit is not None:
            return hit
        lo = start - start % BLOCK
        hi = min(self.size, max(end, lo + BLOCK))
        data = self._fetch(lo, hi)
        self._spans.append((lo, data))
        return data[start - lo : end - lo]

    def _probe(self) -> None:
        """HEAD: the server must say it honours byte ranges, and the size."""
        req = urllib.request.Request(self.url, method="HEAD")
        try:
            with self.opener.open(req, timeout=120) as resp:
                accept = resp.headers.get("Accept-Ranges", "").strip().lower()
                length = resp.headers.get("Content-Length")
        except urllib.error.HTTPError as e:  # HEAD not allowed: ranges cannot be trusted
            e.close()
            raise RangeUnsupported(f"{self.name}: the server refused HEAD ({e.code})") from None
        except HTTP_ERRORS as e:
            reason = getattr(e, "reason", None) or e
            raise NetworkError(f"HEAD request for {self.name} failed: {reason}") from None
        if accept != "bytes":
            raise RangeUnsupported(
                f"{self.name}: the server ignores range requests (no Accept-Ranges: bytes)"
            )
        if length is not None and length.isdigit() and int(length) != self.size:
            raise RangeUnsupported(
                f"{self.name}: the server has {length} bytes, the index said {self.size}"
            )
        self._probed = True

    @contextlib.contextmanager
    def _open(self, headers: dict[str, str]) -> Iterator[httprange.Answer]:
        """One GET through the opener handed, as httprange reads it; an HTTP
        error but 416 is a NetworkError."""
        req = urllib.request.Request(self.url, headers=headers)
        try:
            resp = self.opener.open(req, timeout=120)
        except urllib.error.HTTPError as e:
            if e.code != 416:
                e.close()
                raise NetworkError(f"range request for {self.name}: {e.code} {e.reason}") from None
            resp = e  # an answer too: its status and Content-Range
        with resp:
            yield httprange.Answer(resp.status, resp.headers, iter(lambda: resp.read(BLOCK), b""))

    def _fetch(self, start: int, end: int) -> bytes:
        if not self._probed:
            self._probe()
        try:
            part = httprange.read(self._open, self.name, start, end)
        except http.client.IncompleteRead as e:
            raise RangeUnsupported(
                f"{self.name}: asked the server for {end - start} bytes, got {len(e.partial)}"
            ) from None
        except HTTP_ERRORS as e:
            reason = getattr(e, "reason", None) or e
            raise NetworkError(f"range request for {self.name} failed: {reason}") from None
        if part.size is not None and part.size != self.size:
            raise RangeUnsupported(
                f"{self.name}: the server has {part.size} bytes, the index said {self.size}"
            )
        self.fetched += len(part.data)
        return part.data
