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

from .. import jsontext, settings
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
    each Tensor records), checked as the safetensors library checks them
    before it loads a file (Metadata::validate), so what vLLM would refuse
    at load is bad input here: each tensor a dtype, a shape of whole numbers
    >= 0 and data_offsets [begin, end] that span the bytes its shape and
    dtype take (for the dtypes of whole bytes), the tensors' data one after
    the other from 0. The length of the data is not checked (it is not
    read)."""
    what = f"{where}: safetensors header"
    meta = jsontext.loads(raw, what)
    if not isinstance(meta, dict):
        raise ConfigError(f"{what} is not a JSON object")
    out, spans = {}, []
    for name, info in meta.items():
        if name == "__metadata__":
            if not isinstance(info, dict) or not all(isinstance(v, str) for v in info.values()):
                raise ConfigError(f"{what}: __metadata__ is not a map of strings")
            continue
        tensor, span = _tensor(name, info, f"{what}: tensor {name[:100]!r}", file)
        out[name] = tensor
        spans.append((*span, name))
    at = 0
    for begin, end, name in sorted(spans):
        if begin != at:
            raise ConfigError(
                f"{what}: tensor {name[:100]!r} begins at byte {begin} of the data, where the "
                f"one before it ends at {at} (the tensors' data follow one another from 0)"
            )
        at = end
    return out


# bytes an element of each dtype of whole bytes takes (safetensors' Dtype)
_BYTES = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1, "F8_E8M0": 1}
_BYTES |= {"I16": 2, "U16": 2, "F16": 2, "BF16": 2, "I32": 4, "U32": 4, "F32": 4}
_BYTES |= {"I64": 8, "U64": 8, "F64": 8, "C64": 8}


def _tensor(name: str, info: object, what: str, file: str) -> tuple[Tensor, tuple[int, int]]:
    """One tensor of a header, and the span of its data."""
    if not isinstance(info, dict):
        raise ConfigError(f"{what} is not a JSON object")
    dtype, shape, span = info.get("dtype"), info.get("shape"), info.get("data_offsets")
    if not isinstance(dtype, str) or not dtype:
        raise ConfigError(f"{what} has no dtype")
    if not isinstance(shape, list) or not all(_whole(d) for d in shape):
        raise ConfigError(
            f"{what}: shape {settings.shown(shape, 80)} is not a list of whole numbers >= 0 "
            "(below 2**64)"
        )
    if not (isinstance(span, list) and len(span) == 2 and all(_whole(o) for o in span)):
        raise ConfigError(f"{what}: data_offsets {settings.shown(span, 80)} is not [begin, end]")
    if span[0] > span[1]:
        raise ConfigError(f"{what}: data_offsets {span} end before they begin")
    if dtype in _BYTES:
        size = _BYTES[dtype]
        for d in shape:
            size *= d
            if size > _U64:  # safetensors' checked product overflows: said at once
                shown = settings.shown(shape, 80)
                raise ConfigError(f"{what}: {dtype} {shown} takes more than 2**64 bytes")
        if span[1] - span[0] != size:
            raise ConfigError(
                f"{what}: data_offsets {span} span {span[1] - span[0]} bytes; {dtype} "
                f"{shape} takes {size}"
            )
    return Tensor(name, dtype, tuple(shape), file), (span[0], span[1])


# safetensors reads dims and offsets as u64 (usize): a larger one it refuses
_U64 = 2**64 - 1


def _whole(x: object) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and 0 <= x <= _U64


def header(path: Path, file: str | None = None) -> dict[str, Tensor]:
    """The tensors one safetensors file declares (its header only); `file`:
    the name each Tensor records (default: the file's)."""
    try:
        with open(path, "rb") as fh:
            n = length(fh.read(8), path.stat().st_size, str(path))
            raw = fh.read(n)
    except OSError as e:
        raise ConfigError(f"{path}: cannot read: {e.strerror or e}") from None
    return parse(raw, str(path), file or path.name)


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
