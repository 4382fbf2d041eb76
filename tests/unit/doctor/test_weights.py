"""Safetensors headers only: names, dtypes and shapes, bounded reads, the
index of a sharded checkpoint, pickled files left alone."""

from __future__ import annotations

import json
import struct

import pytest
from support import pairs as F
from vpatch.doctor import weights
from vpatch.errors import ConfigError


def test_header_of_a_file_without_data(tmp_path):
    f = tmp_path / "model.safetensors"
    F.write_header_only(f, {"fc.weight": ("BF16", [4, 12]), "d2t": ("I64", [7])})
    got = weights.header(f)
    assert got["fc.weight"] == weights.Tensor("fc.weight", "BF16", (4, 12), "model.safetensors")
    assert got["d2t"].shape == (7,) and "__metadata__" not in got


def test_sharded_checkpoint_reads_the_index(tmp_path):
    F.write_header_only(
        tmp_path / "model-00001-of-00002.safetensors", {"fc.weight": ("BF16", [2, 6])}
    )
    F.write_header_only(tmp_path / "model-00002-of-00002.safetensors", {"d2t": ("I64", [3])})
    F.write_header_only(tmp_path / "stray.safetensors", {"junk": ("F32", [1])})
    (tmp_path / weights.INDEX).write_text(
        json.dumps(
            {
                "weight_map": {
                    "fc.weight": "model-00001-of-00002.safetensors",
                    "d2t": "model-00002-of-00002.safetensors",
                }
            }
        )
    )
    w = weights.read(tmp_path)
    assert set(w.tensors) == {"fc.weight", "d2t"} and len(w.files) == 2
    assert w.get("d2t").file == "model-00002-of-00002.safetensors"


def test_index_naming_a_missing_shard(tmp_path):
    (tmp_path / weights.INDEX).write_text(json.dumps({"weight_map": {"x": "gone.safetensors"}}))
    with pytest.raises(ConfigError, match="gone.safetensors"):
        weights.read(tmp_path)
    (tmp_path / weights.INDEX).write_text("[]")
    with pytest.raises(ConfigError, match="not a safetensors index"):
        weights.read(tmp_path)


@pytest.mark.parametrize(
    "name", ["../../../etc/passwd", "/etc/passwd", "a/../b", "./x", "a//b", "a\\b", "", 7]
)
def test_an_index_naming_no_file_of_the_checkpoint(tmp_path, name):
    """vLLM's loader joins each name to the folder: `../../../etc/passwd`
    leaves it (and was a ValueError from huggingface_hub: exit 70)."""
    (tmp_path / "idx").write_text(json.dumps({"weight_map": {"fc.weight": name}}))
    with pytest.raises(ConfigError, match="not a file of the checkpoint"):
        weights.shards(tmp_path / "idx")


def test_an_index_naming_files_in_a_subfolder(tmp_path):
    index = {"weight_map": {"a": "sub/m-1.safetensors", "b": "m-2.safetensors", "c": [1]}}
    (tmp_path / "idx").write_text(json.dumps(index))
    with pytest.raises(ConfigError, match=r"weight_map names '\[1\]'"):
        weights.shards(tmp_path / "idx")
    del index["weight_map"]["c"]
    (tmp_path / "idx").write_text(json.dumps(index))
    assert weights.shards(tmp_path / "idx") == ["m-2.safetensors", "sub/m-1.safetensors"]


def test_a_drafter_has_a_few_files(tmp_path):
    """An index of 100,000 shards cost 73 s of CPU and 11 minutes of
    requests on the hub: doctor reads MAX_FILES headers at most."""
    many = [f"m-{i}.safetensors" for i in range(weights.MAX_FILES + 1)]
    (tmp_path / "idx").write_text(json.dumps({"weight_map": dict(zip(many, many, strict=True))}))
    with pytest.raises(ConfigError, match="65 safetensors files; an EAGLE-3 drafter has one"):
        weights.shards(tmp_path / "idx")
    with pytest.raises(ConfigError, match="65 safetensors files"):
        weights.singles(many, "folder")
    assert weights.singles(many[:-1], "folder") == sorted(many[:-1])


