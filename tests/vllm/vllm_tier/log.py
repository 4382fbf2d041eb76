"""Progress on stderr, subprocesses whose output joins it, and file locks.

Every subprocess starts in a process group of its own and is registered
until it ends, so that ``kill_all`` ends each one with whatever it started
(pip's builds, an inner pytest and its engine's children). A program that
starts them calls ``guard`` first (tier.py, mutants.py): interrupted, or
when its parent or its parent's parent goes away, it kills them all and
exits."""

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
    except BaseException:  # interrupted while waiting: it does not outlive us
        _kill(proc)
        raise
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


def _die(signum: int, _frame: object = None) -> None:
    kill_all()
    os._exit(128 + signum)


def _parent(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[1])


def guard() -> None:
    """Kill every subprocess and exit when interrupted (SIGINT, SIGTERM,
    SIGHUP), or when the parent or the parent's parent goes away (``make``
    killed, even by SIGKILL: its recipe's shell outlives it). Call it from
    the main thread."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _die)
    parent = os.getppid()
    grandparent = _parent(parent)

    def watch() -> None:
        while os.getppid() == parent and _parent(parent) == grandparent:
            time.sleep(1)
        say("the parent is gone: stopping")
        _die(signal.SIGTERM)

    threading.Thread(target=watch, name="watch-parent", daemon=True).start()


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
