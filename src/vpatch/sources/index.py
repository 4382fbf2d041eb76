"""The package index, read through its JSON API (PEP 691).

The index URL comes from pip's own configuration, so whatever index or mirror
pip uses, vpatch uses too: PIP_INDEX_URL, then `pip config` (index-url),
then pip's built-in default.

The index is read through `opener()`: network's client
(network/session.py: the environment's proxies, certificate checks that
cannot be turned off) handed the index's credentials as pip sends them
(network/auth.py: the URL's user and password, the index URL's for a file
on its host, netrc's; never to another host, never printed). `open_url` is
a request on it whose failure is one NetworkError line; what else reads
index files (lazy.py's ranges, cache.py's downloads) reads them on it too.

A project page is read within VPATCH_INDEX_TIMEOUT seconds (default 60) in
all, not per read, and no further than MOST_PAGE bytes: an index that
accepts and never answers, trickles a byte a minute or sends a page of
400 MB ends in a one-line NetworkError, so a scheduled `vpatch releases`
cannot hang its job or fill its memory. A page that stops short of its
Content-Length broke off: a NetworkError too, never a page read as whole
(session.body reads it).
"""

from __future__ import annotations

import http.client
import json
import os
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
from ..errors import ConfigError, NetworkError
from ..network import auth, session

ACCEPT = "application/vnd.pypi.simple.v1+json"
TIMEOUT = "VPATCH_INDEX_TIMEOUT"  # seconds a project page may take, in all
TIMEOUT_DEFAULT = 60.0
# the most bytes of a project page read: vLLM's is about 130 KB (312 files, 2026)
MOST_PAGE = 16 << 20


@cache
def opener() -> urllib.request.OpenerDirector:
    """The index's client: network's opener with the index's credentials,
    as pip sends them (network/auth.py), built once."""
    return session.opener(auth.Credentials(index_url))


def open_url(req: str | urllib.request.Request, what: str, timeout: float = 120) -> Any:
    """The response to a request, or NetworkError naming `what` failed."""
    what = untrusted.text(what)
    try:
        return opener().open(req, timeout=timeout)
    except urllib.error.HTTPError as e:
        e.close()
        said = untrusted.text(f"{e.code} {e.reason}")  # the reason is the server's words
        raise NetworkError(f"{what}: the server answered {said}") from None
    except session.HTTP_ERRORS as e:
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

    def in_time() -> None:
        if time.monotonic() > deadline:
            raise TimeoutError

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
            what = f"the package index's page for {name!r}"
            body = session.body(resp, MOST_PAGE, what, lambda _: _huge(name), in_time)
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


def _huge(name: str) -> NetworkError:
    return NetworkError(
        f"the package index's page for {name!r} is over {session.size(MOST_PAGE)}, more than "
        "a project page is (vLLM's is about 130 KB): not read; is PIP_INDEX_URL a package "
        "index?"
    )


def files(name: str) -> dict[str, IndexFile]:
    page = index_url() + _normalize(name) + "/"
    listed = project(name).get("files", [])  # its own errors: a bad timeout is exit 2
    out = {}
    try:
        for f in listed:
            sha = f.get("hashes", {}).get("sha256", "")
            filename, link = f["filename"], f["url"]
            if not all(isinstance(x, str) for x in (filename, link, sha)):
                raise TypeError(f"filename, url and sha256 are text, not {settings.shown(f, 80)}")
            url = urllib.parse.urljoin(page, link)  # PEP 691 allows relative URLs
            size, yanked = _size(f.get("size")), bool(f.get("yanked", False))
            out[filename] = IndexFile(filename, url, sha, size, yanked)
    except (KeyError, TypeError, ValueError, AttributeError, ConfigError) as e:
        why = untrusted.text(str(e))
        raise NetworkError(
            f"the package index lists a malformed file for {name!r}: {why}"
        ) from None
    return out


def _size(value: object) -> int:
    """A file's `size` (None or missing: unsaid, 0): a whole number of bytes
    as VERSIONS.lock takes one, never a float (1e999 is inf), a bool or text."""
    if value is None:
        return 0
    return settings.whole(value, "size", 0, settings.MOST_BYTES, text=False)


def versions(name: str) -> list[str]:
    return list(project(name).get("versions", []))
