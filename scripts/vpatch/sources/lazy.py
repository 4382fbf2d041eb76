"""A remote file read through HTTP range requests, as pip's lazy wheel does:
`zipfile` reads the central directory and the few members it is asked for,
and only those bytes cross the network (a few MB of a 509 MB wheel).

Reads are served from blocks fetched on demand; `prefetch` fetches a list of
ranges up front, merging neighbours, so reading many members costs a handful
of requests instead of one per member.
"""

from __future__ import annotations

import io
import urllib.error
import urllib.request

from ..errors import NetworkError

BLOCK = 1 << 16
MERGE_GAP = 1 << 20  # fetch a gap this small rather than make another request


class RangeFile(io.RawIOBase):
    def __init__(self, url: str, size: int):
        self.url = url
        self.size = size
        self.pos = 0
        self.fetched = 0  # bytes that crossed the network
        self._spans: list[tuple[int, bytes]] = []  # (start, data), fetched so far

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

    def _fetch(self, start: int, end: int) -> bytes:
        req = urllib.request.Request(self.url, headers={"Range": f"bytes={start}-{end - 1}"})
        try:
            with urllib.request.urlopen(req, timeout=120) as resp:
                if resp.status != 206:
                    raise NetworkError(f"{self.url}: the server ignores range requests")
                data: bytes = resp.read()
        except (urllib.error.URLError, OSError) as e:
            raise NetworkError(f"range request to {self.url} failed: {e}") from None
        if len(data) != end - start:
            raise NetworkError(f"{self.url}: asked for {end - start} bytes, got {len(data)}")
        self.fetched += len(data)
        return data
