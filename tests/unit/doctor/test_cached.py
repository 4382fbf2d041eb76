"""What doctor reads of a hub id from the local cache: whole files, and the
safetensors headers it read by range requests and kept (`--offline` after
an online run advised downloading the whole weights). Online, end to end:
tests/unit/doctor/test_hub.py and tests/unit/commands/test_doctor_hub.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import pairs as F
from vpatch.doctor import cached, weights
from vpatch.errors import ConfigError

REPO = "acme/kimi-eagle3"
COMMIT = "c" * 40


def cache_with(tmp_path: Path, files: dict[str, str]) -> tuple[Path, Path]:
    """A cache holding `repo` at COMMIT (main): these files whole."""
    cache = tmp_path / "hub"
    base = cache / "models--acme--kimi-eagle3"
    snap = base / "snapshots" / COMMIT
    snap.mkdir(parents=True)
    for name, text in files.items():
        (snap / name).write_text(text)
    (base / "refs").mkdir()
    (base / "refs" / "main").write_text(COMMIT)
    return cache, snap


def header_of(tensors: dict, tmp_path: Path) -> bytes:
    """The 8 + N bytes of a header declaring `tensors`."""
    F.write_header_only(tmp_path / "h.safetensors", tensors)
    return (tmp_path / "h.safetensors").read_bytes()


def test_a_header_is_kept_beside_the_snapshots(tmp_path):
    cache, snap = cache_with(tmp_path, {"config.json": "{}"})
    path = cached.kept_path(cache, REPO, COMMIT, "model.safetensors")
    assert snap not in path.parents and path.parents[1].name == ".vpatch-headers"
    assert cached.kept(cache, REPO, COMMIT, "model.safetensors") is None
    raw = header_of({"fc.weight": ("BF16", [4, 12])}, tmp_path)
    cached.keep(path, raw)
    assert path.read_bytes() == raw and [p.name for p in path.parent.iterdir()] == [path.name]
    got = cached.kept(cache, REPO, COMMIT, "model.safetensors")
    assert got["fc.weight"].shape == (4, 12) and got["fc.weight"].file == "model.safetensors"


def test_offline_reads_the_kept_headers(tmp_path):
    cfg = json.dumps({"model_type": "llama"})
    cache, snap = cache_with(tmp_path, {"config.json": cfg})
    raw = header_of(F.llama_tensors(F.KIMI_VOCAB), tmp_path)
    cached.keep(cached.kept_path(cache, REPO, COMMIT, "model.safetensors"), raw)
    got, read, tensors = cached.read(REPO, None, True, cache)
    assert got == snap and "fc.weight" in tensors.tensors
    assert read == ["config.json", "model.safetensors header (kept from an online run)"]


def test_offline_reads_the_shards_of_an_index_kept_or_whole(tmp_path):
    index = {"weight_map": {"fc.weight": "m-1.safetensors", "d2t": "m-2.safetensors"}}
    cache, snap = cache_with(tmp_path, {"config.json": "{}", weights.INDEX: json.dumps(index)})
    F.write_header_only(snap / "m-1.safetensors", {"fc.weight": ("BF16", [4, 12])})
    with pytest.raises(ConfigError) as e:
        cached.read(REPO, None, True, cache)
    assert "the safetensors headers of m-2.safetensors not in the local" in str(e.value)
    assert "run doctor online once (it reads the headers, a few KB, and keeps them" in str(e.value)
    assert f"`hf download {REPO} m-2.safetensors`" in str(e.value)
    raw = header_of({"d2t": ("I64", [32000])}, tmp_path)
    cached.keep(cached.kept_path(cache, REPO, COMMIT, "m-2.safetensors"), raw)
    _, read, tensors = cached.read(REPO, None, True, cache)
    assert set(tensors.tensors) == {"fc.weight", "d2t"}
    assert read[1:] == [weights.INDEX, "m-1.safetensors header", "m-2.safetensors header (kept "
                        "from an online run)"]  # fmt: skip
