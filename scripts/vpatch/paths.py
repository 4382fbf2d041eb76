"""Path safety shared by archives, wheels and patches: nothing may write
outside its destination."""

from __future__ import annotations

import os
import shutil
from pathlib import Path, PurePosixPath

from .errors import UnsafePathError


def safe_relpath(name: str, what: str) -> PurePosixPath:
    """`name` as a relative path that stays inside its root, or UnsafePathError."""
    p = PurePosixPath(name.replace("\\", "/"))
    if not name or p.is_absolute() or name.startswith("/") or ":" in p.parts[0]:
        raise UnsafePathError(f"{what}: absolute path {name!r} refused")
    if ".." in p.parts:
        raise UnsafePathError(f"{what}: path {name!r} escapes the destination ('..')")
    return p


def check_link(root: Path, link: PurePosixPath, target: str, what: str) -> None:
    """A symlink at root/link pointing to target must resolve inside root."""
    if os.path.isabs(target):
        raise UnsafePathError(f"{what}: symlink {link} -> {target} points outside")
    resolved = os.path.normpath(os.path.join(os.path.dirname(str(link)), target))
    if resolved == ".." or resolved.startswith("../") or os.path.isabs(resolved):
        raise UnsafePathError(f"{what}: symlink {link} -> {target} points outside")


def inside(root: Path, path: Path) -> bool:
    root = root.resolve()
    try:
        path.resolve().relative_to(root)
    except ValueError:
        return False
    return True


def empty(folder: Path) -> None:
    """Remove everything inside folder, keeping the folder itself."""
    for p in folder.iterdir():
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p)
        else:
            p.unlink()
