"""RECORD: the CSV file of a wheel's or an installed distribution's
`.dist-info` listing every file with its hash and size (the wheel spec,
PEP 376 / PEP 627). One implementation of its rows, shared by the wheel
code and the environment code.

A row is `path,hash,size`: the hash is `<algorithm>=<urlsafe base64 of the
digest, no padding>`; RECORD's own row (and signatures') have empty hash
and size. Sizes stay strings so that a file is written back as it was read.
pip writes RECORD with the csv module's default line ending (CRLF); `eol`
finds it so an edited RECORD keeps its style.

Leaf module: no vpatch imports. Bad input raises ValueError with a message;
callers turn it into the error of their domain (WheelError, TreeError).
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
from collections.abc import Iterable
from typing import NamedTuple

ALGORITHM = "sha256"


class Row(NamedTuple):
    path: str
    hash: str  # "sha256=..." or ""
    size: str  # decimal bytes, or ""


def b64(digest: bytes) -> str:
    """A digest as RECORD spells it: urlsafe base64 without padding."""
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def hash_of(data: bytes) -> str:
    """`sha256=<b64>` of data."""
    return f"{ALGORITHM}=" + b64(hashlib.sha256(data).digest())


def row_of(path: str, data: bytes) -> Row:
    return Row(path, hash_of(data), str(len(data)))


def check(data: bytes, spec: str) -> bool:
    """Whether data has the hash `spec` (`algo=b64`, padding tolerated).
    ValueError for an empty spec or an algorithm hashlib does not know."""
    algo, sep, want = spec.partition("=")
    if not sep or not want:
        raise ValueError(f"no hash in {spec!r}")
    try:
        got = b64(hashlib.new(algo, data).digest())
    except ValueError:
        raise ValueError(f"unknown hash algorithm {algo!r}") from None
    return got == want.rstrip("=")


def parse(data: bytes) -> list[Row]:
    """The rows of a RECORD file (UTF-8 CSV, 3 fields a row; blank lines
    skipped). ValueError when it is not that."""
    try:
        text = data.decode("utf-8")
        rows = []
        for fields in csv.reader(io.StringIO(text, newline="")):
            if not fields:
                continue
            if len(fields) != 3:
                raise ValueError(f"RECORD line {fields!r} does not have 3 fields")
            rows.append(Row._make(fields))
    except UnicodeDecodeError as e:
        raise ValueError(f"RECORD is not UTF-8: {e}") from None
    except csv.Error as e:
        raise ValueError(f"RECORD is not valid CSV: {e}") from None
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
