"""huggingface_hub's HTTP client as doctor's hub reads use it: under one
deadline (deadline.py), with hooks on its session.

huggingface_hub bounds a request, not a read: HF_HUB_DOWNLOAD_TIMEOUT is how
long one connect or one socket read may wait, and what times out is tried
again (a HEAD of config.json five times more, 60 s each), so a hub that never
answered took 389 s, and one that sends a byte every 2 s never ended. Doctor
gives its hub reads one deadline in all, VPATCH_HUB_TIMEOUT seconds (default
DEFAULT), that holds whatever the server does (`reads`: the run's reads on
threads; `bounded`: a read called on its own):

  * every request on huggingface_hub's session (doctor's own listing and
    range reads too) passes two event hooks, added by the client factory
    doctor sets (`_install`): a read that must stop (the deadline passed, or
    Ctrl-C) makes no request and takes no byte more, and a request waits no
    longer than the time left; an answer's X-Repo-Commit must be a commit
    id before huggingface_hub makes a folder of it; a request
    huggingface_hub makes of its own (UNASKED: its agent registry) is not
    sent;
  * huggingface_hub's log is silenced while the reads run (a dozen retry
    warnings came before the error line): the one line says what failed.

The hooks do nothing on a thread that is no read of doctor's.
"""

from __future__ import annotations

import contextlib
import functools
import re
import threading
from collections.abc import Callable, Iterator
from typing import Any

from .. import settings, untrusted
from ..errors import ConfigError, NetworkError
from . import session
from .deadline import Budget, Kind, Reads, asked, current, job, reading

DEFAULT = 60.0  # seconds: a pair's dozen requests take 1-2 s on a laptop
VARIABLE = "VPATCH_HUB_TIMEOUT"
# Requests huggingface_hub makes of its own, which doctor's reads refuse:
# 2.x builds the User-Agent of each request with its agent registry, fetched
# from the endpoint (utils/_detect_agent.py: once a day, cached in HF_HOME,
# by each read thread that gets there first: the target's and the drafter's
# both). Sent, it was a request doctor does not need, a file written in
# HF_HOME, and the request a deadline could name as the one awaited.
UNASKED = ("/api/agent-harnesses",)
COMMIT = re.compile(r"^[0-9a-f]{40}$")  # a commit id, as the hub gives it


def limit() -> float:
    """VPATCH_HUB_TIMEOUT (seconds), else DEFAULT."""
    return settings.seconds(VARIABLE, DEFAULT)


class Expired(ConfigError):
    """The deadline passed: like a hub that cannot be reached, exit 2."""


HUB = Kind(
    "hub reads",
    "the hub",
    VARIABLE,
    "try again, or use --offline with the files in the cache",
    Expired,
    ("huggingface_hub",),
)


def reads(seconds: float | None = None, say: Callable[[str], None] = lambda _: None) -> Reads:
    """A run's hub reads (deadline.Reads), within `seconds` (None: limit())."""
    return Reads(limit() if seconds is None else seconds, say, kind=HUB)


@contextlib.contextmanager
def bounded(seconds: float | None = None, name: str = "") -> Iterator[Budget]:
    """The budget of this thread's hub reads, the hooks installed: its own,
    or a new one of `seconds` (None: limit()) for a read `name` called on
    its own (a library call, a test: the hooks hold the deadline, with no
    thread to leave behind)."""
    _install()
    b = current()
    if b is not None:
        b.begin()
        yield b
        return
    b = Budget(limit() if seconds is None else seconds, HUB)
    b.begin()
    try:
        with reading(b, name):
            yield b
    finally:
        b.end()


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
    asked(f"{request.method} {_shown(request.url)}")
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
    request = response.request
    commit = response.headers.get("X-Repo-Commit")
    if commit is not None and not COMMIT.match(commit):
        # huggingface_hub makes snapshots/<it>/ of it: `../..` or `/etc` is a path
        raise ConfigError(
            f"{_shown(request.url)}: not a Hugging Face hub (X-Repo-Commit {commit[:80]!r} is "
            "not a commit id)"
        )
    said = (f"{request.method} {_shown(request.url)}", response.status_code)
    asked(*said)
    what = f"{_shown(request.url)}: the answer"
    length = session.declared(response)
    response.stream = _checked(response.stream, b, job(), said, what, length)


def _checked(
    stream: Any, b: Budget, read: str, said: tuple[str, int], what: str, length: int | None
) -> Any:
    """The body, chunk by chunk, each after a check: a read that must stop
    takes no byte more (a server that sends one every 2 s never timed out).
    A body that ends short of its Content-Length, or a chunked one that
    stops, broke off: the RemoteProtocolError it raises becomes a BrokeOff,
    still one to huggingface_hub (which tries again, resuming, as it would),
    and to doctor the NetworkError any answer cut short is (broke_off())."""
    import httpx2

    class Checked(httpx2.SyncByteStream):
        elapsed = property(lambda self: getattr(stream, "elapsed", None))

        def __iter__(self) -> Iterator[bytes]:
            got = 0
            try:
                for chunk in stream:
                    b.check()
                    got += len(chunk)
                    yield chunk
            except httpx2.RemoteProtocolError as e:
                b.check()  # a read that had to stop: its own error
                raise _broke_off_type()(str(e), session.broke_off(what, got, length)) from e
            b.asked[read] = (*said, True)

        def close(self) -> None:
            stream.close()

    return Checked()


@functools.cache
def _broke_off_type() -> type[Any]:
    """BrokeOff, made on first use (building the parser imports no library)."""
    import httpx2

    class BrokeOff(httpx2.RemoteProtocolError):
        """An answer's body cut short, and the error doctor says of it."""

        def __init__(self, message: str, error: NetworkError) -> None:
            super().__init__(message)
            self.error = error

    return BrokeOff


def broke_off(e: BaseException) -> NetworkError | None:
    """The NetworkError of an answer that broke off, when `e` is that
    BrokeOff or was raised from it (huggingface_hub may wrap it); else None."""
    seen: BaseException | None = e
    for _ in range(8):  # a short chain: an error, the one it was raised from
        if seen is None:
            return None
        error = getattr(seen, "error", None)
        if isinstance(seen, _broke_off_type()) and isinstance(error, NetworkError):
            return error
        seen = seen.__cause__ or seen.__context__
    return None


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
