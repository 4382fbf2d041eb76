"""The tier program's inner runs: which runs each check needs on a release
(``Session.start``), started on a pool as soon as what they run is built, and
their results (``Session.results``). What cannot be built fails only the
checks that need it (recorded as their error)."""

from __future__ import annotations

import subprocess
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from vpatch.errors import VpatchError

from . import TierError, models, prepare, runner
from .checks import CHECKS
from .registry import Job, Run
from .results import Results


class Session:
    """Every inner run of a tier program run on a pool of runner.JOBS threads
    (each run also holds a runner slot while its process runs)."""

    def __init__(self, out: Path, selected: list[str], plan: dict[str, list[str]]):
        self.out = out
        self.selected = selected
        self.plan = plan
        # the first release's venv makes the fixtures
        self.fixtures_from = next(iter(plan), selected[0] if selected else "")
        self.pool = ThreadPoolExecutor(max_workers=runner.JOBS, thread_name_prefix="vllm-inner")
        self.runs: dict[tuple[str, str, str], Future] = {}
        self.errors: dict[tuple[str, str], str] = {}
        self._started: set[tuple[str, str]] = set()
        self._lock = threading.Lock()

    def started(self, check: str, release: str) -> bool:
        with self._lock:
            return (check, release) in self._started

    def build_and_start(self, check: str, release: str) -> None:
        """Make what ``check`` needs for ``release`` (prepare.build) and start its
        runs; a failure to build is recorded as the check's error."""
        try:
            self.start(check, release, prepare.build(check, release))
        except (TierError, VpatchError, subprocess.CalledProcessError) as e:
            with self._lock:
                self._started.add((check, release))
                self.errors[check, release] = f"cannot prepare {check} of vLLM {release}: {e}"

    def start(self, check: str, release: str, made: Any) -> None:
        """Start the runs of ``check`` for ``release`` (its definition's
        runs); ``made`` is what prepare.build returned for them."""
        with self._lock:
            if (check, release) in self._started:
                return
            self._started.add((check, release))
        job = Job(release, tuple(self.selected), self._folder(check, release), made)
        for one in CHECKS[check].runs(job):
            self._submit(check, release, one)

    def _folder(self, check: str, release: str) -> Path:
        return self.out / f"{release}-{check}"

    def _submit(self, check: str, release: str, one: Run) -> None:
        future = self.pool.submit(
            runner.run_inner,
            release,
            one.variant,
            self._folder(check, release),
            fixtures=models.ensure(self.fixtures_from),
            **one.options,
        )
        with self._lock:
            self.runs[check, release, one.key] = future

    def finish(self) -> None:
        """Wait for every run."""
        self.pool.shutdown(wait=True)

    def results(self) -> Results:
        """What ran (after ``finish``): every run that ended, and the error of
        each check that could not be built or whose run could not start."""
        when = datetime.now(timezone.utc).isoformat(timespec="seconds")
        quoted = next(name for name, c in CHECKS.items() if c.quoted)
        out = Results(self.selected, self.plan, errors=dict(self.errors), when=when, quoted=quoted)
        for (check, release, key), future in self.runs.items():
            error = future.exception()
            if error is None:
                out.runs[check, release, key] = future.result()
            else:
                out.errors.setdefault((check, release), f"{key} run: {error}")
        return out
