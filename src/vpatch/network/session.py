"""vpatch's HTTP client (urllib), as each reader is handed it, and a body
read under a cap and a clock.

`opener(*handlers)` is urllib with the environment's proxies (http_proxy,
https_proxy, no_proxy), as they should be, and TLS that always checks
certificates and host names with a context of its own, so nothing that
swaps Python's default HTTPS context (PYTHONHTTPSVERIFY=0 on some
distributions, a sitecustomize) turns the checks off. A CA bundle named by
SSL_CERT_FILE / SSL_CERT_DIR is honoured: it adds trust, it does not remove
the check. Beside that, each reader gets what it needs and nothing more:
the package index its credentials (auth.Credentials, sources/index.py), a
running vLLM server none and no redirect followed (Unfollowed,
postflight/server.py).

`body()` reads an answer a chunk at a time (read1: what one read brings, so
a trickle is seen), with the reader's check after each read (its deadline),
no further than the reader's cap, and refuses an answer that stops short of
the Content-Length it declared: http.client's read1 and read(n) end such a
body as if it were whole (a chunked body cut short raises IncompleteRead),
so without the check a page cut short was read as broken JSON, or a
download as a hash mismatch.
"""

from __future__ import annotations

import http.client
import ssl
import urllib.request
from collections.abc import Callable
from typing import Any

from ..errors import NetworkError, VpatchError

CHUNK = 1 << 16  # bytes asked of one read

# what a request can raise besides HTTPError: refused, timed out, reset (OSError,
# URLError), a broken answer (HTTPException), a URL urllib cannot use (ValueError)
HTTP_ERRORS = (OSError, http.client.HTTPException, ValueError)


def opener(*handlers: urllib.request.BaseHandler) -> urllib.request.OpenerDirector:
    """urllib with the environment's proxies and certificate checks that
    cannot be turned off (see the module docstring), and `handlers`: the
    reader's own (its credentials, its redirect rule). Building one makes a
    TLS context (a few ms): a reader builds its own once."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = True
    ctx.verify_mode = ssl.CERT_REQUIRED
    return urllib.request.build_opener(urllib.request.HTTPSHandler(context=ctx), *handlers)


class Unfollowed(urllib.request.HTTPRedirectHandler):
    """No request for a redirect: urllib then raises the 3xx as an HTTPError
    with its status and Location (a reader that reads only the server it
    was given)."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def size(n: int) -> str:
    """A cap as messages say it: 16 MiB, 64 KiB."""
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n >> 10} KiB"


def declared(resp: Any) -> int | None:
    """The Content-Length an answer declared, when it is a number."""
    length = (resp.headers.get("Content-Length") or "").strip()
    return int(length) if length.isascii() and length.isdigit() else None


def whole(resp: Any, got: int, what: str) -> None:
    """The short-read check, once `got` bytes of the body came and it ended:
    fewer than its Content-Length is a NetworkError, `what` broke off."""
    length = declared(resp)
    if length is not None and got < length:
        raise broke_off(what, got, length)


def broke_off(what: str, got: int, length: int | None) -> NetworkError:
    """`what` (an answer) ended after `got` bytes, short of the Content-Length
    it declared (None: a chunked answer without its last chunk): exit 3."""
    if length is None:
        came = f"{got} bytes came, not the last chunk that ends it"
    else:
        came = f"{got} of the {length} bytes it declared came"
    return NetworkError(f"{what} broke off ({came}); try again")


def body(
    resp: Any,
    most: int,
    what: str,
    too_long: Callable[[int | None], VpatchError],
    check: Callable[[], None],
) -> bytes:
    """The body of `resp`, read a chunk at a time with `check()` after each
    read (it raises to stop: the reader's deadline), and no further than
    `most` bytes: an answer that declares more, or sends more, is
    too_long(its Content-Length, or None when it declared none that large).
    One that stops short of its Content-Length broke off (whole). A read's
    own error (reset, timed out) is the caller's."""
    length = declared(resp)
    if length is not None and length > most:
        raise too_long(length)
    chunks, got = [], 0
    while True:
        chunk = resp.read1(CHUNK)
        check()
        if not chunk:
            break
        got += len(chunk)
        if got > most:
            raise too_long(None)
        chunks.append(chunk)
    whole(resp, got, what)
    return b"".join(chunks)
