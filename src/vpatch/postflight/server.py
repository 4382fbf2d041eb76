"""Reading a running vLLM OpenAI server (`vpatch doctor --server URL`): its
release, the models it serves and its speculative-decoding counters, per
model name and engine. vLLM is not imported; three GET requests a read.

What the server answers, read from vLLM's source (0.17.1, 0.26.0, 0.34.0
alike; names and labels unchanged between them):

  * `/version`: `{"version": VLLM_VERSION}`
    (entrypoints/serve/instrumentator/basic.py `show_version`);
  * `/v1/models`: `{"data": [ModelCard]}`, a card per served name: `id`,
    `root` (the serve command's MODEL), `max_model_len`
    (entrypoints/openai/models/api_router.py); behind `vllm serve --api-key`
    only /v1 paths ask for the key (the authentication middleware), so
    then the models are not read and the rest is;
  * `/metrics`: prometheus_client's text format
    (entrypoints/serve/instrumentator/metrics.py), read into counters per
    model name and engine by metrics.py, which names what it reads.

The reads have the limits of doctor's hub reads (network/deadline.py): every
read of a run ends within one deadline, VPATCH_SERVER_TIMEOUT seconds (DEFAULT),
whatever the server does (accept and never answer, trickle a byte a
second), and a NetworkError (exit 3) says what was awaited; its clock
stands still while `--interval` waits. Ctrl-C and SIGTERM end the run (130).
Nothing is written. Only http and https URLs, read on a client of its own
(network/session.py's, with no credential: the package index's are not the
server's); no redirect is followed (the server itself is read, not where it
points: vLLM answers these three paths itself); an answer is read no further
than MOST[path] bytes. A server that
cannot be reached is a NetworkError; one that answers what vLLM does not
(no `/version`, not vLLM's metrics, a malformed page, a redirect, no
speculative-decoding counters) a ConfigError (exit 2)."""

from __future__ import annotations

import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

from .. import jsontext, settings, untrusted
from ..errors import ConfigError, NetworkError, VpatchError
from ..network import deadline, session
from .metrics import Counters, parse

DEFAULT = 30.0  # seconds for a run's reads: a healthy server answers each in milliseconds
VARIABLE = "VPATCH_SERVER_TIMEOUT"
# The most bytes read of each answer. /version is ~30 bytes, a model card ~300;
# the metrics page grows with engines and LoRA adapters (vLLM's histograms, ~20
# buckets each, per engine): tens of KB an engine.
MOST = {"/version": 1 << 16, "/v1/models": 1 << 22, "/metrics": 1 << 25}
ACCEPT = {
    "/version": "application/json",
    "/v1/models": "application/json",
    # the text format (prometheus_client's generate_latest): what vLLM's /metrics
    # route answers; never OpenMetrics, whose names are escaped otherwise
    "/metrics": "text/plain; version=0.0.4",
}


class Unanswered(NetworkError):
    """The server's answers were not all in before the deadline: exit 3."""


SERVER = deadline.Kind(
    "server reads",
    "the server",
    VARIABLE,
    "a server that answers nothing may be overloaded or stopped: try again, or set a longer limit",
    Unanswered,
)


def limit() -> float:
    """VPATCH_SERVER_TIMEOUT (seconds), else DEFAULT."""
    return settings.seconds(VARIABLE, DEFAULT)


@cache
def _opener() -> urllib.request.OpenerDirector:
    """The server's client, built once: no credential, no redirect followed."""
    return session.opener(session.Unfollowed())


# -- what a read gives ------------------------------------------------------------


@dataclass(frozen=True)
class Card:
    """A model the server serves (/v1/models)."""

    id: str
    root: str | None = None  # the serve command's MODEL
    max_model_len: int | None = None


@dataclass(frozen=True)
class Reading:
    """One read of a server."""

    url: str  # the server, as doctor names it (scheme://host:port[/prefix])
    version: str  # /version
    cards: tuple[Card, ...]  # /v1/models (empty: not read, `models_unread` says why)
    engines: Mapping[tuple[str, str], Counters]  # (model_name, engine) -> its counters
    at: float = 0.0  # time.monotonic() when /metrics was read
    models_unread: str = ""  # why /v1/models was not read ("" when it was)

    def models(self) -> dict[str, Counters]:
        """model name -> the sum of its engines' counters."""
        out: dict[str, Counters] = {}
        for (model, _), c in sorted(self.engines.items()):
            out[model] = out[model] + c if model in out else c
        return out

    def card(self, model: str) -> Card | None:
        return next((c for c in self.cards if c.id == model), None)

    def engine_count(self, model: str) -> int:
        return sum(m == model for m, _ in self.engines)


