"""Where vpatch's own data lives: VERSIONS.lock, patches/patches.toml and
the patch files patches/<slug>/<variant>.patch.

They are package data (vpatch/data), read where the package is: in a
checkout (src/vpatch/data, editable installs included) and in an installed
vpatch alike, so `vpatch install` works in an image from any working
directory. VPATCH_ROOT names another folder holding the same two entries.

Inputs come from here; outputs (build/, dist/, pr/) go to the working
directory, as with any build tool. The commands that edit the patch set
itself (export, port, lock --refresh) need data one may edit: `writable()`."""

from __future__ import annotations

import os
from pathlib import Path

from .errors import ConfigError

PACKAGE_DATA = Path(__file__).resolve().parent / "data"
DATA = "src/vpatch/data"  # where a checkout holds it (a carry's copy of one too)


def _has_data(d: Path) -> bool:
    return (d / "VERSIONS.lock").is_file() and (d / "patches").is_dir()


def root() -> Path:
    """The folder holding VERSIONS.lock and patches/."""
    named = os.environ.get("VPATCH_ROOT")
    if named:
        if not _has_data(Path(named)):
            raise ConfigError(f"VPATCH_ROOT={named} holds no VERSIONS.lock and patches/")
        return Path(named).resolve()
    if _has_data(PACKAGE_DATA):
        return PACKAGE_DATA
    raise ConfigError(
        "vpatch cannot find its VERSIONS.lock and patches/: reinstall it from a vpatch "
        "checkout or its sdist, or set VPATCH_ROOT to a folder holding them"
    )


def checkout(data: Path | None = None) -> Path | None:
    """The checkout whose src/vpatch/data `data` (default: ours) is, or None
    (an installed package: site-packages/vpatch/data)."""
    data = data or PACKAGE_DATA
    top = data.parents[2]
    if data.parent.parent.name == "src" and (top / "pyproject.toml").is_file():
        return top
    return None


def lock_path() -> Path:
    return root() / "VERSIONS.lock"


def patches_toml(base: Path | None = None) -> Path:
    return (base or root()) / "patches" / "patches.toml"


def writable(what: str, data: Path | None = None) -> Path:
    """`data` (default: root()), when it is data one may edit (a checkout,
    VPATCH_ROOT, any folder but an installed package's); else ConfigError."""
    r = data or root()
    if r == PACKAGE_DATA and checkout() is None:
        raise ConfigError(
            f"{what} edits the patch set: run it in a vpatch checkout (or set VPATCH_ROOT)"
        )
    return r
