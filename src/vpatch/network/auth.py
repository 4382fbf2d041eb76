"""HTTP basic auth as pip sends it to a package index (pip's
MultiDomainBasicAuth), for the reader that is handed it (the index's,
sources/index.py).

The user and password of the URL (`https://user:TOKEN@host/simple` or
`https://TOKEN@host/simple`) are taken out of the URL before the request
(urllib would read `user:TOKEN@host` as the host name); a URL without them
on the index's host (a PEP 691 file URL) gets the index URL's; else those
netrc gives the host ($NETRC, else ~/.netrc). Credentials go to the host
they are for only: a redirect elsewhere does not carry them. No message
shows one (untrusted.url).
"""

from __future__ import annotations

import base64
import netrc
import os
import urllib.parse
import urllib.request
from collections.abc import Callable


class Credentials(urllib.request.BaseHandler):
    """Basic auth as pip sends it (the module docstring), before urllib
    reads the host of the URL: the user and password of the URL, taken out
    of it; else the index URL's (`index()`: asked per request, so pip's
    configuration is read only once a request is made), for a request to
    the index's host; else netrc's for the host. Sent with the request (pip
    does not wait for a 401 either), as a header no redirect carries: a
    redirected request asks here again, for its own host."""

    handler_order = 400  # before AbstractHTTPHandler's (500) sets Host from the URL

    def __init__(self, index: Callable[[], str]) -> None:
        self.index = index

    def http_request(self, req: urllib.request.Request) -> urllib.request.Request:
        url = urllib.parse.urlsplit(req.full_url)
        given = userinfo(url.netloc)
        if given is not None:
            req.full_url = urllib.parse.urlunsplit(
                url._replace(netloc=url.netloc.rpartition("@")[2])
            )
        found = given or self._of_index(url.netloc) or _of_netrc(url.hostname or "")
        if found is not None and not req.has_header("Authorization"):
            token = base64.b64encode(f"{found[0]}:{found[1]}".encode()).decode()
            req.add_unredirected_header("Authorization", f"Basic {token}")
        return req

    https_request = http_request

    def _of_index(self, netloc: str) -> tuple[str, str] | None:
        """The index URL's credentials, for a URL on its host and port."""
        own = urllib.parse.urlsplit(self.index()).netloc
        if "@" not in own or own.rpartition("@")[2].lower() != netloc.lower():
            return None
        return userinfo(own)


def userinfo(netloc: str) -> tuple[str, str] | None:
    """(user, password) of `user:password@host` or `user@host`, unquoted as
    pip does; None without an @."""
    if "@" not in netloc:
        return None
    user, _, password = netloc.rpartition("@")[0].partition(":")
    return urllib.parse.unquote(user), urllib.parse.unquote(password)


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
