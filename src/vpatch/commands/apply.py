"""`vpatch fetch`, `apply`, `status`, `unapply`: a release's source, and a
patched tree of it (see checkout.py for what a vpatch tree is)."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path

from .. import checkout, lock, quilt, sources
from ..errors import ConfigError, TreeError, disk_error
from ..paths import PARTIAL, make_folder
from ..shown import Shown
from ..sources.cache import Say, download, quiet


@dataclass(frozen=True)
class Fetched(Shown):
    """What `vpatch fetch` got: the release, the cached file or the folder
    it filled (`unpacked`), and what it came from."""

    release: lock.Release
    where: Path
    what: str
    unpacked: bool

    def lines(self) -> list[str]:
        if self.unpacked:
            return [f"vLLM {self.release.version} from {self.what} -> {self.where}"]
        return [str(self.where)]


@dataclass(frozen=True)
class Unapplied(Shown):
    """What `vpatch unapply` did: the tree, its release, the commits removed."""

    dest: Path
    version: str
    removed: int

    def lines(self) -> list[str]:
        n = self.removed
        return [
            f"{self.dest}: back to the vLLM {self.version} baseline ({n} commit{'s' * (n != 1)} "
            "removed)"
        ]


def fetch(
    version: str | None,
    source: str = "auto",
    dest: Path | None = None,
    offline: bool = False,
    remote: str | None = None,
    say: Say = quiet,
    *,
    pins: lock.Lock,
) -> Fetched:
    """The release's source into the cache (sdist / wheel / cpu-wheel) and,
    with dest, its unpacked tree into that empty or new folder (or one a
    killed fetch left half made: see checkout.py)."""
    release = pins.get(version)
    kind = sources.resolve(release, source)
    if dest is None:
        if kind not in ("sdist", "wheel", "cpu-wheel"):
            raise ConfigError(f"--source {source} has nothing to cache; give --dest DIR")
        path = download(release.artifact(kind), offline, say)
        return Fetched(release, path, path.name, False)
    created = make_folder(dest, "the folder")
    try:
        with checkout.locked(dest):
            marker = dest / PARTIAL
            if marker.is_file():
                say(f"{dest}: a vpatch run was interrupted while filling it; starting over")
                checkout.empty_folder(dest)
            elif any(dest.iterdir()):
                raise TreeError(f"{dest} is not an empty folder; pick an empty or new one")
            try:
                checkout.mark(marker)
                what = sources.materialize(release, kind, dest, offline, remote, say)
                marker.unlink()
            except OSError as e:
                checkout.empty_folder(dest)
                raise disk_error(e, f"cannot fill {dest}") from None
            except BaseException:
                checkout.empty_folder(dest)
                raise
    except BaseException:
        if created:
            _remove(dest)
        raise
    return Fetched(release, dest, what, True)


def _remove(dest: Path) -> None:
    with contextlib.suppress(OSError):  # emptied above; a folder made by this run goes
        dest.rmdir()


def apply(
    version: str | None = None,
    dest: Path | None = None,
    source: str = "auto",
    series_dir: Path | None = None,
    offline: bool = False,
    remote: str | None = None,
    say: Say = quiet,
    *,
    pins: lock.Lock,
) -> checkout.Applied:
    """`vpatch apply`: the release's series (or series_dir) applied in dest
    (default build/vllm-<release>)."""
    release = pins.get(version)
    series = pins.series(release, series_dir)
    if series is None:
        raise ConfigError(
            f"vLLM {release.version} needs no patches (status {release.status}: it has the "
            f"EAGLE-3 changes itself); patched releases: {', '.join(pins.versions('patched'))}"
        )
    return checkout.apply(
        release,
        series,
        Path(dest or checkout.default_dest(release.version)),
        source,
        offline,
        remote,
        say,
    )


def status(
    dest: Path | None = None, series_dir: Path | None = None, *, pins: lock.Lock
) -> checkout.Status:
    """`vpatch status` of the tree dest (default: the one `make apply` and a
    plain `vpatch apply` make, build/vllm-<newest patched>)."""
    if dest is None:
        dest = checkout.default_dest(pins.default().version)
        if not dest.exists():
            raise ConfigError(
                f"no tree given, and there is no {dest} here (what `make apply` and "
                "`vpatch apply` make); give the tree: `vpatch status DIR`"
            )
    repo, version = checkout.open_tree(Path(dest))
    series = pins.series(version, series_dir)
    return checkout.status(Path(dest), repo, version, series or quilt.Series([], version))


def unapply(
    dest: Path,
    series_dir: Path | None = None,
    discard: bool = False,
    *,
    pins: lock.Lock,
) -> Unapplied:
    """`vpatch unapply`: the tree back to its baseline. Commits that are not
    the series' (series_dir's) own are refused unless `discard`."""
    repo, version = checkout.open_tree(Path(dest))
    series = pins.series(version, series_dir) or quilt.Series([], version)
    return Unapplied(
        Path(dest), version, checkout.unapply(Path(dest), repo, version, series, discard)
    )
