"""The package index, read through its JSON API (PEP 691).

The index URL comes from pip's own configuration, so whatever index or mirror
pip uses, vpatch uses too: PIP_INDEX_URL, then `pip config` (index-url),
then pip's built-in default.

Every HTTP request vpatch makes goes through `opener()`: proxies come from
the environment (http_proxy, https_proxy, no_proxy), as they should, but
TLS always checks certificates and host names with a context of our own,
so nothing that swaps Python's default HTTPS context (PYTHONHTTPSVERIFY=0
on some distributions, a sitecustomize) turns the checks off. A CA bundle
named by SSL_CERT_FILE / SSL_CERT_DIR is honoured: it adds trust, it does
not remove the check. Trust in what is downloaded comes from the lock's
sha256 in any case.

The index is asked as pip asks it (pip's MultiDomainBasicAuth): HTTP basic
auth with the user and password of the URL (`https://user:TOKEN@host/simple`
or `https://TOKEN@host/simple`), taken out of the URL before the request
(urllib would read `user:TOKEN@host` as the host name); a URL without them
on the index's host (a PEP 691 file URL) gets the index URL's; else those
netrc gives the host ($NETRC, else ~/.netrc). Credentials go to the host
they are for only: a redirect elsewhere does not carry them. No message
shows one (untrusted.url).

A project page is read within VPATCH_INDEX_TIMEOUT seconds (default 60) in
all, not per read, and no further than MOST_PAGE bytes: an index that
accepts and never answers, trickles a byte a minute or sends a page of
400 MB ends in a one-line NetworkError, so a scheduled `vpatch releases`
cannot hang its job or fill its memory. A page that stops short of its
Content-Length broke off: a NetworkError too, never a page read as whole.
"""

from __future__ import annotations

import base64
import http.client
import json
import netrc
import os
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from functools import cache
from typing import Any

from packaging.utils import canonicalize_name

from .. import settings, untrusted
from ..errors import NetworkError

ACCEPT = "application/vnd.pypi.simple.v1+json"
TIMEOUT = "VPATCH_INDEX_TIMEOUT"  # seconds a project page may take, in all
TIMEOUT_DEFAULT = 60.0
# the most bytes of a project page read: vLLM's is about 130 KB (312 files, 2026)
MOST_PAGE = 16 << 20
_CHUNK = 1 << 16


# what a request can raise besides HTTPError: refused, timed out, reset (OSError,
# URLError), a broken answer (HTTPException), a URL urllib cannot use (ValueError)
HTTP_ERRORS = (OSError, http.client.HTTPException, ValueError)


@cache
def opener(follow: bool = True, auth: bool = True) -> urllib.request.OpenerDirector:
    """urllib with the environment's proxies and certificate checks that
    cannot be turned off (see the module docstring), and `auth`: the
    index's credentials, as pip sends them (_Credentials). `follow` false:
    a redirect is not followed, it is an HTTPError with its 3xx status and
    Location (`vpatch doctor --server` reads only the server it was given,
    with no credential of the index's)."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = True
    ctx.verify_mode = ssl.CERT_REQUIRED
    handlers: list[urllib.request.BaseHandler] = [urllib.request.HTTPSHandler(context=ctx)]
    if not follow:
        handlers.append(_Unfollowed())
    if auth:
        handlers.append(_Credentials())
    return urllib.request.build_opener(*handlers)


class _Credentials(urllib.request.BaseHandler):
    """Basic auth as pip sends it (the module docstring), before urllib
    reads the host of the URL: the user and password of the URL, taken out
    of it; else the index URL's, for a request to the index's host; else
    netrc's for the host. Sent with the request (pip does not wait for a
    401 either), as a header no redirect carries: a redirected request asks
    here again, for its own host."""

    handler_order = 400  # before AbstractHTTPHandler's (500) sets Host from the URL

    def http_request(self, req: urllib.request.Request) -> urllib.request.Request:
        url = urllib.parse.urlsplit(req.full_url)
        given = _userinfo(url.netloc)
        if given is not None:
            req.full_url = urllib.parse.urlunsplit(
                url._replace(netloc=url.netloc.rpartition("@")[2])
            )
        found = given or _of_index(url.netloc) or _of_netrc(url.hostname or "")
        if found is not None and not req.has_header("Authorization"):
            token = base64.b64encode(f"{found[0]}:{found[1]}".encode()).decode()
            req.add_unredirected_header("Authorization", f"Basic {token}")
        return req

    https_request = http_request


def _userinfo(netloc: str) -> tuple[str, str] | None:
    """(user, password) of `user:password@host` or `user@host`, unquoted as
    pip does; None without an @."""
    if "@" not in netloc:
        return None
    user, _, password = netloc.rpartition("@")[0].partition(":")
    return urllib.parse.unquote(user), urllib.parse.unquote(password)


def _of_index(netloc: str) -> tuple[str, str] | None:
    """The index URL's credentials, for a URL on its host and port."""
    own = urllib.parse.urlsplit(index_url()).netloc
    if "@" not in own or own.rpartition("@")[2].lower() != netloc.lower():
        return None
    return _userinfo(own)