@pytest.mark.parametrize(
    "raw,phrase",
    [
        (b"abc", "shorter than 8"),
        (struct.pack("<Q", 10**12) + b"{}", "header length"),  # never allocates or reads 1 TB
        (struct.pack("<Q", 64) + b"{}", "header length"),  # says more than the file has
        (struct.pack("<Q", 4) + b"{no}", "header: not valid JSON"),
        (struct.pack("<Q", 2) + b"[]", "not a JSON object"),
        (struct.pack("<Q", 19) + b'{"a": {"dtype": 1}}', "tensor 'a' has no dtype"),
    ],
)
def test_bad_headers(tmp_path, raw, phrase):
    f = tmp_path / "bad.safetensors"
    f.write_bytes(raw)
    with pytest.raises(ConfigError, match=phrase):
        weights.header(f)


def tensor(dtype="BF16", shape=(2, 3), offsets=(0, 12)) -> dict:
    shape = list(shape) if isinstance(shape, tuple) else shape
    return {"dtype": dtype, "shape": shape, "data_offsets": list(offsets)}


@pytest.mark.parametrize(
    "meta,phrase",
    [
        ({"fc.weight": tensor(shape=(-7168, -21504), offsets=(0, 2 * 7168 * 21504))}, "shape"),
        ({"fc.weight": tensor(shape=("2", 3))}, "shape"),
        ({"fc.weight": tensor(shape=(True, 3))}, "shape"),
        ({"fc.weight": tensor(shape=2)}, "shape"),
        ({"fc.weight": tensor(offsets=(-12, 0))}, "is not \\[begin, end\\]"),
        ({"fc.weight": tensor(offsets=(12, 0))}, "end before they begin"),
        ({"fc.weight": tensor(offsets=(0, 13))}, "span 13 bytes; BF16 \\[2, 3\\] takes 12"),
        ({"a": tensor(), "b": tensor(offsets=(16, 28))}, "'b' begins at byte 16 .* ends at 12"),
        ({"a": tensor(), "b": tensor(offsets=(6, 18))}, "'b' begins at byte 6"),
        ({"a": tensor(offsets=(4, 16))}, "'a' begins at byte 4 .* ends at 0"),
        ({"a": tensor(dtype="")}, "'a' has no dtype"),
        ({"a": [1, 2]}, "'a' is not a JSON object"),
        ({"__metadata__": {"format": 1}}, "__metadata__ is not a map of strings"),
        # safetensors reads dims and offsets as u64: dims of 4000 digits were
        # exit 70 (str() of their product), and 2**64 is no offset
        ({"a": tensor(shape=(10**4000, 10**4000))}, "shape \\[1000.*characters\\) is not"),
        ({"a": tensor(shape=(2**64, 1))}, "shape \\[18446744073709551616, 1\\] is not"),
        ({"a": tensor(offsets=(0, 2**64))}, "is not \\[begin, end\\]"),
        ({"a": tensor(dtype="F64", shape=(2**63, 2**63), offsets=(0, 0))}, "more than 2\\*\\*64"),
    ],
)
def test_a_header_safetensors_would_refuse(meta, phrase):
    """Negative dims made a finding "takes -3 states", negative offsets and
    string dims passed as tensors: what the safetensors library refuses at
    load is bad input (exit 2), one line."""
    with pytest.raises(ConfigError, match=phrase) as e:
        weights.parse(json.dumps(meta).encode(), "d/model.safetensors", "model.safetensors")
    assert str(e.value).startswith("d/model.safetensors: safetensors header")


def test_a_header_safetensors_takes():
    meta = {
        "__metadata__": {"format": "pt"},
        "b": tensor(offsets=(12, 24)),
        "a": tensor(),
        "empty": tensor(shape=(0, 4), offsets=(24, 24)),
        "scalar": tensor(dtype="F32", shape=(), offsets=(24, 28)),
        "fp4": tensor(dtype="F4", shape=(3,), offsets=(28, 30)),  # no size check: sub-byte
    }
    got = weights.parse(json.dumps(meta).encode(), "d", "model.safetensors")
    assert got["scalar"].shape == () and got["empty"].shape == (0, 4) and len(got) == 5


def test_pickled_weights_are_named_not_read(tmp_path):
    (tmp_path / "pytorch_model.bin").write_bytes(b"\x80")
    (tmp_path / "training_args.bin").write_bytes(b"\x80")
    w = weights.read(tmp_path)
    assert w.tensors == {} and w.files == () and w.other == ("pytorch_model.bin",)