@dataclass(frozen=True)
class Watch:
    """A server read once, or twice `interval` seconds apart."""

    first: Reading
    second: Reading | None = None
    interval: float | None = None

    @property
    def last(self) -> Reading:
        return self.second or self.first


# -- the URL ------------------------------------------------------------------------


def base(url: str) -> str:
    """The server's base URL as given (`http://host:8000`, a path prefix
    kept; a trailing /v1, an OpenAI client's base URL, dropped: vLLM's
    /version and /metrics are beside /v1, not in it). Only http and https,
    no user or password, query or fragment: bad input, exit 2."""
    shown = settings.shown(untrusted.url(url), 80)
    try:
        u = urllib.parse.urlsplit(url.strip())
        host, port = u.hostname, u.port  # port: ValueError when out of range or no number
    except ValueError:
        raise ConfigError(f"--server {shown}: not a URL") from None
    if u.scheme not in ("http", "https"):
        raise ConfigError(f"--server {shown}: doctor reads http:// and https:// URLs only")
    if not host:
        raise ConfigError(f"--server {shown}: no host")
    if u.username is not None or u.password is not None:
        raise ConfigError(f"--server {shown}: a user or password in the URL is not sent; drop it")
    if u.query or u.fragment:
        raise ConfigError(f"--server {shown}: give the server's address, without ?query or #part")
    if any(ord(ch) < 33 or ord(ch) == 127 for ch in url.strip()):
        raise ConfigError(f"--server {shown}: a URL has no spaces or control characters")
    del port  # read for its check only
    path = u.path.rstrip("/").removesuffix("/v1").rstrip("/")
    return f"{u.scheme}://{u.netloc}{path}"


# -- reading ----------------------------------------------------------------------


def watch(
    urls: Iterable[str],
    interval: float | None = None,
    say: Callable[[str], None] = lambda _: None,
    seconds: float | None = None,
) -> list[Watch]:
    """Each server read once, or, with `interval`, twice that many seconds
    apart (the window), in the order given; every read under one deadline
    of `seconds` (None: limit()), on daemon threads the main thread leaves
    at the deadline or on Ctrl-C (deadline.Reads). The first server's error
    comes first."""
    bases = list(dict.fromkeys(base(u) for u in urls))  # a server named twice is read once
    if not bases:
        raise ConfigError("--server: give the URL of at least one server")
    with deadline.Reads(limit() if seconds is None else seconds, say, kind=SERVER) as reads:
        reads.budget.begin()
        first = _all(reads, bases)
        if interval is None:
            return [Watch(r) for r in first]
        say(f"reading again in {interval:g}s (--interval)")
        with reads.budget.pause():
            time.sleep(interval)
        second = _all(reads, bases)
    return [Watch(a, b, interval) for a, b in zip(first, second, strict=True)]


def read(url: str, seconds: float | None = None) -> Reading:
    """One server read once: `watch([url])`'s reading."""
    return watch([url], seconds=seconds)[0].first


def _all(reads: deadline.Reads, bases: list[str]) -> list[Reading]:
    jobs = [reads.start(b, _read, b) for b in bases]
    return [reads.result(j) for j in jobs]


def _read(url: str) -> Reading:
    """In a read's thread: the server at `url`, read (a ConfigError or
    NetworkError that begins with it)."""
    version = _version(url, _get(url, "/version"))
    cards: tuple[Card, ...] = ()
    unread = ""
    try:
        body = _get(url, "/v1/models")
    except _Guarded as e:
        unread = str(e)
    else:
        cards = _cards(url, jsontext.loads(body, f"{url}/v1/models"))
    page = _get(url, "/metrics")
    at = time.monotonic()
    return Reading(url, version, cards, parse(page, f"{url}/metrics", version), at, unread)


class _Guarded(ConfigError):
    """/v1/models asks for the API key (`vllm serve --api-key`)."""


def _get(url: str, path: str) -> bytes:
    """The body of GET url+path, at most MOST[path] bytes, within the run's
    deadline (each chunk read after a check: a trickle does not outlast it)."""
    full = url + path
    b = deadline.current()
    said = f"GET {full}"
    deadline.asked(said)
    req = urllib.request.Request(
        full,
        headers={
            "Accept": ACCEPT[path],
            "Accept-Encoding": "identity",
            "User-Agent": "vpatch-doctor",
        },
    )
    left = b.left() if b else limit()
    try:
        resp = _opener().open(req, timeout=max(left, 0.001))
    except urllib.error.HTTPError as e:
        location = e.headers.get("Location", "") if e.headers else ""
        e.close()
        deadline.asked(said, e.code, True)
        raise _refused(url, path, e.code, location) from None
    except session.HTTP_ERRORS as e:
        raise _unreached(url, path, e, b) from None
    with resp:
        deadline.asked(said, resp.status)
        coding = resp.headers.get("Content-Encoding", "identity").strip().lower()
        if coding not in ("", "identity"):
            raise ConfigError(
                f"{full}: answered in {settings.shown(coding)} encoding, which doctor did not "
                "ask for: not vLLM's answer"
            )
        most = MOST[path]
        try:
            body = session.body(
                resp,
                most,
                f"{full}: the answer",
                lambda length: _huge(full, most, length),
                b.check if b is not None else lambda: None,
            )
        except session.HTTP_ERRORS as e:
            raise _unreached(url, path, e, b, midway=True) from None
        deadline.asked(said, resp.status, True)
    return body


