"""JSON vpatch did not write: at worst a one-line ConfigError, whatever the
text or the file."""

from __future__ import annotations

import os

import pytest
from vpatch import jsontext
from vpatch.errors import ConfigError


def test_json_is_read():
    assert jsontext.loads('{"a": [1, 2]}', "x") == {"a": [1, 2]}
    assert jsontext.loads(b'{"a": 1}', "x") == {"a": 1}


@pytest.mark.parametrize(
    "text,why",
    [
        ("[" * 100_000 + "]" * 100_000, "nested too deep to read"),
        ("{oops", "Expecting property name"),
        (b"\xc3\x28", "utf-8"),
        ("", "Expecting value"),
    ],
)
def test_what_is_not_json(text, why):
    with pytest.raises(ConfigError) as e:
        jsontext.loads(text, "the file")
    assert str(e.value).startswith("the file: not valid JSON (") and why in str(e.value)
    assert "\n" not in str(e.value)


def test_a_file(tmp_path):
    (tmp_path / "f.json").write_text('{"a": 1}')
    assert jsontext.read(tmp_path / "f.json") == {"a": 1}
    with pytest.raises(ConfigError, match=r"g.json: missing$"):
        jsontext.read(tmp_path / "g.json")


@pytest.mark.parametrize("kind", ["device", "folder", "fifo"])
def test_what_is_not_a_file_is_not_read(tmp_path, kind):
    """/dev/zero ran out of memory; a FIFO would wait for a writer for ever."""
    path = {"device": "/dev/zero", "folder": str(tmp_path)}.get(kind, str(tmp_path / "p"))
    if kind == "fifo":
        os.mkfifo(path)
    with pytest.raises(ConfigError, match=f"^{path}: not a file$"):
        jsontext.read(path)  # type: ignore[arg-type]


def test_a_file_over_the_limit(tmp_path):
    (tmp_path / "f.json").write_text("[" + "1," * 100 + "1]")
    assert len(jsontext.read(tmp_path / "f.json", limit=1000)) == 101
    with pytest.raises(ConfigError, match="larger than 0 MiB"):
        jsontext.read(tmp_path / "f.json", limit=100)
