"""Shared test helpers: plain functions and data, imported as `from support
import ...` (pyproject.toml puts tests/ on the path). Fixtures live in the
conftest.py files; no test module imports another test module.

Everything here is made with the real tools (git, zipfile, tarfile, an HTTP
server on 127.0.0.1), so the tests check vpatch against them."""

from __future__ import annotations

import ast
import base64
import contextlib
import csv
import hashlib
import http.server
import io
import os
import random
import re
import shutil
import struct
import subprocess
import sys
import tarfile
import threading
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path

from packaging.version import Version
from vpatch import lock, quilt
from vpatch.wheel import fatbin, file, patch

# -- git, series, trees --------------------------------------------------------

GIT_ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.com",
    "GIT_AUTHOR_DATE": "2026-01-02T00:00:00+00:00",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.com",
    "GIT_COMMITTER_DATE": "2026-01-02T00:00:00+00:00",
}


def git(cwd: Path, *args: str) -> str:
    """Plain git (not vpatch's gitutil), with a fixed identity and date."""
    env = {**os.environ, **GIT_ENV}
    out = subprocess.run(
        ["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True
    )
    return out.stdout


# The made-up releases of the fixtures: a wheel's version (make_wheel's, and
# 9.9.x wherever a made-up tree, wheel or report names one) and the upstream
# release of a made-up series (DEP3's 10.0.0, which tests/conftest.py's `pins`
# pins beside 9.8.0 and 9.9.0). They are no vLLM release: nothing in vpatch's
# data applies to them, and tests/unit/test_release_literals.py does not count
# them.
FAKE = "9.9.1"

DEP3 = """
Description: {subject}
Origin: vendor
Forwarded: not-needed
Applied-Upstream: 10.0.0
Last-Update: 2026-11-29
"""


# Set by the carry drill (tests/integration/commands/test_carry_drill.py) on
# the unit suite it runs in a copy rewound to before a release: there a test
# of a release the copy does not know yet is skipped; anywhere else it fails.
REWOUND = "VPATCH_REWOUND"


def known(release: str, pins: lock.Lock | None = None) -> str:
    """`release`, a test's point, when vpatch's data pins it and doctor's
    rules cover it; else skipped in a rewound copy (REWOUND), failed here."""
    pins = pins or lock.load()
    if release in pins.releases and pins.rules.covers(release):
        return release
    # a support.releases.Missing says which release was asked for
    why = getattr(release, "why", f"vLLM {release} is not pinned with doctor's rules in this copy")
    if os.environ.get(REWOUND):
        import pytest

        pytest.skip(why + " (rewound before it)")
    raise AssertionError(why + ": a test of its behaviour needs its data")


def next_release(pins: lock.Lock) -> str:
    """A release the lock does not pin yet: the minor after the newest pinned
    (what a carry takes), derived so that no test names "the next one"."""
    return minor_after(pins.versions()[-1])


def minor_after(release: str) -> str:
    """The first release of the minor after `release`'s: X.Y.Z -> X.(Y+1).0."""
    major, minor, _ = release.split(".", 2)
    return f"{major}.{int(minor) + 1}.0"


def make_series(tmp: Path, base: dict[str, str], steps: list[tuple[str, dict[str, str]]]) -> Path:
    """A series folder: each step (subject, {path: new text}) becomes one
    format-patch file, made by committing the change on top of `base`."""
    work = tmp / "series-work"
    work.mkdir()
    git(work, "init", "-q")
    write_tree(work, base)
    git(work, "add", "-A")
    git(work, "commit", "-qm", "base")
    out = tmp / "series"
    out.mkdir()
    names = []
    for i, (subject, changes) in enumerate(steps, 1):
        write_tree(work, changes)
        git(work, "add", "-A")
        git(work, "commit", "-qm", subject + "\n" + DEP3.format(subject=subject))
        name = f"{i:04d}-step-{i}.patch"
        patch = git(work, "format-patch", "--stdout", "--keep-subject", "--no-signature", "-1")
        (out / name).write_text(patch)
        names.append(name)
    (out / "series").write_text("\n".join(names) + "\n")
    return out


def series_of(pins: lock.Lock, release: lock.Release | str) -> quilt.Series:
    """The release's series; it must have one."""
    series = pins.series(release)
    assert series is not None, f"{release} carries no series"
    return series


def publish(root: Path, version: str, folder: Path) -> Path:
    """The plain series in `folder` (make_series) as release `version`'s variants
    in the patch set under root: patches/<slug>/<version>.patch and the spans
    in patches/patches.toml, appended to what is there. Returns patches.toml."""
    from vpatch import patchset, patchset_write

    toml = root / "patches" / "patches.toml"
    toml.parent.mkdir(parents=True, exist_ok=True)
    ps = patchset.load(toml)
    prev = None
    for p in quilt.load(folder).patches:
        dest = ps.file(p.slug, version)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(p.path, dest)
        spans = [v.span for v in ps.variants.get(p.slug, [])] + [version]
        patchset_write.set_spans(toml, p.slug, spans, prev)
        prev = p.slug
    return toml


def rules_upto(text: str, release: str) -> str:
    """rules.toml's text as it stood when `release` was the newest read:
    its tables after `release` left out, `newest` set to it."""
    from vpatch import rules

    head, *tables = re.split(r'(?m)^(?=\[releases\.")', text)
    kept = [t for t in tables if Version(t.split('"', 2)[1]) <= Version(release)]
    return rules.with_newest("".join([head, *kept]), release)


def copy_rules(root: Path) -> Path:
    """vpatch's rules.toml (and serving.toml) into the data root `root`,
    beside its VERSIONS.lock: doctor's facts as they are, up to the newest release the
    lock pins (rules_upto), since a rules.toml whose `newest` the lock does
    not pin is refused at load. Returns the file."""
    from vpatch import rules

    out = root / rules.FILE
    out.write_text(
        rules_upto(lock.load().rules.path.read_text(), lock.load(root / "VERSIONS.lock").newest)
    )
    # and which code serves a target (serving.toml), read with them
    shutil.copyfile(lock.load().serving.path, root / "serving.toml")
    return out


def named_series(
    tmp: Path,
    into: Path,
    base: dict[str, str],
    steps: list[tuple[str, dict[str, str]]],
    names: list[str],
) -> Path:
    """make_series, with the patch files named `names` in folder `into`."""
    tmp.mkdir()
    made = make_series(tmp, base, steps)
    into.mkdir(parents=True)
    for old, new in zip(quilt.read_names(made / "series"), names, strict=True):
        shutil.copy(made / old, into / new)
    (into / "series").write_text("".join(f"{n}\n" for n in names))
    return into


BASE = {
    "vllm/model.py": "".join(f"line {i}\n" for i in range(1, 41)),
    "vllm/config.py": "allow = ['llama']\n",
    "README.md": "tiny\n",
}


def top_level_names(path: Path) -> set[str]:
    """What a module defines or imports at its top level (read, not run)."""
    out = set()
    for n in ast.parse(path.read_text()).body:
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(n.name)
        elif isinstance(n, ast.Assign):
            out |= {t.id for t in n.targets if isinstance(t, ast.Name)}
        elif isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name):
            out.add(n.target.id)
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            out |= {(a.asname or a.name).split(".")[0] for a in n.names}
    return out


