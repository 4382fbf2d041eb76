"""`vpatch docs`: write the docs' generated parts, or name the stale ones.
maintain/docs.py makes them (shared with the other commands that need it); the CLI hands in
the parts only it can make (the README's command list) and prints what was
written."""

from __future__ import annotations

from pathlib import Path

from .. import lock
from ..maintain import docs as engine
from ..maintain.docs import Block

__all__ = ["Block", "stale", "write"]


def stale(root: Path | None = None, *, pins: lock.Lock, extra: tuple[Block, ...] = ()) -> list[str]:
    """The generated parts of the checkout's docs that are stale."""
    return engine.stale(root, pins=pins, extra=extra)


def write(root: Path | None = None, *, pins: lock.Lock, extra: tuple[Block, ...] = ()) -> list[str]:
    """Write every generated part anew; the docs that changed."""
    return engine.write(root, pins=pins, extra=extra)
