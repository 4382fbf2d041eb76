"""Tensor names, shapes and dtypes of a checkpoint folder, from the
safetensors headers alone: never a byte of tensor data.

A safetensors file is an 8-byte little-endian header length N, N bytes of
JSON ({name: {"dtype", "shape", "data_offsets"}, "__metadata__": {...}}), then
the data. We read exactly 8 + N bytes, with N bounded by the same 100 MB cap
the safetensors library enforces, so a corrupt or hostile file cannot make us
read more. A sharded checkpoint lists its files in
model.safetensors.index.json; only the headers of those files are read.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from pathlib import Path

from ..errors import ConfigError

# safetensors' own limit (MAX_HEADER_SIZE in the Rust crate).
MAX_HEADER = 100_000_000
INDEX = "model.safetensors.index.json"
PICKLED = ("pytorch_model*.bin", "model*.bin", "*.pt", "*.pth")


@dataclass(frozen=True)
class Tensor:
    name: str
    dtype: str
    shape: tuple[int, ...]
    file: str


def header(path: Path) -> dict[str, Tensor]:
    """The tensors one safetensors file declares (its header only)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(8)
            if len(head) < 8:
                raise ConfigError(f"{path}: not a safetensors file (shorter than 8 bytes)")
            (n,) = struct.unpack("<Q", head)
            size = path.stat().st_size
            if n < 2 or n > MAX_HEADER or 8 + n > size:
                raise ConfigError(
                    f"{path}: not a safetensors file (header length {n}, file {size} bytes)"
                )
            raw = fh.read(n)
    except OSError as e:
        raise ConfigError(f"{path}: cannot read: {e.strerror or e}") from None
    try:
        meta = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ConfigError(f"{path}: safetensors header is not JSON ({e})") from None
    if not isinstance(meta, dict):
        raise ConfigError(f"{path}: safetensors header is not a JSON object")
    out = {}
    for name, info in meta.items():
        if name == "__metadata__":
            continue
        try:
            shape = tuple(int(d) for d in info["shape"])
            dtype = str(info["dtype"])
        except (KeyError, TypeError, ValueError):
            raise ConfigError(f"{path}: tensor {name!r} has no valid dtype/shape") from None
        out[name] = Tensor(name, dtype, shape, path.name)
    return out


@dataclass(frozen=True)
class Weights:
    """What a folder's checkpoint holds. `files` are the safetensors files
    read; `other` names weight files we cannot inspect without loading them
    (pickled .bin/.pt)."""

    tensors: dict[str, Tensor]
    files: tuple[str, ...]
    other: tuple[str, ...]

    def get(self, name: str) -> Tensor | None:
        return self.tensors.get(name)


def read(folder: Path) -> Weights:
    """The tensors of the checkpoint in `folder`: the index's shards, else
    every *.safetensors file at the top of the folder."""
    index = folder / INDEX
    if index.is_file():
        try:
            weight_map = json.loads(index.read_text())["weight_map"]
            files = sorted(set(weight_map.values()))
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            raise ConfigError(f"{index}: not a safetensors index (no weight_map)") from None
        missing = [f for f in files if not (folder / f).is_file()]
        if missing:
            raise ConfigError(f"{index}: lists {missing[0]}, which is not in {folder}")
    else:
        files = sorted(p.name for p in folder.glob("*.safetensors"))
    tensors: dict[str, Tensor] = {}
    for f in files:
        tensors.update(header(folder / f))
    # pickled checkpoints (training_args.bin and the like are not weights)
    other = tuple(sorted({p.name for pat in PICKLED for p in folder.glob(pat)}))
    return Weights(tensors, tuple(files), other)