def change(text: str, old: str, new: str) -> str:
    assert old in text
    return text.replace(old, new, 1)


def write_tree(root: Path, files: dict[str, str] | dict[str, bytes]) -> Path:
    """Write {relative path: text or bytes} under root (made as needed); root."""
    root.mkdir(parents=True, exist_ok=True)
    for path, data in files.items():
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(data, bytes):
            target.write_bytes(data)
        else:
            target.write_text(data)
    return root


def text_file(path: Path, text: str) -> Path:
    """path, holding text (its folder made as needed)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def listing(root: Path) -> list[str]:
    """The files under root, as sorted relative POSIX paths."""
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())


def commit_tree(path: Path, files: dict[str, str], message: str = "base") -> Path:
    """A git repository at path holding files in one commit on branch main."""
    write_tree(path, files)
    git(path, "init", "-q", "-b", "main")
    git(path, "add", "-A")
    git(path, "commit", "-qm", message)
    return path


# -- the download cache ----------------------------------------------------------


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def cache_file(cache: Path, kind: str, name: str, data: bytes) -> lock.Artifact:
    """An artifact whose file sits, verified by its hash, in the download cache."""
    (cache / "downloads").mkdir(parents=True, exist_ok=True)
    (cache / "downloads" / name).write_bytes(data)
    return lock.Artifact(kind, name, sha256(data), len(data))


def targz(members: dict[str, bytes], modes: dict[str, int] | None = None) -> bytes:
    """A tar.gz of regular files."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = (modes or {}).get(name, 0o644)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def sdist(cache: Path, version: str, files: dict[str, str]) -> lock.Release:
    """A release whose sdist (vllm-V/...) sits verified in the download cache."""
    data = targz({f"vllm-{version}/{p}": t.encode() for p, t in files.items()})
    art = cache_file(cache, "sdist", f"vllm-{version}.tar.gz", data)
    return lock.Release(version, f"v{version}", "abc1234", "patched", {"sdist": art})


