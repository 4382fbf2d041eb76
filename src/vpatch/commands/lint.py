"""`vpatch lint`: the patch set is consistent, well-formed and up to date.
maintain/lint.py does the work (shared with the other commands that need it); the CLI prints
the problems."""

from __future__ import annotations

from .. import lock
from ..maintain import lint as engine
from ..maintain.lint import Linted
from ..sources.cache import Say, quiet

__all__ = ["Linted", "lint"]


def lint(pins: lock.Lock, offline: bool = False, say: Say = quiet) -> Linted:
    """Every check of maintain/lint.py on the patch set beside pins' lock;
    with `offline`, releases not in the cache are skipped."""
    return engine.lint(pins, offline=offline, say=say)
