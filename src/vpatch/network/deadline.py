"""One deadline for a run's reads, whatever the server does, and Ctrl-C.

A client's timeout bounds a request, not a read: one connect or one socket
read may wait that long, and what times out is tried again, so a server
that never answers, or sends a byte every 2 s, outlasts any such timeout.
A run's reads get one deadline in all, `Budget`, that holds whatever the
server does:

  * the reads run on daemon threads (`Reads.start`, `each`) that the main
    thread awaits until the deadline, then leaves: a read blocked in a socket
    is never waited for (a Ctrl-C did nothing while a pool's threads were
    joined), and what a stopped read made is taken back from the main
    thread (`on_stop`: doctor/tidy.py's cache);
  * a read checks its budget (`Budget.check`) before each request and each
    chunk of an answer, and gives a request no longer than the time left:
    the hooks of huggingface_hub's session do it for the hub's reads
    (hubclient.py), postflight/server.py's reads of a running vLLM between
    the chunks it reads (session.body);
  * what a read last asked (`asked`) is what the message names when the
    time is up, and what the main thread's notice names when it waits;
  * SIGTERM during the reads is a Ctrl-C: exit 130, what they made taken
    back.

A `Kind` says which reads they are in its messages (the hub's, a server's),
the variable that sets their limit and the error the deadline raises;
`Budget.pause` stops the clock (`--interval` waits between two reads).
"""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from ..errors import VpatchError

NOTICE = 3.0  # seconds of reads before `say` tells what is awaited
GRACE = 1.0  # seconds a stopped read gets to take back what it made itself
SHOWN = 3  # reads the notice names; it counts the rest

T = TypeVar("T")
R = TypeVar("R")

_here = threading.local()  # .budget and .job: the reads a thread belongs to


@dataclass(frozen=True)
class Kind:
    """What a run's reads are, as its messages name them, and the error
    the deadline raises."""

    reads: str  # "hub reads": the time doctor gives its <reads>
    what: str  # "the hub": waiting for <what>
    variable: str  # the environment variable that sets the limit
    advice: str  # what to do when the time is up
    error: type[VpatchError]
    # loggers silenced while the reads run (huggingface_hub's: a dozen retry
    # warnings came before the error line): the one line says what failed
    silenced: tuple[str, ...] = ()


class Budget:
    """The deadline of one run's reads; whether they were stopped; the last
    request of each read; what to take back if they are."""

    def __init__(self, seconds: float, kind: Kind) -> None:
        self.seconds = seconds
        self.kind = kind
        self.start: float | None = None  # the first read's start (`begin`)
        self.stopped = threading.Event()
        self.expired = False
        # read -> its last request, the status of the answer (None: none yet), whether
        # the answer's body has ended
        self.asked: dict[str, tuple[str, int | None, bool]] = {}
        self._undo: dict[int, Callable[[], None]] = {}
        self._lock = threading.Lock()
        self._levels: dict[str, int] = {}  # the silenced loggers' own levels

    def begin(self) -> None:
        """A read begins (its client imported, no request made yet): the
        clock starts with the first, and the kind's loggers are silenced
        (here: importing huggingface_hub sets its level) until `end`."""
        with self._lock:
            if self.start is None:
                self.start = time.monotonic()
                for name in self.kind.silenced:
                    log = logging.getLogger(name)
                    self._levels[name] = log.level
                    log.setLevel(logging.CRITICAL + 1)

    def end(self) -> None:
        """The silenced loggers as they were."""
        with self._lock:
            for name, level in self._levels.items():
                logging.getLogger(name).setLevel(level)
            self._levels = {}

    def left(self) -> float:
        return self.seconds - self.elapsed()

    def elapsed(self) -> float:
        return 0.0 if self.start is None else time.monotonic() - self.start

    def check(self) -> None:
        """In a read: raise if it must not go on (Expired past the deadline,
        KeyboardInterrupt after Ctrl-C)."""
        if not self.stopped.is_set() and self.left() <= 0:
            self.stop(expired=True)
        if self.stopped.is_set():
            if self.expired:
                raise self.kind.error(self.message(job()))
            raise KeyboardInterrupt

    def stop(self, expired: bool = False) -> None:
        self.expired = self.expired or expired
        self.stopped.set()

    def message(self, read: str) -> str:
        """What timed out, and after how long."""
        k = self.kind
        return (
            f"{read or k.what}: not read within {self.seconds:g}s, the time doctor gives its "
            f"{k.reads} in all ({k.variable}=SECONDS sets it): {self.doing(read)}; {k.advice}"
        )

    @contextlib.contextmanager
    def pause(self) -> Iterator[None]:
        """The clock stands still for the block (no read runs in it: the wait
        of `--interval` between two reads is no read's time)."""
        t0 = time.monotonic()
        try:
            yield
        finally:
            with self._lock:
                if self.start is not None:
                    self.start += time.monotonic() - t0

    def doing(self, read: str) -> str:
        """Where a read is: its last request, and what came of it."""
        request, status, ended = self.asked.get(read, ("", None, False))
        if not request:
            return "no request made yet"
        if status is None:
            return f"no answer to {request}"
        if not ended:
            return f"the answer to {request} ({status}) had not ended"
        return f"the last request, {request}, was answered {status}"

    def take_back(self) -> None:
        """Run the undo of every read that was stopped midway."""
        with self._lock:
            undo, self._undo = list(self._undo.values()), {}
        for u in undo:
            u()


