"""huggingface_hub's errors, and its HTTP library's, as doctor says them:
one ConfigError line that says what to do (log in, accept a gated repo's
terms, check HF_ENDPOINT, use --offline), around the hub reads of hub.py.
Doctor's bad input is exit 2, whatever the hub answered, but for an
answer that broke off (short of its Content-Length, or a chunked one
without its last chunk): exit 3, try again, as for every URL doctor reads.
The hub's words and URLs in it are shown by untrusted.py's rule: escaped,
no credential."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator

from .. import untrusted
from ..errors import ConfigError
from ..network import deadline, hubclient


@contextlib.contextmanager
def translated(
    repo: str, revision: str | None, endpoint: str | None, timeout: float | None = None
) -> Iterator[None]:
    """huggingface_hub's errors, and its HTTP library's, as one-line
    ConfigErrors that say what to do."""
    import httpx2
    from huggingface_hub import errors as hf

    try:
        try:
            yield
        except Exception as e:
            # an answer cut short (hubclient's BrokeOff, or an error of
            # huggingface_hub's raised from it): exit 3, as any such answer
            if (broke := hubclient.broke_off(e)) is not None:
                raise broke from None
            raise
    except ConfigError:
        raise
    except (hf.HfHubHTTPError, hf.LocalEntryNotFoundError, hf.FileMetadataError) as e:
        raise ConfigError(_http_message(e, repo, revision, endpoint, timeout)) from None
    except hf.HFValidationError as e:
        raise ConfigError(f"{repo}: not a valid hub id ({first(e)})") from None
    except (httpx2.TransportError, httpx2.InvalidURL, hf.OfflineModeIsEnabled) as e:
        raise ConfigError(_transport_message(e, endpoint, timeout)) from None
    except httpx2.TooManyRedirects as e:
        raise ConfigError(
            f"{endpoint}: not a Hugging Face hub (redirects without end: {_shown_url(e)}); "
            "check HF_ENDPOINT"
        ) from None
    except (json.JSONDecodeError, RecursionError) as e:  # an answer that is not the hub's JSON
        why = "JSON nested too deep" if isinstance(e, RecursionError) else first(e)
        raise ConfigError(
            f"{endpoint}: not a Hugging Face hub ({why}); check HF_ENDPOINT"
        ) from None


def _http_message(
    e: Exception, repo: str, revision: str | None, endpoint: str | None, timeout: float | None
) -> str:
    import httpx2
    from huggingface_hub import errors as hf
    from huggingface_hub import get_token

    login = "log in with `hf auth login` or set HF_TOKEN"
    if isinstance(e, hf.LocalEntryNotFoundError):
        # hf_hub_download's answer to anything but a 401/404: the cause says what
        cause = e.__cause__
        if isinstance(cause, (httpx2.TransportError, httpx2.InvalidURL)):
            return _transport_message(cause, endpoint, timeout)
        if isinstance(cause, Exception) and cause is not e:
            return _http_message(cause, repo, revision, endpoint, timeout)
        return f"{repo}: {first(e)}"
    if isinstance(e, hf.FileMetadataError):
        return f"{endpoint}: not a Hugging Face hub ({first(e)}); check HF_ENDPOINT"
    assert isinstance(e, hf.HfHubHTTPError)
    token = get_token() is not None
    status = e.response.status_code if e.response is not None else 0
    if isinstance(e, hf.GatedRepoError):
        if not token:
            return (
                f"{repo} is gated on {endpoint} and no token was sent: accept its terms on "
                f"{endpoint}/{repo}, then {login}"
            )
        return (
            f"{repo} is gated on {endpoint} and your token is not granted it: accept its terms "
            f"on {endpoint}/{repo} with that account"
        )
    if isinstance(e, hf.RevisionNotFoundError):
        return f"{repo}: no revision {revision!r} (branch, tag or commit) on {endpoint}"
    if isinstance(e, hf.RemoteEntryNotFoundError):
        name = str(e.response.url).rsplit("/", 1)[-1] if e.response is not None else "a file"
        return f"{repo}: no {name} on {endpoint} at revision {revision or 'main'}"
    if isinstance(e, hf.RepositoryNotFoundError):
        if not token:
            return (
                f"{repo}: no such repo on {endpoint}, or it is private and no token was sent: "
                f"check the name, or {login}"
            )
        return (
            f"{repo}: no such repo on {endpoint}, or your token cannot read it: check the "
            "name and the token's access"
        )
    if status == 403:
        return f"{repo}: {endpoint} refuses your token (403 Forbidden): it cannot read this repo"
    if status == 401:
        return f"{repo}: {endpoint} refuses the request (401 Unauthorized): {login}"
    # huggingface_hub's words, then the hub's own (X-Error-Message, the body's "error")
    said = first(e).rstrip(":")
    if (server := first_of(getattr(e, "server_message", None) or "")) and server not in said:
        said += f": {server}"
    return f"{repo}: {endpoint} answered {status or 'an error'} ({said})"


def _transport_message(e: Exception, endpoint: str | None, timeout: float | None) -> str:
    import httpx2

    if isinstance(e, httpx2.TimeoutException):
        b = deadline.current()  # how long it took with huggingface_hub's tries again
        took = f", {b.elapsed():.1f}s after the hub reads began" if b else ""
        return (
            f"{endpoint} did not answer a request within {timeout:g}s (HF_HUB_DOWNLOAD_TIMEOUT)"
            f"{took}; try again, or use --offline with the files in the cache"
        )
    return (
        f"cannot reach {endpoint} ({type(e).__name__}: {first(e)}); check HF_ENDPOINT and "
        "the network, or use --offline with the files in the cache"
    )


def _shown_url(e: Exception) -> str:
    """The URL of the request an HTTP error is about, without its query (or
    the error's own words, when it has no request)."""
    try:
        return untrusted.url(str(e.request.url).split("?", 1)[0])  # type: ignore[attr-defined]
    except (AttributeError, RuntimeError):  # httpx2: RuntimeError when it has none
        return first(e)


def first(e: BaseException) -> str:
    """The first line of an error's words (a hub's, in part), as messages
    show them (untrusted.text)."""
    return first_of(str(e)) or type(e).__name__


def first_of(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return untrusted.text(lines[0]) if lines else ""
