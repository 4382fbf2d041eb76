"""One vpatch run at a time per environment.

The lock is an flock on the distribution's .dist-info folder itself: no
lock file is created (pip would leave an unlisted file behind on
uninstall), it is released when the process dies, however it dies, and
it works on a read-only file system too.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import time
from collections.abc import Iterator
from pathlib import Path

from ..errors import TreeError


@contextlib.contextmanager
def hold(folder: Path, wait: float = 0.0) -> Iterator[None]:
    """Hold the lock on folder; wait up to `wait` seconds for another run
    to finish, then TreeError."""
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    except OSError as e:
        raise TreeError(f"cannot open {folder}: {e.strerror or e}") from None
    try:
        deadline = time.monotonic() + wait
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as e:
                if e.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                    raise TreeError(f"cannot lock {folder}: {e.strerror or e}") from None
                if time.monotonic() >= deadline:
                    raise TreeError(
                        f"another vpatch run is changing {folder.parent}; wait for it to finish"
                    ) from None
                time.sleep(0.05)
        yield
    finally:
        os.close(fd)