def current() -> Budget | None:
    """The budget of the reads this thread belongs to."""
    b: Budget | None = getattr(_here, "budget", None)
    return b


def job() -> str:
    """The name of the read this thread does ("" when none is named)."""
    name: str = getattr(_here, "job", "")
    return name


@contextlib.contextmanager
def reading(budget: Budget, name: str) -> Iterator[None]:
    """The calling thread is read `name` under `budget` for the block (a read
    called on its own: a library call, a test; hubclient.bounded)."""
    _here.budget, _here.job = budget, name
    try:
        yield
    finally:
        _here.budget = None


def asked(request: str, status: int | None = None, ended: bool = False) -> None:
    """In a read: its last request (`GET URL`), the status of the answer
    (None: none yet) and whether its body has ended, for the message that
    says where a read was when the time was up (hub reads: the hooks)."""
    b = current()
    if b is not None:
        b.asked[job()] = (request, status, ended)


@contextlib.contextmanager
def on_stop(undo: Callable[[], None]) -> Iterator[None]:
    """While the block runs in a read: `undo` is what the main thread runs if
    the reads are stopped (the read itself may be stuck in a socket)."""
    b = current()
    if b is None:
        yield
        return
    key = id(undo)
    with b._lock:
        b._undo[key] = undo
    try:
        yield
    finally:
        with b._lock:
            b._undo.pop(key, None)


class Job(Generic[R]):
    """One read on a daemon thread."""

    def __init__(
        self, name: str, budget: Budget | None, fn: Callable[..., R], args: tuple[Any, ...]
    ) -> None:
        self.name = name
        self.bounded = budget is not None
        self.done = threading.Event()
        self.value: R | None = None
        self.error: BaseException | None = None

        def run() -> None:
            _here.budget, _here.job = budget, name
            try:
                self.value = fn(*args)
            except BaseException as e:  # said by the thread that awaits it
                self.error = e
            finally:
                self.done.set()

        threading.Thread(target=run, name=f"vpatch doctor: {name}", daemon=True).start()