# -- ELF and CUDA fatbin builders ---------------------------------------------------

PTX, ELF = fatbin.KIND_PTX, fatbin.KIND_ELF
A, F, Z = fatbin.FLAG_ARCH_SPECIFIC, fatbin.FLAG_FAMILY, 0x8000  # 'a', 'f', zstd-compressed


def entry(kind: int, arch: int, flags: int = 0, payload: bytes = b"\x00" * 24, hsize=64) -> bytes:
    """One fatbin entry: header (kind, version, header size, payload size,
    arch at +28, flags at +40) and payload padded to 8 bytes."""
    payload += b"\x00" * (-len(payload) % 8)
    h = bytearray(hsize)
    struct.pack_into("<HHIQ", h, 0, kind, 0x0101, hsize, len(payload))
    struct.pack_into("<I", h, 28, arch)
    struct.pack_into("<Q", h, 40, 0x11 | flags)
    return bytes(h) + payload


def container(*entries: bytes) -> bytes:
    body = b"".join(entries)
    return struct.pack("<IHHQ", fatbin.FATBIN_MAGIC, 1, 16, len(body)) + body


def make_elf(sections: list[tuple[str, bytes]]) -> bytes:
    """A minimal ELF64 little-endian shared object: header, the sections'
    data, .shstrtab, then the section header table (as GNU ld lays it out)."""
    names = b"\x00"
    name_offs = []
    for name, _ in sections:
        name_offs.append(len(names))
        names += name.encode() + b"\x00"
    shstr_name = len(names)
    names += b".shstrtab\x00"
    body = bytearray(64)
    offs = []
    for _, data in sections:
        body += b"\x00" * (-len(body) % 8)
        offs.append(len(body))
        body += data
    shstr_off = len(body)
    body += names
    body += b"\x00" * (-len(body) % 8)
    shoff = len(body)
    sh = struct.Struct("<IIQQQQIIQQ")
    body += bytes(64)  # section 0
    for (_, data), off, noff in zip(sections, offs, name_offs, strict=True):
        body += sh.pack(noff, 1, 2, off, off, len(data), 0, 0, 8, 0)  # PROGBITS, ALLOC
    body += sh.pack(shstr_name, 3, 0, 0, shstr_off, len(names), 0, 0, 1, 0)  # STRTAB
    shnum = len(sections) + 2
    ident = b"\x7fELF" + bytes([2, 1, 1, 0]) + bytes(8)
    hdr = ident + struct.pack(
        "<HHIQQQIHHHHHH", 3, 62, 1, 0, 0, shoff, 0, 64, 0, 0, 64, shnum, shnum - 1
    )
    body[:64] = hdr
    return bytes(body)


