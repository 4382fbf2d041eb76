"""hub_errors.py: what huggingface_hub and its HTTP library raise, said as
one ConfigError line with what to do. (The same messages from a stand-in
hub, through hub.resolve: test_hub.py's bad answers, test_hostile_hub.py.)"""

from __future__ import annotations

import json
import re

import httpx2
import pytest
from huggingface_hub import errors as hf
from support import hub as standin_hub
from vpatch.doctor import hub_errors
from vpatch.errors import ConfigError

HUB = "http://hub.example"


no_token = standin_hub.no_token


def said(error: BaseException, revision: str | None = None) -> str:
    with pytest.raises(ConfigError) as e, hub_errors.translated("acme/m", revision, HUB, 7.0):
        raise error
    assert "\n" not in str(e.value)
    return str(e.value)


def answer(status: int, url: str = f"{HUB}/api/models/acme/m?expand=sha") -> httpx2.Response:
    return httpx2.Response(status, request=httpx2.Request("GET", url))


def test_a_config_error_goes_through_as_it_is():
    assert said(ConfigError("mine")) == "mine"


@pytest.mark.parametrize(
    ("error", "phrase"),
    [
        (hf.RepositoryNotFoundError("x", response=answer(404)), "no such repo on .* no token"),
        (hf.GatedRepoError("x", response=answer(403)), "gated on .* accept its terms"),
        (hf.HfHubHTTPError("x", response=answer(403)), r"refuses your token \(403 Forbidden\)"),
        (hf.HfHubHTTPError("x", response=answer(401)), r"401 Unauthorized.*hf auth login"),
        (hf.HfHubHTTPError("boom\nmore", response=answer(500)), r"answered 500 \(boom\)$"),
    ],
    ids=["no-repo", "gated", "403", "401", "500"],
)
def test_http_errors(error, phrase):
    assert re.search(phrase, said(error)), said(error)


def test_a_missing_revision_names_it():
    e = hf.RevisionNotFoundError("x", response=answer(404))
    assert said(e, "v9") == f"acme/m: no revision 'v9' (branch, tag or commit) on {HUB}"


def test_transport_errors():
    assert said(httpx2.ConnectError("refused")).startswith(
        f"cannot reach {HUB} (ConnectError: refused); check HF_ENDPOINT"
    )
    assert said(httpx2.ReadTimeout("slow")).startswith(
        f"{HUB} did not answer a request within 7s (HF_HUB_DOWNLOAD_TIMEOUT)"
    )


def test_answers_that_are_not_the_hubs():
    loop = httpx2.TooManyRedirects("loop", request=httpx2.Request("GET", f"{HUB}/a?secret=1"))
    assert said(loop) == (
        f"{HUB}: not a Hugging Face hub (redirects without end: {HUB}/a); check HF_ENDPOINT"
    )
    bad = json.JSONDecodeError("Expecting value", "<html>", 0)
    assert said(bad).startswith(f"{HUB}: not a Hugging Face hub (Expecting value")
    assert "JSON nested too deep" in said(RecursionError())
    assert said(hf.HFValidationError("Repo id must be\nvalid")) == (
        "acme/m: not a valid hub id (Repo id must be)"
    )
