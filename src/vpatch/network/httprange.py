"""One HTTP range read, with one rule for an answer, as pip's lazy_wheel
has it: the range asked for comes back 206 with that range (its
Content-Range, when the server names one, and exactly its bytes: fewer only
where the file ends, as Content-Range says), else RangeUnsupported. A 200
means the server ignores Range and the whole file is coming: its body is
not read, the answer is closed, and RangeUnsupported is raised too.

On RangeUnsupported each caller falls back to what is safe and bounded for
it: a pinned artifact is downloaded whole and checked against its sha256
(sources/lazy.py's callers: the lock gives its size and hash); a
safetensors header is read from the start of a plain GET, no further than
the header (head(): doctor/hub.py, which never reads tensor data).

The HTTP client is the caller's (urllib with pip's index settings, or
huggingface_hub's session with the hub's token): `get(headers)` opens one
GET with those headers and yields the Answer; statuses of 400 and more but
416 are the client's to raise, as its errors."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Protocol

from ..errors import RangeUnsupported


class Headers(Protocol):
    def get(self, name: str, /) -> str | None: ...


@dataclass
class Answer:
    status: int
    headers: Headers  # looked up without regard to case, as HTTP's are
    chunks: Iterable[bytes]  # the body, as it arrives


Get = Callable[[dict[str, str]], AbstractContextManager[Answer]]


@dataclass(frozen=True)
class Part:
    data: bytes
    size: int | None  # the whole file's, when the server says it


def read(get: Get, name: str, start: int, end: int) -> Part:
    """Bytes [start, end) of the file `get` asks for, by one range request
    (see the module docstring for the rule). A 416 (nothing at start: the
    file ends before it) is no bytes."""
    with get({"Range": f"bytes={start}-{end - 1}"}) as answer:
        said = answer.headers.get("Content-Range")
        size = total(said)
        if answer.status == 416:
            return Part(b"", size)
        if answer.status != 206:
            raise RangeUnsupported(
                f"{name}: the server ignores range requests (answered {answer.status})"
            )
        last = end - 1 if size is None else min(end, size) - 1
        if said is not None and not said.startswith(f"bytes {start}-{last}/"):
            raise RangeUnsupported(
                f"{name}: asked for bytes {start}-{end - 1}, the server sent {said!r}"
            )
        want = last + 1 - start
        data = take(answer.chunks, want + 1)  # one byte more shows an oversized answer
    if len(data) != want:
        got = "more" if len(data) > want else str(len(data))
        raise RangeUnsupported(f"{name}: asked the server for {want} bytes, got {got}")
    return Part(data, size)


def head(get: Get, name: str, start: int, end: int) -> Part:
    """Bytes [start, end) of the file `get` asks for (fewer where it ends),
    from a plain GET read no further than `end`: the bounded fallback where
    a server refuses ranges."""
    with get({}) as answer:
        if answer.status != 200:
            raise RangeUnsupported(f"{name}: a plain GET answered {answer.status}")
        length = answer.headers.get("Content-Length") or ""
        data = take(answer.chunks, end)
    return Part(data[start:end], int(length) if length.isdigit() else None)


def take(chunks: Iterable[bytes], most: int) -> bytes:
    """The first `most` bytes of a body (fewer where it ends); what comes
    after them is not read."""
    out = bytearray()
    it: Iterator[bytes] = iter(chunks)
    for chunk in it:
        out += chunk
        if len(out) >= most:
            break
    return bytes(out[:most])


def total(content_range: str | None) -> int | None:
    """T of `Content-Range: bytes a-b/T` (or `bytes */T`)."""
    m = re.match(r"^bytes [^/]*/(\d+)$", (content_range or "").strip())
    return int(m.group(1)) if m else None
