"""What vpatch did to an installed vLLM, kept inside its .dist-info so that
anyone can find it, and so that `vpatch uninstall` can undo it:

  <dist-info>/vpatch.json             the series (name, content hash, patches),
                                      every file vpatch replaced with its
                                      original and patched hash, mode and mtime
  <dist-info>/vpatch/RECORD.orig      RECORD as it was
  <dist-info>/vpatch/orig/<path>.orig each replaced file as it was (sources and
                                      their .pyc); `.orig` so that compileall
                                      never compiles them

All of them are listed in RECORD, so `pip uninstall` removes them with the
rest of the distribution and `pip show -f` lists them.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from ..errors import TreeError

NAME = "vpatch.json"
STORE = "vpatch"
FORMAT = 1


@dataclass
class FileState:
    original: str | None  # RECORD-style hash; None: vpatch created the file
    patched: str | None  # None: vpatch removed the file
    mode: int | None = None  # original st_mode & 0o7777
    mtime_ns: int | None = None  # original mtime
    bytecode: str = ""  # .pyc: the invalidation mode it had


@dataclass
class Receipt:
    release: str
    series: str  # the series folder's name (the release it was made for)
    series_sha256: str
    patches: list[str]
    files: dict[str, FileState] = field(default_factory=dict)  # sources, by RECORD path
    bytecode: dict[str, FileState] = field(default_factory=dict)  # .pyc, by RECORD path
    record: FileState | None = None

    def dumps(self) -> bytes:
        data = {"format": FORMAT, **asdict(self)}
        return (json.dumps(data, indent=1, sort_keys=False) + "\n").encode()

    @classmethod
    def loads(cls, data: bytes, where: Path) -> Receipt:
        try:
            d = json.loads(data)
            if d.get("format") != FORMAT:
                raise ValueError(f"format {d.get('format')!r}, this vpatch reads {FORMAT}")
            d = _known(cls, d)  # keys a later vpatch may add are not needed to undo
            d["files"] = {k: FileState(**_known(FileState, v)) for k, v in d["files"].items()}
            d["bytecode"] = {k: FileState(**_known(FileState, v)) for k, v in d["bytecode"].items()}
            d["record"] = FileState(**_known(FileState, d["record"])) if d.get("record") else None
            return cls(**d)
        except (ValueError, TypeError, KeyError, AttributeError) as e:
            raise TreeError(
                f"{where} is not a vpatch receipt this vpatch can read ({e}); undo it with the "
                "vpatch that wrote it, or reinstall vLLM with pip (--force-reinstall --no-deps)"
            ) from None


def _known(cls: type[Any], d: dict[str, Any]) -> dict[str, Any]:
    names = {f.name for f in fields(cls)}
    return {k: v for k, v in d.items() if k in names}


def path(dist_info: Path) -> Path:
    return dist_info / NAME


def read(dist_info: Path) -> Receipt | None:
    p = path(dist_info)
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as e:
        raise TreeError(f"cannot read {p}: {e.strerror or e}") from None
    return Receipt.loads(data, p)


def saved(dist_info: Path, rel: str) -> Path:
    """Where the original of the file at RECORD path rel is kept."""
    return dist_info / STORE / "orig" / f"{rel}.orig"


def saved_record(dist_info: Path) -> Path:
    return dist_info / STORE / "RECORD.orig"