class Reads:
    """A run's reads: `start` them, then `result` each, from the main
    thread. Leaving the block with an error (a read's, the deadline's,
    Ctrl-C's) stops the reads still running and takes back what they made."""

    def __init__(
        self, seconds: float, say: Callable[[str], None] = lambda _: None, *, kind: Kind
    ) -> None:
        self.budget = Budget(seconds, kind)
        self.say = say
        self.jobs: list[Job[Any]] = []
        self._said = False
        self._stack = contextlib.ExitStack()

    def __enter__(self) -> Reads:
        self._stack.enter_context(_sigterm_interrupts())
        self._stack.callback(self.budget.end)
        return self

    def __exit__(self, kind: object, *_: object) -> None:
        try:
            if kind is not None or not all(j.done.is_set() for j in self.jobs):
                self.budget.stop()
                with _signals_held():  # a second Ctrl-C does not cut the taking back
                    until = time.monotonic() + GRACE
                    for j in self.jobs:
                        j.done.wait(max(0.0, until - time.monotonic()))
                    self.budget.take_back()
        finally:
            self._stack.close()

    def start(self, name: str, fn: Callable[..., R], *args: Any, bounded: bool = True) -> Job[R]:
        """fn(*args) on a thread of its own; `bounded`: a read, under the
        deadline (else: awaited as long as it takes, Ctrl-C aside)."""
        job = Job(name, self.budget if bounded else None, fn, args)
        self.jobs.append(job)
        return job

    def result(self, job: Job[R]) -> R:
        """What the job returned, or its error; Expired when the deadline
        passes first."""
        b = self.budget
        while not job.done.is_set():
            left, notice = b.left(), NOTICE - b.elapsed()
            if not job.bounded:
                job.done.wait()
            elif left <= 0:
                b.stop(expired=True)
                break
            elif self._said or notice > 0:
                job.done.wait(left if self._said else min(left, notice))
            else:
                self._said = True
                self.say(self._awaited())
        if job.bounded and b.expired and not (job.done.is_set() and job.error is None):
            raise b.kind.error(b.message(job.name))
        if job.error is not None:
            raise job.error
        return job.value  # type: ignore[return-value]

    def _awaited(self) -> str:
        running = [j.name for j in self.jobs if j.bounded and not j.done.is_set()]
        doing = "; ".join(f"{n}: {self.budget.doing(n)}" for n in running[:SHOWN])
        if len(running) > SHOWN:  # a fleet of a thousand servers: one line still
            doing += f"; and {len(running) - SHOWN} more"
        k = self.budget.kind
        return (
            f"waiting for {k.what} ({doing}); gives up {self.budget.seconds:g}s after it "
            f"started ({k.variable}=SECONDS sets the limit)"
        )


def each(fn: Callable[[T], R], items: Sequence[T], workers: int = 8) -> list[R]:
    """fn over items on up to `workers` daemon threads of the calling read:
    the results in order; the first failure (in order) is raised, and no
    item after it is started."""
    budget, name = current(), job()
    out: list[Any] = [None] * len(items)
    errors: list[BaseException | None] = [None] * len(items)
    done = [threading.Event() for _ in items]
    todo = iter(range(len(items)))
    lock, failed = threading.Lock(), threading.Event()

    def work() -> None:
        _here.budget, _here.job = budget, name
        while not failed.is_set():
            with lock:
                i = next(todo, None)
            if i is None:
                return
            try:
                out[i] = fn(items[i])
            except BaseException as e:
                errors[i] = e
                failed.set()
            finally:
                done[i].set()

    for _ in range(min(workers, len(items))):
        threading.Thread(target=work, name=f"vpatch doctor: {name}", daemon=True).start()
    for i, d in enumerate(done):
        d.wait()
        if errors[i] is not None:
            raise errors[i]  # type: ignore[misc]
    return out


# -- the signals ----------------------------------------------------------------------


def _main() -> bool:
    return threading.current_thread() is threading.main_thread()


@contextlib.contextmanager
def _sigterm_interrupts() -> Iterator[None]:
    """SIGTERM is a Ctrl-C while the reads run."""
    if not _main():
        yield
        return

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


@contextlib.contextmanager
def _signals_held() -> Iterator[None]:
    """SIGINT and SIGTERM ignored for a block (the taking back, a second
    long at most: the run is ending already)."""
    if not _main():
        yield
        return
    old = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)