def cuda_so(*entries: bytes) -> bytes:
    """An extension module with one .nv_fatbin holding one container."""
    return make_elf([(".text", b"\xc3" * 32), (".nv_fatbin", container(*entries))])


CPU_SO = make_elf([(".text", b"\xc3" * 16)])  # an extension module without device code


# -- wheels ----------------------------------------------------------------------------

SO = cuda_so(entry(ELF, 100), entry(ELF, 90, A), entry(PTX, 80))  # runs on sm_100
MOE = cuda_so(entry(ELF, 100, A), entry(ELF, 120))
BLOB = os.urandom(300_000)  # incompressible: stored raw bytes must survive as is
WHEEL_TAG = "cp38-abi3-manylinux_2_31_x86_64"


def rhash(data: bytes) -> str:
    """A RECORD hash, computed here without vpatch.record."""
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def vllm_files() -> dict[str, bytes]:
    """The members of a small vllm-like wheel: two CUDA extensions, Python
    files the standard series (BASE) patches, an incompressible blob."""
    return {
        "vllm/_C.abi3.so": SO,
        "vllm/_moe_C.abi3.so": MOE,
        "vllm/__init__.py": b"",
        "vllm/model.py": BASE["vllm/model.py"].encode(),
        "vllm/config.py": BASE["vllm/config.py"].encode(),
        "vllm/blob.bin": BLOB,
    }


# a wheel whose source tree is two small files beside a large extension module
REMOTE_MEMBERS = {
    "vllm/a.py": b"a = 1\n" * 100,
    "vllm/_C.abi3.so": random.Random(0).randbytes(3 << 20),  # 3 MB the tree does not need
    "vllm/sub/b.py": b"b = 2\n",
}

Rows = list[list[str]]


def make_wheel(
    where: Path,
    project: str = "vllm",
    version: str = FAKE,
    files: dict[str, bytes] | None = None,
    data_files: dict[str, bytes] | None = None,
    tag: str = WHEEL_TAG,
    record: Callable[[Rows], Rows] | None = None,
    tamper: str | None = None,
) -> Path:
    """A wheel as the release tooling writes it: package files, .data,
    then .dist-info with RECORD last. `record` may rewrite RECORD rows;
    `tamper` names a member whose content changes after RECORD was written."""
    if files is None:
        files = vllm_files()
    stem = f"{project}-{version}"
    members = dict(files)
    for k, v in (data_files or {}).items():
        members[f"{stem}.data/{k}"] = v
    di = f"{stem}.dist-info"
    members[f"{di}/METADATA"] = (
        f"Metadata-Version: 2.4\nName: {project.replace('_', '-')}\nVersion: {version}\n"
        "Summary: test\nRequires-Dist: packaging\n\nLong description.\nVersion: not a header\n"
    ).encode()
    members[f"{di}/WHEEL"] = b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: false\n"
    members[f"{di}/top_level.txt"] = b"vllm\n"
    rows = [[n, rhash(d), str(len(d))] for n, d in members.items()] + [[f"{di}/RECORD", "", ""]]
    if record:
        rows = record(rows)
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(rows)
    members[f"{di}/RECORD"] = buf.getvalue().encode()
    where.mkdir(parents=True, exist_ok=True)
    path = where / f"{stem}-{tag}.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for n, d in members.items():
            info = zipfile.ZipInfo(n, date_time=(2026, 2, 4, 19, 3, 52))
            info.external_attr = 0o100644 << 16
            info.compress_type = zipfile.ZIP_STORED if n.endswith(".bin") else zipfile.ZIP_DEFLATED
            zf.writestr(info, b"tampered" if n == tamper else d)
    return path


def record_of(wheel: Path) -> bytes:
    with zipfile.ZipFile(wheel) as zf:
        return zf.read(next(n for n in zf.namelist() if n.endswith(".dist-info/RECORD")))


