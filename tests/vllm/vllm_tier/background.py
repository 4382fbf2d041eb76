"""The tier's builds and inner runs in a process of their own, started right
after collection when other tests run first in the session (``make test``:
unit and integration), so that they run beside those tests.

A process, not threads of the pytest process: the tests that run meanwhile
change that process's environment (a monkeypatched ``VPATCH_CACHE``, a
stand-in package index on 127.0.0.1, patched functions), and a build or a run
in a thread sees it (a cold CI run lost 13 tier tests that way). This process
gets the session's environment as it was at collection.

It builds what the selected outer tests need (prepare.ahead) and starts each
release's runs as soon as they are built (session.Session), at most
runner.JOBS inner processes at once, and one fewer while the pytest process
runs the other tests: it holds that slot until the tier's session fixture
writes ``go`` on this process's stdin (``Background.go``). Then it saves what
ran to ``<out>/runs.json`` (Session.save) and exits; the fixture loads it
(``Background.join``). Its output goes to ``$VPATCH_CACHE/vllm-tier/ahead.log``.
It runs in a process group of its own, which the pytest process kills if the
session ends before the tier's tests (``stop``), and which kills itself if
the pytest process goes away (its stdin closes before ``go``).

    python -m vllm_tier.background --out DIR --wanted JSON   (from tests/vllm)
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from . import TIER, cache, prepare, runner
from .session import Session

RUNS = "runs.json"


class Background:
    """The pytest process's handle on the background process."""

    def __init__(self, wanted: dict[str, list[str]], out: Path):
        self.wanted = wanted
        self.out = out
        self.log = cache.root() / "ahead.log"
        self.proc: subprocess.Popen | None = None

    def start(self) -> Background:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log, "w") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "vllm_tier.background", "--out", str(self.out)]
                + ["--wanted", json.dumps(self.wanted)],
                cwd=TIER,
                stdin=subprocess.PIPE,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: stop() kills it whole
            )
        return self

    def go(self) -> None:
        """The pytest process has reached the tier: its slot is free."""
        assert self.proc is not None and self.proc.stdin is not None
        try:
            self.proc.stdin.write(b"go\n")
            self.proc.stdin.flush()
        except BrokenPipeError:  # gone already: join() reports it
            pass

    def join(self, fixtures_from: str) -> tuple[Session | None, str]:
        """Wait for the process; the session it saved (None if it saved none)
        and a line that says what it did."""
        assert self.proc is not None
        t0 = time.monotonic()
        rc = self.proc.wait()
        waited = time.monotonic() - t0
        saved = self.out / RUNS
        if rc != 0 or not saved.is_file():
            return None, (
                f"the background builds and runs failed (exit {rc}; log: {self.log}); "
                "everything runs in line"
            )
        s = Session.load(saved, self.out, fixtures_from)
        return s, (
            f"{len(s.runs)} inner runs done beside the other tests "
            f"(waited {waited:.0f}s for them; log: {self.log})"
        )

    def stop(self) -> None:
        """Kill the process group if it still runs (the session ends early)."""
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


_current: Background | None = None


def start(wanted: dict[str, list[str]], out: Path) -> None:
    global _current
    if _current is None and wanted:
        _current = Background(wanted, out).start()


def current() -> Background | None:
    return _current


# ------------------------------------------------------------------ the process


def _wait_for_go() -> None:
    if sys.stdin.readline().strip() == "go":
        runner.SLOTS.release()
    else:  # stdin closed: the pytest process is gone; so are we, runs included
        os.killpg(0, signal.SIGKILL)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="vllm_tier.background", description=__doc__)
    ap.add_argument("--out", type=Path, required=True, help="where the runs write")
    ap.add_argument("--wanted", required=True, help="JSON: {release: [outer test names]}")
    args = ap.parse_args(argv)
    wanted: dict[str, list[str]] = json.loads(args.wanted)
    runner.SLOTS.acquire()  # the pytest process's, until it says go
    threading.Thread(target=_wait_for_go, name="go", daemon=True).start()
    runs = Session(args.out, fixtures_from=next(iter(wanted)))
    took = prepare.ahead(wanted, then=runs.start)
    print(f"built in {took:.0f}s; {len(runs.runs)} inner runs started", flush=True)
    runs.finish()
    runs.save(args.out / RUNS)
    return 0


if __name__ == "__main__":
    sys.exit(main())
