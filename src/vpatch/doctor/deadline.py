"""One deadline for doctor's hub reads, and Ctrl-C.

huggingface_hub bounds a request, not a read: HF_HUB_DOWNLOAD_TIMEOUT is how
long one connect or one socket read may wait, and what times out is tried
again (a HEAD of config.json five times more, 60 s each), so a hub that never
answered took 389 s, and one that sends a byte every 2 s never ended. Doctor
gives its hub reads one deadline in all, VPATCH_HUB_TIMEOUT seconds (default
DEFAULT), that holds whatever the server does:

  * the reads run on daemon threads (`Reads.start`, `each`) that the main
    thread awaits until the deadline, then leaves: a read blocked in a socket
    is never waited for (a Ctrl-C did nothing while a pool's threads were
    joined), and what a stopped read made in the cache is taken back from
    the main thread (`on_stop`, tidy.py);
  * every request on huggingface_hub's session (doctor's own listing and
    range reads too) passes two event hooks, added by the client factory
    doctor sets (`_install`): a read that must stop (the deadline passed, or
    Ctrl-C) makes no request and takes no byte more, and a request waits no
    longer than the time left; an answer's X-Repo-Commit must be a commit
    id before huggingface_hub makes a folder of it; a request
    huggingface_hub makes of its own (UNASKED: its agent registry) is not
    sent;
  * SIGTERM during the reads is a Ctrl-C: exit 130, the cache as it was
    (huggingface_hub's blobs/*.incomplete were left behind);
  * huggingface_hub's log is silenced while the reads run (a dozen retry
    warnings came before the error line): the one line says what failed.

`vpatch doctor --server` reads a running vLLM with the same machinery under
a Kind of its own (postflight/server.py: its variable, its words, a
NetworkError when the time is up); `Budget.pause` stops its clock while
`--interval` waits between two reads.
"""

from __future__ import annotations

import contextlib
import logging
import re
import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from .. import settings, untrusted
from ..errors import ConfigError, VpatchError

DEFAULT = 60.0  # seconds: a pair's dozen requests take 1-2 s on a laptop
NOTICE = 3.0  # seconds of hub reads before `say` tells what is awaited
GRACE = 1.0  # seconds a stopped read gets to take back what it made itself
SHOWN = 3  # reads the notice names; it counts the rest
# Requests huggingface_hub makes of its own, which doctor's reads refuse:
# 2.x builds the User-Agent of each request with its agent registry, fetched
# from the endpoint (utils/_detect_agent.py: once a day, cached in HF_HOME,
# by each read thread that gets there first: the target's and the drafter's
# both). Sent, it was a request doctor does not need, a file written in
# HF_HOME, and the request a deadline could name as the one awaited.
UNASKED = ("/api/agent-harnesses",)
VARIABLE = "VPATCH_HUB_TIMEOUT"
COMMIT = re.compile(r"^[0-9a-f]{40}$")  # a commit id, as the hub gives it

T = TypeVar("T")
R = TypeVar("R")

_here = threading.local()  # .budget and .job: the reads a thread belongs to


def limit() -> float:
    """VPATCH_HUB_TIMEOUT (seconds), else DEFAULT."""
    return settings.seconds(VARIABLE, DEFAULT)


class Expired(ConfigError):
    """The deadline passed: like a hub that cannot be reached, exit 2."""


@dataclass(frozen=True)
class Kind:
    """What a run's reads are, as its messages name them, and the error
    the deadline raises."""

    reads: str  # "hub reads": the time doctor gives its <reads>
    what: str  # "the hub": waiting for <what>
    variable: str  # the environment variable that sets the limit
    advice: str  # what to do when the time is up
    error: type[VpatchError]


HUB = Kind(
    "hub reads",
    "the hub",
    VARIABLE,
    "try again, or use --offline with the files in the cache",
    Expired,
)


class Budget:
    """The deadline of one run's hub reads; whether they were stopped; the
    last request of each read; what to take back if they are."""

    def __init__(self, seconds: float, kind: Kind = HUB) -> None:
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
        self._log_level: int | None = None

    def begin(self) -> None:
        """A read begins (huggingface_hub imported, no request made yet): the
        clock starts with the first, and huggingface_hub's log is silenced
        (here: importing it sets its level) until `end`."""
        with self._lock:
            if self.start is None:
                self.start = time.monotonic()
                log = logging.getLogger("huggingface_hub")
                self._log_level = log.level
                log.setLevel(logging.CRITICAL + 1)

    def end(self) -> None:
        """huggingface_hub's log as it was."""
        with self._lock:
            if self._log_level is not None:
                logging.getLogger("huggingface_hub").setLevel(self._log_level)
                self._log_level = None

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
                raise self.kind.error(self.message(getattr(_here, "job", "")))
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


def asked(request: str, status: int | None = None, ended: bool = False) -> None:
    """In a read: its last request (`GET URL`), the status of the answer
    (None: none yet) and whether its body has ended, for the message that
    says where a read was when the time was up (hub reads: the hooks)."""
    b = current()
    if b is not None:
        b.asked[getattr(_here, "job", "")] = (request, status, ended)


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


