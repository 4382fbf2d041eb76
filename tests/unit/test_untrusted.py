"""untrusted.py: the one rule for text vpatch did not write (control
characters shown escaped) and for URLs (no credential shown). Where it is
applied end to end: test_hostile_server.py (doctor --server),
sources/test_index.py (the index), test_hostile_hub.py (HF_ENDPOINT)."""

from __future__ import annotations

import pytest
from vpatch import untrusted


@pytest.mark.parametrize(
    ("sent", "shown"),
    [
        ("X.Y.Z\nok: 0 errors", "X.Y.Z\\nok: 0 errors"),
        ("a\rb\tc", "a\\rb\\tc"),
        ("\x1b]0;pwned\x07", "\\x1b]0;pwned\\x07"),  # a new window title
        ("\x1b[2J", "\\x1b[2J"),  # the screen cleared
        ("\x00\x7f\x85\x9b", "\\x00\\x7f\\x85\\x9b"),  # NUL, DEL, C1 NEL and CSI
        ("abc\u202egpj.exe", "abc\\u202egpj.exe"),  # a right-to-left override
        ("\u2066x\u2069\u200e\u061c", "\\u2066x\\u2069\\u200e\\u061c"),  # isolates, marks
        ("a\u2028b", "a\\u2028b"),  # a line separator
        ("Kimi-K2.5 ünïcödé 模型 \\x1b", "Kimi-K2.5 ünïcödé 模型 \\x1b"),  # as it is
    ],
)
def test_text_shows_control_characters_escaped(sent, shown):
    assert untrusted.text(sent) == shown


@pytest.mark.parametrize(
    ("given", "shown"),
    [
        ("http://user:TOKEN@host/simple/", "http://***@host/simple/"),
        ("https://TOKEN@host:8443/simple", "https://***@host:8443/simple"),
        ("http://u:p@ss@h/x@y", "http://***@h/x@y"),  # urlsplit's host: after the last @
        (
            "https://cdn/f.whl?X-Amz-Algorithm=A&X-Amz-Credential=c&X-Amz-Signature=s&X-Amz-Date=1",
            "https://cdn/f.whl?X-Amz-Algorithm=A&X-Amz-Credential=***&X-Amz-Signature=***"
            "&X-Amz-Date=1",
        ),
        ("/v?token=t&api_key=k;sig=s&x=1", "/v?token=***&api_key=***;sig=***&x=1"),
        ("http://h/cb#access_token=t&state=1", "http://h/cb#access_token=***&state=1"),
        (
            "http://h/?password=p&secret=s&Signature=x",
            "http://h/?password=***&secret=***&Signature=***",
        ),
        ("http://h:8000/v1", "http://h:8000/v1"),  # nothing to hide
        ("not a url: [::", "not a url: [::"),
    ],
)
def test_url_hides_credentials(given, shown):
    assert untrusted.url(given) == shown


def test_text_hides_the_credentials_of_every_url_in_it():
    said = "cannot reach http://u:TOKEN@h/simple/ ('https://x/f?sig=abc'): refused"
    assert (
        untrusted.text(said) == "cannot reach http://***@h/simple/ ('https://x/f?sig=***'): refused"
    )
