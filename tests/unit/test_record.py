"""record.py: RECORD rows (path, sha256=<urlsafe b64, no padding>, size),
checked against hashes computed here with hashlib and base64 directly."""

import base64
import hashlib

import pytest
from support import rhash
from vpatch import record
from vpatch.errors import RecordMismatch


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
    with pytest.raises(RecordMismatch, match="w.whl: RECORD line \\['a', 'b'\\] does not have 3"):
        record.parse(b"a,b\n", "w.whl")
    with pytest.raises(RecordMismatch, match="RECORD is not valid CSV"):
        record.parse(b"\xff\xfe,,\n")


def test_matches_takes_any_hashlib_algorithm_padded_or_not():
    data = b"payload"
    assert record.matches(data, record.hash_of(data))
    assert not record.matches(data + b"!", record.hash_of(data))
    padded = "sha384=" + base64.urlsafe_b64encode(hashlib.sha384(data).digest()).decode()
    assert record.matches(data, padded)
    with pytest.raises(RecordMismatch, match="unknown hash 'crc99'"):
        record.matches(data, "crc99=abc")


def test_hasher_streams_to_the_same_answer():
    data = b"x" * 100_000
    h, want = record.hasher(record.hash_of(data))
    for i in range(0, len(data), 4096):
        h.update(data[i : i + 4096])
    assert record.b64(h.digest()) == want
    with pytest.raises(RecordMismatch, match="unknown hash"):
        record.hasher("nope=abc")