@contextlib.contextmanager
def bounded(seconds: float | None = None, name: str = "") -> Iterator[Budget]:
    """The budget of this thread's reads: its own, or a new one of `seconds`
    (None: limit()) for a read `name` called on its own (a library call, a
    test: the hooks hold the deadline, with no thread to leave behind)."""
    _install()
    b = current()
    if b is not None:
        b.begin()
        yield b
        return
    b = Budget(limit() if seconds is None else seconds)
    b.begin()
    _here.budget, _here.job = b, name
    try:
        yield b
    finally:
        _here.budget = None
        b.end()


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
    """A run's hub reads: `start` them, then `result` each, from the main
    thread. Leaving the block with an error (a read's, the deadline's,
    Ctrl-C's) stops the reads still running and takes back what they made."""

    def __init__(
        self,
        seconds: float | None = None,
        say: Callable[[str], None] = lambda _: None,
        kind: Kind = HUB,
    ):
        self.budget = Budget(limit() if seconds is None else seconds, kind)
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
        """fn(*args) on a thread of its own; `bounded`: a hub read, under the
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
    budget, job = current(), getattr(_here, "job", "")
    out: list[Any] = [None] * len(items)
    errors: list[BaseException | None] = [None] * len(items)
    done = [threading.Event() for _ in items]
    todo = iter(range(len(items)))
    lock, failed = threading.Lock(), threading.Event()

    def work() -> None:
        _here.budget, _here.job = budget, job
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
        threading.Thread(target=work, name=f"vpatch doctor: {job}", daemon=True).start()
    for i, d in enumerate(done):
        d.wait()
        if errors[i] is not None:
            raise errors[i]  # type: ignore[misc]
    return out


# -- huggingface_hub's session, its log, the signals ------------------------------------


class Unasked(ConfigError):
    """A request huggingface_hub makes of its own that doctor's reads do not
    need (UNASKED): refused before it is sent. huggingface_hub makes it
    best-effort and takes any failure of it as "none" (so does doctor)."""


def _on_request(request: Any) -> None:
    b = current()
    if b is None:
        return
    b.check()
    if str(request.url.path).endswith(UNASKED):
        raise Unasked(f"{_shown(request.url)}: not a request doctor makes")
    b.asked[getattr(_here, "job", "")] = (f"{request.method} {_shown(request.url)}", None, False)
    left = max(b.left(), 0.001)
    given = request.extensions.get("timeout") or {}
    request.extensions["timeout"] = {
        k: left if given.get(k) is None else min(given[k], left)
        for k in ("connect", "read", "write", "pool")
    }


def _on_response(response: Any) -> None:
    b = current()
    if b is None:
        return
    b.check()
    job, request = getattr(_here, "job", ""), response.request
    commit = response.headers.get("X-Repo-Commit")
    if commit is not None and not COMMIT.match(commit):
        # huggingface_hub makes snapshots/<it>/ of it: `../..` or `/etc` is a path
        raise ConfigError(
            f"{_shown(request.url)}: not a Hugging Face hub (X-Repo-Commit {commit[:80]!r} is "
            "not a commit id)"
        )
    said = (f"{request.method} {_shown(request.url)}", response.status_code)
    b.asked[job] = (*said, False)
    response.stream = _checked(response.stream, b, job, said)


def _checked(stream: Any, b: Budget, job: str, said: tuple[str, int]) -> Any:
    """The body, chunk by chunk, each after a check: a read that must stop
    takes no byte more (a server that sends one every 2 s never timed out)."""
    import httpx2

    class Checked(httpx2.SyncByteStream):
        elapsed = property(lambda self: getattr(stream, "elapsed", None))

        def __iter__(self) -> Iterator[bytes]:
            for chunk in stream:
                b.check()
                yield chunk
            b.asked[job] = (*said, True)

        def close(self) -> None:
            stream.close()

    return Checked()


def _shown(url: Any) -> str:
    """A URL as a message shows it: no query (a CDN's signature), no user
    or password (HF_ENDPOINT's)."""
    return untrusted.url(str(url).split("?", 1)[0])


_installed = threading.Lock()
_INSTALLED: list[bool] = []


def _install() -> None:
    """huggingface_hub's client factory, with doctor's two hooks: its own
    client, so the hooks also come with each new session (huggingface_hub
    closes it after a connect error). The hooks do nothing on a thread that
    is no read of doctor's. Where huggingface_hub has no such factory, the
    main thread's wait still holds the deadline."""
    with _installed:
        if _INSTALLED:
            return
        _INSTALLED.append(True)
        from huggingface_hub import set_client_factory

        try:
            from huggingface_hub.utils._http import default_client_factory
        except ImportError:
            return

        def factory() -> Any:
            client = default_client_factory()
            client.event_hooks["request"].append(_on_request)
            client.event_hooks["response"].append(_on_response)
            return client

        set_client_factory(factory)


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
