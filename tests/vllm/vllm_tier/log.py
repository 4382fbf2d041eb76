"""Progress on stderr, subprocesses whose output joins it, and file locks."""

from __future__ import annotations

import contextlib
import fcntl
import subprocess
import sys
import threading
import time
from pathlib import Path

_T0 = time.monotonic()


# A thread building ahead (prepare.ahead) writes its progress to a file of its
# own: the terminal belongs to the tests running meanwhile.
_sink = threading.local()


@contextlib.contextmanager
def to_file(path: Path):
    """Progress and subprocess output of this thread go to ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as fh:
        _sink.fh = fh
        try:
            yield
        finally:
            _sink.fh = None


def _out():
    return getattr(_sink, "fh", None) or sys.stderr


def say(msg: str) -> None:
    """Progress goes to stderr so that it shows even when stdout is parsed."""
    print(f"[vllm-env +{time.monotonic() - _T0:6.1f}s] {msg}", file=_out(), flush=True)


def run(cmd: list, **kw) -> None:
    """Run cmd, its stdout joined to our stderr (keeps progress visible and our
    own stdout clean for `env.py --print-env`)."""
    say("$ " + " ".join(str(c) for c in cmd))
    try:
        out = _out().fileno()
    except (AttributeError, OSError, ValueError):  # a captured stream
        out = None
    if getattr(_sink, "fh", None) is not None:  # building ahead: all of it to the file
        kw.setdefault("stderr", subprocess.STDOUT)
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
