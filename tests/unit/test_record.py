"""record.py: RECORD rows (path, sha256=<urlsafe b64, no padding>, size),
checked against hashes computed here with hashlib and base64 directly, and
against pip's own reading and writing of them."""

import base64
import csv
import hashlib
import io

import pytest
from support import rhash
from vpatch import record


@pytest.mark.parametrize("data", [b"", b"a", b"hello world\n" * 1000, bytes(range(256))])
def test_hash_of_is_what_the_wheel_spec_says(data):
    want = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).decode().rstrip("=")
    assert record.hash_of(data) == "sha256=" + want == rhash(data)
    assert "=" not in record.hash_of(data).removeprefix("sha256=")
    assert record.row_of("p/a.py", data) == record.Row("p/a.py", "sha256=" + want, str(len(data)))


def test_parse_and_dumps_round_trip_odd_paths():
    rows = [
        record.Row("vllm/a,b.py", record.hash_of(b"x"), "1"),
        record.Row('vllm/"q".py', record.hash_of(b""), "0"),
        record.Row("vllm-1.dist-info/RECORD", "", ""),
    ]
    data = record.dumps(rows)
    assert data.endswith(b"RECORD,,\n") and b"\r" not in data
    assert b'"vllm/a,b.py"' in data  # quoted by csv, as pip writes it
    assert record.parse(data) == rows


def test_parse_skips_blank_lines_and_refuses_other_shapes():
    assert record.parse(b"a,,\n\nb,sha256=x,1\n") == [("a", "", ""), ("b", "sha256=x", "1")]
    with pytest.raises(record.RecordError, match="RECORD line \\['a', 'b'\\] does not have 3"):
        record.parse(b"a,b\n")
    with pytest.raises(record.RecordError, match="RECORD is not UTF-8"):
        record.parse(b"\xff\xfe,,\n")


def test_check_takes_any_hashlib_algorithm_padded_or_not():
    data = b"payload"
    assert record.check(data, record.hash_of(data))
    assert not record.check(data + b"!", record.hash_of(data))
    padded = "sha384=" + base64.urlsafe_b64encode(hashlib.sha384(data).digest()).decode()
    assert record.check(data, padded)
    with pytest.raises(record.RecordError, match="unknown hash algorithm 'crc99'"):
        record.check(data, "crc99=abc")


def test_hasher_streams_to_the_same_answer():
    data = b"x" * 100_000
    h, want = record.hasher(record.hash_of(data))
    for i in range(0, len(data), 4096):
        h.update(data[i : i + 4096])
    assert record.b64(h.digest()) == want
    with pytest.raises(record.RecordError, match="unknown hash"):
        record.hasher("nope=abc")


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
    with pytest.raises(record.RecordError, match="unknown hash algorithm"):
        record.check(data, "nosuch=abc")
    with pytest.raises(record.RecordError, match="no hash"):
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
    with pytest.raises(record.RecordError, match="3 fields"):
        record.parse(b"a,b\n")
    with pytest.raises(record.RecordError, match="not UTF-8"):
        record.parse(b"\xff\xfe,x,1\n")
    assert record.parse(b"\n\na,sha256=x,1\n\n") == [("a", "sha256=x", "1")]


def test_unb64_is_b64s_inverse():
    digest = hashlib.sha256(b"x").digest()
    assert record.unb64(record.b64(digest)) == digest
    assert record.unb64(record.hash_of(b"x").removeprefix("sha256=")) == digest
    with pytest.raises(record.RecordError, match="not a base64 digest"):
        record.unb64("not base64!")