def _refused(url: str, path: str, code: int, location: str) -> VpatchError:
    full = url + path
    if 300 <= code < 400:
        where = f" to {settings.shown(untrusted.url(location), 120)}" if location else ""
        return ConfigError(
            f"{full}: answered {code}, a redirect{where}; doctor follows none (vLLM answers "
            "this path itself): give the server's own address"
        )
    if path == "/v1/models" and code in (401, 403):
        return _Guarded(f"asks for an API key ({code}; `vllm serve --api-key`)")
    if code >= 500:
        return NetworkError(f"{full}: the server answered {code}; try again")
    return ConfigError(f"{full}: answered {code}: {_not_vllm(url)}")


def _not_vllm(url: str) -> str:
    return (
        f"{url} is not a vLLM OpenAI server (`vllm serve`: /version, /v1/models and /metrics); "
        "give its address, http://HOST:PORT"
    )


def _unreached(
    url: str, path: str, e: BaseException, b: deadline.Budget | None, midway: bool = False
) -> VpatchError:
    reason = getattr(e, "reason", None) or e
    if isinstance(reason, TimeoutError) and b is not None:
        # the socket waited as long as the deadline left: that is the deadline's error
        b.stop(expired=True)
        return b.kind.error(b.message(url))
    if b is not None and b.stopped.is_set():
        b.check()  # the run is over: its own error (the deadline's, or Ctrl-C)
    if midway:
        return NetworkError(f"{url}{path}: the answer broke off ({_why(reason)}); try again")
    if isinstance(reason, ConnectionRefusedError):
        return NetworkError(
            f"cannot reach a serving engine at {url}: connection refused (no server there, or "
            "one that has not started: vLLM binds its port at start and listens once its "
            "engine is up; its log says why it stopped)"
        )
    return NetworkError(f"cannot reach a serving engine at {url}: {_why(reason)}")


def _why(reason: object) -> str:
    text = str(reason).strip().splitlines()[0] if str(reason).strip() else ""
    return settings.shown(text, 160).strip("'") if text else type(reason).__name__


def _huge(full: str, most: int, length: int | None = None) -> ConfigError:
    """An answer longer than `most` (its Content-Length, or None: it said
    none and was read that far)."""
    said = f"an answer of {length} bytes, more than" if length else "an answer longer than"
    return ConfigError(
        f"{full}: {said} the {session.size(most)} doctor reads of it: not vLLM's answer"
    )


def _version(url: str, body: bytes) -> str:
    try:
        value = jsontext.loads(body, f"{url}/version")
    except ConfigError as e:
        raise ConfigError(f"{e}: {_not_vllm(url)}") from None
    v = value.get("version") if isinstance(value, dict) else None
    if not isinstance(v, str) or not v.strip() or len(v) > settings.WIDTH:
        raise ConfigError(f"{url}/version: no vLLM version in the answer: {_not_vllm(url)}")
    return v.strip()


def _cards(url: str, value: Any) -> tuple[Card, ...]:
    data = value.get("data") if isinstance(value, dict) else None
    where = f"{url}/v1/models"
    if not isinstance(data, list):
        raise ConfigError(f"{where}: no list of models (`data`): {_not_vllm(url)}")
    out = []
    for c in data:
        if not isinstance(c, dict) or not isinstance(c.get("id"), str):
            raise ConfigError(f"{where}: a model without an id: {_not_vllm(url)}")
        root = c.get("root") if isinstance(c.get("root"), str) else None
        out.append(Card(c["id"], root, _length(c.get("max_model_len"))))
    return tuple(out)


def _length(value: object) -> int | None:
    """A card's max_model_len: a whole number as doctor reads one
    (settings.MOST at most), else unsaid: a float (1e999 is inf), a bool,
    text, or 400 digits to print."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= settings.MOST:
        return value
    return None


__all__ = [
    "DEFAULT",
    "VARIABLE",
    "Card",
    "Reading",
    "Unanswered",
    "Watch",
    "base",
    "limit",
    "read",
    "watch",
]
