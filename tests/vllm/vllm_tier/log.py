"""Progress on stderr, subprocesses whose output joins it, and file locks.

Every subprocess starts in a process group of its own and is registered
until it ends, so that ``kill_all`` ends each one with whatever it started
(pip's builds, an inner pytest and its engine's children): the tier program
calls it when it is interrupted or its parent goes away (tier.py)."""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

_T0 = time.monotonic()
_CHILDREN: set[subprocess.Popen] = set()
_LOCK = threading.RLock()  # kill_all runs in a signal handler, maybe inside spawn


def say(msg: str) -> None:
    """Progress goes to stderr so that it shows even when stdout is parsed."""
    print(f"[vllm-env +{time.monotonic() - _T0:6.1f}s] {msg}", file=sys.stderr, flush=True)


def spawn(cmd: list, **kw) -> subprocess.Popen:
    """Start cmd in a process group of its own, registered for kill_all."""
    with _LOCK:
        proc = subprocess.Popen([str(c) for c in cmd], process_group=0, **kw)
        _CHILDREN.add(proc)
    return proc


def wait(proc: subprocess.Popen, timeout: float | None = None) -> int | None:
    """Its exit status; None if it ran past ``timeout`` (its group is killed)."""
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill(proc)
        proc.wait()
        return None
    finally:
        with _LOCK:
            _CHILDREN.discard(proc)


def _kill(proc: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)


def kill_all() -> None:
    """Kill every registered subprocess and its group."""
    with _LOCK:
        for proc in list(_CHILDREN):
            _kill(proc)


def run(cmd: list, **kw) -> None:
    """Run cmd, its stdout joined to our stderr (keeps progress visible and our
    own stdout clean for `tier.py prepare --print-env`)."""
    say("$ " + " ".join(str(c) for c in cmd))
    try:
        out = sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):  # a captured stream
        out = None
    rc = wait(spawn(cmd, stdout=out, **kw))
    if rc != 0:
        raise subprocess.CalledProcessError(rc if rc is not None else -1, [str(c) for c in cmd])


@contextlib.contextmanager
def locked(path: Path):
    """An exclusive lock, so that concurrent builders (two tier programs, a
    developer's shell) do not build the same thing twice."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