def _of_netrc(host: str) -> tuple[str, str] | None:
    """netrc's login and password for `host` ($NETRC, else ~/.netrc), as
    requests reads it for pip: the account when there is no login; an
    unreadable or malformed file gives none."""
    path = os.environ.get("NETRC") or os.path.expanduser("~/.netrc")
    if not host or not os.path.isfile(path):
        return None
    try:
        found = netrc.netrc(path).authenticators(host)
    except (netrc.NetrcParseError, OSError, UnicodeDecodeError):
        return None
    if not found:
        return None
    login, account, password = found
    return (login or account or ""), (password or "")


class _Unfollowed(urllib.request.HTTPRedirectHandler):
    """No request for a redirect: urllib then raises the 3xx as an HTTPError."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def open_url(req: str | urllib.request.Request, what: str, timeout: float = 120) -> Any:
    """The response to a request, or NetworkError naming `what` failed."""
    what = untrusted.text(what)
    try:
        return opener().open(req, timeout=timeout)
    except urllib.error.HTTPError as e:
        e.close()
        said = untrusted.text(f"{e.code} {e.reason}")  # the reason is the server's words
        raise NetworkError(f"{what}: the server answered {said}") from None
    except HTTP_ERRORS as e:
        reason = getattr(e, "reason", None) or e
        if isinstance(reason, TimeoutError):  # "timed out": say how long was waited
            reason = f"no answer within {timeout:g}s"
        raise NetworkError(f"{what}: {untrusted.text(str(reason))}") from None


@dataclass(frozen=True)
class IndexFile:
    filename: str
    url: str
    sha256: str
    size: int
    # PEP 592: pip takes a yanked file only when a requirement pins it exactly
    yanked: bool = False


@cache
def index_url() -> str:
    url = os.environ.get("PIP_INDEX_URL")
    if not url:
        url = _pip_config("global.index-url") or _pip_config("install.index-url")
    if not url:
        from pip._internal.models.index import PyPI  # pip's default, not ours

        url = PyPI.simple_url
    return url.rstrip("/") + "/"


def _pip_config(key: str) -> str:
    try:
        out = subprocess.run(
            [sys.executable, "-m", "pip", "config", "get", key],
            capture_output=True,
            text=True,
            timeout=60,
        )
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return out.stdout.strip() if out.returncode == 0 else ""


def _normalize(project: str) -> str:
    return str(canonicalize_name(project))


@cache
def project(name: str) -> dict[str, Any]:
    """The PEP 691 project page: {"files": [...], "versions": [...]}"""
    url = index_url() + _normalize(name) + "/"
    limit = settings.seconds(TIMEOUT, TIMEOUT_DEFAULT)
    deadline = time.monotonic() + limit
    req = urllib.request.Request(url, headers={"Accept": ACCEPT})
    resp = open_url(req, f"cannot reach the package index at {untrusted.url(url)}", timeout=limit)
    try:
        with resp:
            ctype = resp.headers.get("Content-Type", "")
            if "json" not in ctype:
                raise NetworkError(
                    f"the index at {untrusted.url(index_url())} does not speak the JSON API "
                    "(PEP 691); point PIP_INDEX_URL at one that does"
                )
            body = _read_by(resp, deadline, name)
        if body is None:
            raise TimeoutError
        page = json.loads(body)
    except TimeoutError:  # a read waited `limit`, or the page was not all in by then
        raise NetworkError(
            f"the package index's page for {name!r} was not read within {limit:g}s ({TIMEOUT})"
        ) from None
    except (OSError, http.client.HTTPException) as e:  # the answer broke off
        why = untrusted.text(str(e) or type(e).__name__)
        raise NetworkError(
            f"the package index's page for {name!r} broke off ({why}); try again"
        ) from None
    except (ValueError, RecursionError) as e:  # not JSON, not UTF-8, nested too deep to read
        why = str(e).splitlines()[0] if str(e).strip() else type(e).__name__
        raise NetworkError(f"the package index answered broken JSON for {name!r}: {why}") from None
    if not isinstance(page, dict) or not isinstance(page.get("files", []), list):
        raise NetworkError(f"the package index's page for {name!r} is not a PEP 691 project page")
    return page


def cut_short(resp: Any, got: int) -> int | None:
    """The Content-Length an answer declared when only `got` bytes of its
    body came, else None. http.client's read1 and read(n) end a body that
    stops short of its Content-Length as if it were whole (a chunked body
    cut short raises IncompleteRead): the caller says it broke off."""
    declared = (resp.headers.get("Content-Length") or "").strip()
    if declared.isascii() and declared.isdigit() and got < int(declared):
        return int(declared)
    return None


def _read_by(resp: Any, deadline: float, name: str) -> bytes | None:
    """The body, or None when it is not all in by `deadline` (time.monotonic):
    read1 returns what one read brings, so a trickle is seen to pass it. A
    body over MOST_PAGE bytes, or one that stops short of its
    Content-Length, is a NetworkError."""
    length = (resp.headers.get("Content-Length") or "").strip()
    if length.isascii() and length.isdigit() and int(length) > MOST_PAGE:
        raise _huge(name)
    chunks, got = [], 0
    while chunk := resp.read1(_CHUNK):
        chunks.append(chunk)
        got += len(chunk)
        if got > MOST_PAGE:
            raise _huge(name)
        if time.monotonic() > deadline:
            return None
    if (declared := cut_short(resp, got)) is not None:
        raise NetworkError(
            f"the package index's page for {name!r} broke off ({got} of the {declared} bytes "
            "it declared came); try again"
        )
    return b"".join(chunks)


def _huge(name: str) -> NetworkError:
    size = f"{MOST_PAGE >> 20} MiB" if MOST_PAGE >= 1 << 20 else f"{MOST_PAGE >> 10} KiB"
    return NetworkError(
        f"the package index's page for {name!r} is over {size}, more than a project page is "
        "(vLLM's is about 130 KB): not read; is PIP_INDEX_URL a package index?"
    )


def files(name: str) -> dict[str, IndexFile]:
    page = index_url() + _normalize(name) + "/"
    out = {}
    try:
        for f in project(name).get("files", []):
            sha = f.get("hashes", {}).get("sha256", "")
            filename, link = f["filename"], f["url"]
            if not all(isinstance(x, str) for x in (filename, link, sha)):
                raise TypeError(f"filename, url and sha256 are text, not {settings.shown(f, 80)}")
            url = urllib.parse.urljoin(page, link)  # PEP 691 allows relative URLs
            size, yanked = int(f.get("size") or 0), bool(f.get("yanked", False))
            out[filename] = IndexFile(filename, url, sha, size, yanked)
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        why = untrusted.text(str(e))
        raise NetworkError(
            f"the package index lists a malformed file for {name!r}: {why}"
        ) from None
    return out


def versions(name: str) -> list[str]:
    return list(project(name).get("versions", []))
