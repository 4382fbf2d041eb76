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

import fnmatch
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from .. import jsontext
from ..errors import ConfigError

# safetensors' own limit (MAX_HEADER_SIZE in the Rust crate).
MAX_HEADER = 100_000_000
MAX_FILES = 64  # safetensors files whose headers doctor reads (a drafter has 1-4)
INDEX = "model.safetensors.index.json"
PICKLED = ("pytorch_model*.bin", "model*.bin", "*.pt", "*.pth")


@dataclass(frozen=True)
class Tensor:
    name: str
    dtype: str
    shape: tuple[int, ...]
    file: str


def length(head: bytes, size: int | None, where: str) -> int:
    """The header length N a safetensors file's first 8 bytes declare,
    checked against the format's cap and the file's size (when known)."""
    if len(head) < 8:
        raise ConfigError(f"{where}: not a safetensors file (shorter than 8 bytes)")
    n: int = struct.unpack("<Q", head[:8])[0]
    if n < 2 or n > MAX_HEADER or (size is not None and 8 + n > size):
        shown = "unknown" if size is None else str(size)
        raise ConfigError(
            f"{where}: not a safetensors file (header length {n}, file {shown} bytes)"
        )
    return n


def parse(raw: bytes, where: str, file: str) -> dict[str, Tensor]:
    """The tensors a header's N bytes of JSON declare (`file`: the name
    each Tensor records)."""
    meta = jsontext.loads(raw, f"{where}: safetensors header")
    if not isinstance(meta, dict):
        raise ConfigError(f"{where}: safetensors header is not a JSON object")
    out = {}
    for name, info in meta.items():
        if name == "__metadata__":
            continue
        try:
            shape = tuple(int(d) for d in info["shape"])
            dtype = str(info["dtype"])
        except (KeyError, TypeError, ValueError):
            raise ConfigError(f"{where}: tensor {name!r} has no valid dtype/shape") from None
        out[name] = Tensor(name, dtype, shape, file)
    return out


def header(path: Path) -> dict[str, Tensor]:
    """The tensors one safetensors file declares (its header only)."""
    try:
        with open(path, "rb") as fh:
            n = length(fh.read(8), path.stat().st_size, str(path))
            raw = fh.read(n)
    except OSError as e:
        raise ConfigError(f"{path}: cannot read: {e.strerror or e}") from None
    return parse(raw, str(path), path.name)


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


def shards(path: Path, where: str | None = None) -> list[str]:
    """The files the sharded checkpoint's index at `path` lists: files of
    the checkpoint (vLLM's loader joins each to its folder; one that leaves
    it, `../../../etc/passwd`, is refused), MAX_FILES at most."""
    where = where or str(path)
    index = jsontext.read(path, where)
    weight_map = index.get("weight_map") if isinstance(index, dict) else None
    if not isinstance(weight_map, dict):
        raise ConfigError(f"{where}: not a safetensors index (no weight_map)")
    names = set()
    for name in weight_map.values():
        parts = name.split("/") if isinstance(name, str) else [""]
        if any(p in ("", ".", "..") or "\\" in p or "\0" in p for p in parts):
            raise ConfigError(
                f"{where}: weight_map names {str(name)[:100]!r}, not a file of the checkpoint"
            )
        names.add(name)
    return few(sorted(names), where)


def singles(names: Iterable[str], where: str) -> list[str]:
    """Without an index: every *.safetensors file at the top of the
    checkpoint (what vLLM's loader takes), MAX_FILES at most."""
    return few(sorted(n for n in names if "/" not in n and n.endswith(".safetensors")), where)


def few(files: list[str], where: str) -> list[str]:
    """`files`, when they are few enough to read a header of each: a drafter
    has one or a few (an index of 100,000 shards cost 11 minutes of requests
    on the hub)."""
    if len(files) > MAX_FILES:
        raise ConfigError(
            f"{where}: {len(files)} safetensors files; an EAGLE-3 drafter has one or a few, and "
            f"doctor reads the headers of {MAX_FILES} at most"
        )
    return files


def pickled(names: Iterable[str]) -> tuple[str, ...]:
    """The pickled checkpoint files among `names` (top level; training_args.bin
    and the like are not weights)."""
    top = [n for n in names if "/" not in n]
    return tuple(sorted({n for n in top for pat in PICKLED if fnmatch.fnmatch(n, pat)}))


def read(folder: Path) -> Weights:
    """The tensors of the checkpoint in `folder`: the index's shards, else
    every *.safetensors file at the top of the folder."""
    index = folder / INDEX
    names = [p.name for p in folder.iterdir() if p.is_file()]
    if index.is_file():
        files = shards(index)
        missing = [f for f in files if not (folder / f).is_file()]
        if missing:
            raise ConfigError(f"{index}: lists {missing[0]}, which is not in {folder}")
    else:
        files = singles(names, str(folder))
    tensors: dict[str, Tensor] = {}
    for f in files:
        tensors.update(header(folder / f))
    return Weights(tensors, tuple(files), pickled(names))
