"""Text and URLs vpatch did not write, as its messages and reports show
them: the one rule, `text()` for text and `url()` for a URL.

`text()`: what a server sends (a vLLM server's /version, its model names
and metric labels, the hub's and the package index's words in an error)
reaches a terminal only with its control characters escaped. A C0 or C1
control (ESC, BEL, CR, LF, DEL...), a line or paragraph separator, or a
bidi override would let the sender write lines of its own into a report
(`ok: 0 errors`), clear the screen, retitle the terminal or reorder what
is read; each is shown as its escape (`\\x1b`, `\\n`, `\\u202e`). The CLI's
error line, `say` and `show` (each line of a command's result: shown.py)
pass their text through it; JSON output keeps the text as sent
(json.dumps escapes what JSON must).

`url()`: no credential is printed. A URL is shown without its
`user:password@` (a token is often the user) and without the value of a
query (or fragment) parameter whose name looks secret (token, key, sig,
signature, password, secret, credential, auth: access_token,
X-Amz-Signature, X-Amz-Credential, X-Amz-Security-Token...), whoever gave
the URL: pip's configuration, HF_ENDPOINT, `--server`, a redirect's
Location. `text()` does the same to every URL in its text, so an error
that quotes a URL says no credential either."""

from __future__ import annotations

import re

HIDDEN = "***"  # what a credential is shown as

# C0 and C1 controls and DEL; U+061C, U+200E-U+200F, U+202A-U+202E and
# U+2066-U+2069 (Unicode's bidi controls); U+2028-U+2029 (line and paragraph
# separators: str.splitlines and some terminals break lines there)
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
# scheme://, then the authority up to its last @ (urlsplit's reading too)
_USERINFO = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*://)[^/?#]*@")
_SECRET = re.compile(
    r"([?&;#])([^=&;#]*(?:token|key|sig|password|passwd|pwd|secret|credential|auth)[^=&;#]*)="
    r"([^&;#]*)",
    re.IGNORECASE,
)
# a URL as it stands in text: a scheme, ://, and no white space or quote
_URL = re.compile(r"""[A-Za-z][A-Za-z0-9+.-]*://[^\s'"<>`]+""")


def text(s: str) -> str:
    """`s` as a terminal may show it: its URLs through url(), then every
    control character as its escape."""
    if "://" in s:
        s = _URL.sub(lambda m: url(m.group()), s)
    return _CONTROL.sub(_escape, s)


def url(u: str) -> str:
    """`u` without its credentials: `user:password@` and secret-looking
    query values become HIDDEN. Any text is taken (a Location header, a URL
    urlsplit refuses): what does not look like a credential stays."""
    u = _USERINFO.sub(rf"\g<1>{HIDDEN}@", u)
    if any(c in u for c in "?&;#"):
        u = _SECRET.sub(rf"\g<1>\g<2>={HIDDEN}", u)
    return u


def _escape(m: re.Match[str]) -> str:
    ch = m.group()
    if ch in _NAMED:
        return _NAMED[ch]
    return f"\\x{ord(ch):02x}" if ord(ch) < 0x100 else f"\\u{ord(ch):04x}"
