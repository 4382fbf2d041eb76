"""Where vpatch's own data lives: VERSIONS.lock, patches/<release>/ and
patches/patches.toml.

In a checkout they sit beside scripts/ (an editable install finds them
there too). An installed vpatch (`pip install .`, non-editable) carries
them as package data in vpatch/_data, copied there by setup.py at build
time, so `vpatch install` works in an image from any working directory.
VPATCH_ROOT names another checkout.

Inputs come from here; outputs (build/, dist/, pr/) go to the working
directory, as with any build tool. The commands that edit the patch set
itself (export, port, lock --refresh) need a checkout: `writable()`."""

from __future__ import annotations

import os
from pathlib import Path

from .errors import ConfigError

_HERE = Path(__file__).resolve().parent
PACKAGE_DATA = _HERE / "_data"


def _has_data(d: Path) -> bool:
    return (d / "VERSIONS.lock").is_file() and (d / "patches").is_dir()


def root() -> Path:
    """The folder holding VERSIONS.lock and patches/."""
    named = os.environ.get("VPATCH_ROOT")
    if named:
        if not _has_data(Path(named)):
            raise ConfigError(f"VPATCH_ROOT={named} holds no VERSIONS.lock and patches/")
        return Path(named).resolve()
    checkout = _HERE.parents[1]  # scripts/vpatch -> the checkout
    if _has_data(checkout):
        return checkout
    if _has_data(PACKAGE_DATA):
        return PACKAGE_DATA
    raise ConfigError(
        "vpatch cannot find its VERSIONS.lock and patches/: reinstall it with `pip install .` "
        "from a vpatch checkout, or set VPATCH_ROOT to one"
    )


def lock_path() -> Path:
    return root() / "VERSIONS.lock"


def patches_toml(base: Path | None = None) -> Path:
    return (base or root()) / "patches" / "patches.toml"


def writable(what: str) -> Path:
    """root(), when it is a checkout one may edit; else ConfigError."""
    r = root()
    if r == PACKAGE_DATA:
        raise ConfigError(
            f"{what} edits the patch set: run it in a vpatch checkout (or set VPATCH_ROOT)"
        )
    return r
