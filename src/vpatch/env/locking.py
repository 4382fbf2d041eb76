"""One vpatch run at a time per environment.

The lock is an flock on the distribution's .dist-info folder itself: no
lock file is created (pip would leave an unlisted file behind on
uninstall), it is released when the process dies, however it dies, and
it works on a read-only file system too.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from ..errors import TreeError
from ..paths import held


def hold(folder: Path, wait: float = 0.0) -> contextlib.AbstractContextManager[None]:
    """Hold the lock on folder (paths.held); wait up to `wait` seconds for
    another run to finish, then TreeError. Every failure here is the
    environment's, TreeError (exit 6), the lock's own included."""
    busy = f"another vpatch run is changing {folder.parent}; wait for it to finish"
    return held(folder, busy, str(folder), wait, _unusable)


def _unusable(e: OSError, doing: str) -> TreeError:
    return TreeError(f"{doing}: {e.strerror or e}")
