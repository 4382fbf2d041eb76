"""Progress on stderr, subprocesses whose output joins it, and file locks."""

from __future__ import annotations

import contextlib
import fcntl
import subprocess
import sys
import time
from pathlib import Path

_T0 = time.monotonic()


def say(msg: str) -> None:
    """Progress goes to stderr so that it shows even when stdout is parsed."""
    print(f"[vllm-env +{time.monotonic() - _T0:6.1f}s] {msg}", file=sys.stderr, flush=True)


def run(cmd: list, **kw) -> None:
    """Run cmd, its stdout joined to our stderr (keeps progress visible and our
    own stdout clean for `env.py --print-env`)."""
    say("$ " + " ".join(str(c) for c in cmd))
    try:
        out = sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):  # a captured stream
        out = None
    subprocess.run([str(c) for c in cmd], check=True, stdout=out, **kw)


@contextlib.contextmanager
def locked(path: Path):
    """An exclusive lock, so that concurrent builders (two pytest workers, a
    developer's shell) do not build the same thing twice."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