# RECORD rewrites and the complaint each must cause (make_wheel's `record`)
RECORD_BREAKS = [
    (lambda rows: [r for r in rows if r[0] != "vllm/blob.bin"], "blob.bin is not listed"),
    (lambda rows: [[*r[:2], "1"] if r[0] == "vllm/model.py" else r for r in rows],
     "model.py is .* bytes, RECORD says 1"),
    (lambda rows: [*rows, ["vllm/ghost.py", rhash(b""), "0"]], "ghost.py, which is not"),
    (lambda rows: [[r[0], rhash(b"x"), r[2]] if r[0] == "vllm/model.py" else r for r in rows],
     "model.py does not have the hash"),
    (lambda rows: [*rows, rows[0]], "listed twice"),
    (lambda rows: [[r[0], "", r[2]] if r[0] == "vllm/blob.bin" else r for r in rows],
     "blob.bin has no hash"),
]  # fmt: skip


def data_offset(path: Path, info: zipfile.ZipInfo) -> int:
    """Where a member's compressed bytes start, from its local header."""
    with open(path, "rb") as f:
        f.seek(info.header_offset + 26)
        n, e = struct.unpack("<HH", f.read(4))
    return info.header_offset + 30 + n + e


def raw_member(path: Path, info: zipfile.ZipInfo) -> bytes:
    """A member's compressed bytes as stored in the file."""
    with open(path, "rb") as f:
        f.seek(data_offset(path, info))
        return f.read(info.compress_size)


def check_record(path: Path) -> None:
    """RECORD lists every member exactly once with the right hash and size."""
    with zipfile.ZipFile(path) as zf:
        assert zf.testzip() is None
        record = next(n for n in zf.namelist() if n.endswith(".dist-info/RECORD"))
        rows = list(csv.reader(io.StringIO(zf.read(record).decode())))
        listed = {r[0]: r for r in rows}
        assert len(listed) == len(rows)
        assert sorted(listed) == sorted(zf.namelist())
        for name in zf.namelist():
            if name == record:
                assert listed[name][1:] == ["", ""]
            else:
                data = zf.read(name)
                assert listed[name][1:] == [rhash(data), str(len(data))], name


def patched_files(wheel: Path, series: quilt.Series) -> dict[str, bytes]:
    """The series' files as patched on the wheel's copies."""
    with file.WheelFile.open(wheel) as w:
        return patch.apply_series(w, series).changed


def pip_install(wheel: Path, target: Path) -> subprocess.CompletedProcess[str]:
    """`pip install --target` of one wheel, offline, no dependencies."""
    return subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--no-compile",
         "--disable-pip-version-check", "--target", str(target), str(wheel)],
        capture_output=True, text=True,
    )  # fmt: skip


# -- a local HTTP server -------------------------------------------------------------


class RangeHandler(http.server.SimpleHTTPRequestHandler):
    """Serves files of its folder, honouring `Range: bytes=a-b` unless the
    class's `ranges` is False; counts the requests it answers."""

    ranges = True
    requests = 0

    def log_message(self, *args):
        pass

    def end_headers(self):
        if self.ranges:
            self.send_header("Accept-Ranges", "bytes")  # a server that honours ranges says so
        super().end_headers()

    def do_GET(self):
        type(self).requests += 1
        path = Path(self.directory, self.path.lstrip("/"))
        if not path.is_file():
            self.send_error(404)
            return
        data = path.read_bytes()
        m = re.match(r"bytes=(\d+)-(\d+)", self.headers.get("Range", ""))
        if m and self.ranges:
            start, end = int(m.group(1)), int(m.group(2)) + 1
            self.send_response(206)
            data = data[start:end]
        else:
            self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@contextlib.contextmanager
def serve(handler: Callable[..., http.server.BaseHTTPRequestHandler]) -> Iterator[str]:
    """An HTTP server on 127.0.0.1 in a thread; its base URL."""
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    t = threading.Thread(target=httpd.serve_forever, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/"
    finally:
        httpd.shutdown()
        httpd.server_close()
