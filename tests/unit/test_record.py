"""record: RECORD rows against pip's own reading and writing of them."""

from __future__ import annotations

import base64
import csv
import hashlib
import io

import pytest
from vpatch import record


def test_hash_is_urlsafe_b64_sha256_without_padding():
    data = b"\xfb\xff" * 100  # digest bytes that need '-' and '_' in urlsafe b64
    want = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).decode()
    assert want.endswith("=")
    got = record.hash_of(data)
    assert got == "sha256=" + want.rstrip("=")
    assert record.row_of("a/b.py", data) == ("a/b.py", got, "200")


def test_check_accepts_padding_other_algorithms_and_refuses_changes():
    data = b"hello"
    spec = record.hash_of(data)
    assert record.check(data, spec)
    assert record.check(data, spec + "=")  # padded, as some installers write it
    assert not record.check(b"hellO", spec)
    sha1 = "sha1=" + base64.urlsafe_b64encode(hashlib.sha1(data).digest()).decode().rstrip("=")
    assert record.check(data, sha1)
    with pytest.raises(ValueError, match="unknown hash algorithm"):
        record.check(data, "nosuch=abc")
    with pytest.raises(ValueError, match="no hash"):
        record.check(data, "")


def test_round_trip_keeps_quoting_and_pip_line_endings():
    rows = [
        record.Row("pkg/a,b.py", "sha256=x", "1"),  # a comma: quoted
        record.Row('pkg/q"uote.py', "sha256=y", "2"),
        record.Row("pkg/__pycache__/a.cpython-311.pyc", "", ""),
        record.Row("pkg-1.0.dist-info/RECORD", "", ""),
    ]
    # what pip writes: csv.writer with the default dialect (CRLF)
    buf = io.StringIO(newline="")
    csv.writer(buf).writerows(rows)
    pip_bytes = buf.getvalue().encode()
    assert b'"pkg/a,b.py"' in pip_bytes and b"\r\n" in pip_bytes
    assert record.parse(pip_bytes) == rows
    assert record.eol(pip_bytes) == "\r\n"
    assert record.dumps(record.parse(pip_bytes), record.eol(pip_bytes)) == pip_bytes
    lf = record.dumps(rows)
    assert record.eol(lf) == "\n" and b"\r" not in lf
    assert record.parse(lf) == rows


def test_bad_records_raise_value_error():
    with pytest.raises(ValueError, match="3 fields"):
        record.parse(b"a,b\n")
    with pytest.raises(ValueError, match="not UTF-8"):
        record.parse(b"\xff\xfe,x,1\n")
    assert record.parse(b"\n\na,sha256=x,1\n\n") == [("a", "sha256=x", "1")]
