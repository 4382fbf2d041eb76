"""RECORD: the CSV file of a wheel's or an installed distribution's
`.dist-info` listing every file with its hash and size (the wheel spec,
PEP 376 / PEP 627). One implementation of its rows, shared by the wheel
code and the environment code.

A row is `path,hash,size`: the hash is `<algorithm>=<urlsafe base64 of the
digest, no padding>`; RECORD's own row (and signatures') have empty hash
and size. Sizes stay strings so that a file is written back as it was read.
pip writes RECORD with the csv module's default line ending (CRLF); `eol`
finds it so an edited RECORD keeps its style.

Leaf module: no vpatch imports. Bad input raises RecordError (a ValueError)
with a message; callers turn it into the error of their domain (WheelError
for a wheel, TreeError for an installed environment).
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
from collections.abc import Iterable
from typing import NamedTuple

ALGORITHM = "sha256"


class RecordError(ValueError):
    """Not a RECORD, or a hash vpatch cannot check."""


class Row(NamedTuple):
    path: str
    hash: str  # "sha256=..." or ""
    size: str  # decimal bytes, or ""


def b64(digest: bytes) -> str:
    """A digest as RECORD spells it: urlsafe base64 without padding."""
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def unb64(text: str) -> bytes:
    """The digest a RECORD hash spells (b64's inverse); RecordError if none."""
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except ValueError:
        raise RecordError(f"not a base64 digest: {text[:40]!r}") from None


def hash_of(data: bytes) -> str:
    """`sha256=<b64>` of data."""
    return f"{ALGORITHM}=" + b64(hashlib.sha256(data).digest())


def row_of(path: str, data: bytes) -> Row:
    return Row(path, hash_of(data), str(len(data)))


def check(data: bytes, spec: str) -> bool:
    """Whether data has the hash `spec` (`algo=b64`, padding tolerated).
    RecordError for an empty spec or an algorithm hashlib does not know."""
    h, want = hasher(spec)
    h.update(data)
    return b64(h.digest()) == want


def hasher(spec: str) -> tuple[hashlib._Hash, str]:
    """(a new hash object of spec's algorithm, the wanted b64 digest), to
    check data streamed through it. RecordError as check()."""
    algo, sep, want = spec.partition("=")
    if not sep or not want:
        raise RecordError(f"no hash in {spec!r}")
    try:
        return hashlib.new(algo), want.rstrip("=")
    except ValueError:
        raise RecordError(f"unknown hash algorithm {algo!r}") from None


def parse(data: bytes) -> list[Row]:
    """The rows of a RECORD file (UTF-8 CSV, 3 fields a row; blank lines
    skipped). RecordError when it is not that."""
    try:
        text = data.decode("utf-8")
        rows = []
        for fields in csv.reader(io.StringIO(text, newline="")):
            if not fields:
                continue
            if len(fields) != 3:
                raise RecordError(f"RECORD line {fields!r} does not have 3 fields")
            rows.append(Row._make(fields))
    except UnicodeDecodeError as e:
        raise RecordError(f"RECORD is not UTF-8: {e}") from None
    except csv.Error as e:
        raise RecordError(f"RECORD is not valid CSV: {e}") from None
    return rows


def eol(data: bytes) -> str:
    """The line ending a RECORD uses: CRLF (pip, the csv module's default)
    or LF (wheel builders)."""
    return "\r\n" if b"\r\n" in data else "\n"


def dumps(rows: Iterable[Row | tuple[str, str, str]], eol: str = "\n") -> bytes:
    """RECORD bytes for rows, quoted as the csv module does (fields with a
    comma, quote or line break are quoted)."""
    buf = io.StringIO(newline="")
    csv.writer(buf, lineterminator=eol).writerows(rows)
    return buf.getvalue().encode("utf-8")
