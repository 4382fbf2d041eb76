"""`vpatch port FROM TO`: carry a release's series to another release (3-way),
or (`--continue`) finish a port whose conflicts a person resolved.
maintain/port.py does the work (shared with the other commands that need it); the CLI prints
the `Ported`."""

from __future__ import annotations

from pathlib import Path

from .. import lock
from ..maintain import port as engine
from ..maintain.port import Ported
from ..sources.cache import Say, quiet

__all__ = ["Ported", "port", "resume"]


def port(
    from_version: str,
    to_version: str,
    *,
    pins: lock.Lock,
    work: Path | None = None,
    into: Path | None = None,
    from_source: str = "auto",
    to_source: str = "auto",
    offline: bool = False,
    keep: bool = False,
    say: Say = quiet,
) -> Ported:
    """FROM's series ported to TO (maintain/port.py: the work tree, the
    statuses, what goes into the patch set)."""
    return engine.port(
        from_version,
        to_version,
        pins=pins,
        work=work,
        into=into,
        from_source=from_source,
        to_source=to_source,
        offline=offline,
        keep=keep,
        say=say,
    )


def resume(
    from_version: str,
    to_version: str,
    *,
    pins: lock.Lock,
    work: Path | None = None,
    into: Path | None = None,
    keep: bool = False,
) -> Ported:
    """Finish a port whose conflicts a person resolved in the work tree."""
    return engine.resume(from_version, to_version, pins=pins, work=work, into=into, keep=keep)
