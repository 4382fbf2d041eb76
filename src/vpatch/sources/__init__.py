"""Where a release's source tree comes from.

Providers (`--source`): sdist, wheel (the Python files of the official
wheel: for a release without an sdist), cpu-wheel, git (a tag checkout), or a local
folder. Every provider writes into an empty destination and refuses, before
writing anything, a member that would land outside it.

materialize() and describe() are here; the modules:

  cache     the download cache, checked against the lock's sha256
  index     the package index (pip's), read through its JSON API (PEP 691)
            on network/'s client with the index's credentials (opener)
  lazy      HTTP range reads of a remote wheel, on the client it is handed
  extract   archives -> trees
  listing   what a release's tree holds, entry by entry, without writing it
            (`vpatch apply --dest` compares a folder with it)
  files     the few files of a release that the matrix, lint, `vpatch pr`
            and a carry read
  refresh   pins from the index (`vpatch lock --refresh`)
  releases  the releases the index has beyond the lock (`vpatch releases`)
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from .. import gitutil
from ..errors import ConfigError, IntegrityError, NetworkError, RangeUnsupported
from ..lock import SOURCES, VLLM_REMOTE, Release
from .cache import Say, cached, download, from_index, quiet
from .extract import copy_folder, extract_sdist, extract_wheel, extract_wheel_lazy


def resolve(release: Release, source: str) -> str:
    """`--source` as materialize() and describe() take it: `auto` becomes
    sdist when the lock lists one, else the official wheel; an artifact
    kind, `git` or a folder stays what it is."""
    if source == "auto":
        return "sdist" if "sdist" in release.artifacts else "wheel"
    return source


def describe(release: Release, kind: str, remote: str | None = None) -> str:
    """What the release's source (`kind`: resolve()'s) comes from, as
    materialize says it (a tree's baseline commit message names it): the
    artifact's file name, the remote and tag, or the folder."""
    if kind in ("sdist", "wheel", "cpu-wheel"):
        return release.artifact(kind).filename
    if kind == "git":
        return f"{remote or VLLM_REMOTE}@{release.tag}"
    return str(Path(kind).expanduser())


def materialize(
    release: Release,
    kind: str,
    dest: Path,
    offline: bool = False,
    remote: str | None = None,
    say: Say = quiet,
) -> str:
    """Write release's source tree (`kind`: as resolve() gives `--source`)
    into the empty folder dest; say what it came from. A cached archive is
    hashed once (cached or downloaded, never both); a wheel that is not
    cached is read member by member with range requests, or downloaded whole
    when the server does not honour them."""
    if kind == "sdist":
        path = download(release.artifact("sdist"), offline, say)
        extract_sdist(path, dest, f"vllm-{release.version}")
        return describe(release, kind)
    if kind in ("wheel", "cpu-wheel"):
        art = release.artifact(kind)
        hit = cached(art, say, offline)
        if hit is None and art.record_sha256 and not offline:
            try:
                extract_wheel_lazy(art, dest)  # writes nothing before every read succeeded
                return describe(release, kind)
            except RangeUnsupported as e:
                say(f"{e}; downloading the whole wheel instead")
        path = hit or from_index(art, offline, say)
        extract_wheel(path, dest)
        return describe(release, kind)
    if kind == "git":
        url = remote or VLLM_REMOTE
        if offline:
            raise NetworkError("--offline cannot be used with --source git")
        head = gitutil.clone_tag(url, release.tag, dest)
        want = release.commit.removeprefix("g")
        if not head.startswith(want):
            shutil.rmtree(dest / ".git", ignore_errors=True)
            raise IntegrityError(
                f"{url} tag {release.tag} is commit {head[:12]}, "
                f"but the lock pins {want}; check --remote"
            )
        return describe(release, kind, remote)
    folder = Path(kind).expanduser()
    if folder.exists() or os.sep in kind or kind.startswith("."):
        copy_folder(folder, dest)
        return describe(release, kind)
    raise ConfigError(f"unknown source {kind!r}; use one of {', '.join(SOURCES)} or a folder")
