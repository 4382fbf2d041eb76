"""RECORD, the list of a wheel's or an installed distribution's files
(PEP 376 / the wheel spec): CSV rows of path, `sha256=<urlsafe base64
without padding>`, size. One implementation for the overlay wheel, the
wheel reader, verify-wheel and `vpatch install`."""

from __future__ import annotations

import base64
import csv
import hashlib
import io
from typing import NamedTuple

from .errors import RecordMismatch


class Row(NamedTuple):
    path: str
    hash: str  # "sha256=..." or "" (RECORD itself, signatures, .pyc some installers skip)
    size: str  # decimal, or ""


def b64(digest: bytes) -> str:
    """A digest as RECORD spells it: urlsafe base64 without padding."""
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def hash_of(data: bytes) -> str:
    return "sha256=" + b64(hashlib.sha256(data).digest())


def row_of(path: str, data: bytes) -> Row:
    return Row(path, hash_of(data), str(len(data)))


def parse(data: bytes, where: str = "RECORD") -> list[Row]:
    """The rows of a RECORD; RecordMismatch when it is not one."""
    try:
        text = data.decode("utf-8")
        rows = []
        for fields in csv.reader(io.StringIO(text)):
            if not fields:
                continue
            if len(fields) != 3:
                raise RecordMismatch(f"{where}: RECORD line {fields!r} does not have 3 fields")
            rows.append(Row._make(fields))
    except (UnicodeDecodeError, csv.Error) as e:
        raise RecordMismatch(f"{where}: RECORD is not valid CSV: {e}") from None
    return rows


def dumps(rows: list[Row]) -> bytes:
    """RECORD bytes: CSV with the quoting the csv module gives paths with
    commas or quotes, '\\n' line ends (as pip and wheel write it)."""
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(rows)
    return buf.getvalue().encode("utf-8")


def matches(data: bytes, spec: str) -> bool:
    """Whether data has the hash `spec` ("algo=b64") gives; RecordMismatch
    for an algorithm hashlib does not know."""
    algo, _, want = spec.partition("=")
    try:
        got = b64(hashlib.new(algo, data).digest())
    except ValueError:
        raise RecordMismatch(f"RECORD uses an unknown hash {algo!r}") from None
    return got == want.rstrip("=")


def hasher(spec: str) -> tuple[hashlib._Hash, str]:
    """(a new hash object, the wanted b64 digest) for streaming a check."""
    algo, _, want = spec.partition("=")
    try:
        return hashlib.new(algo), want.rstrip("=")
    except ValueError:
        raise RecordMismatch(f"RECORD uses an unknown hash {algo!r}") from None
