"""Numbers and settings from users, one parser per kind, so every input of
a kind refuses bad input with the same one line (exit 2): `whole` for every
whole number read from the command line, a serve command, an environment
variable or a config; `seconds` for a duration read from the environment."""

from __future__ import annotations

import os
import re

from .errors import ConfigError

# The most any whole number vpatch reads may be, unless its reader says less:
# a C int's. Nothing vpatch reads comes near (61 layers, TP 8, a context of
# 10**6 tokens); below it every product the checks form is exact in a float.
MOST = 2**31 - 1
# The most bytes an artifact's size may be (VERSIONS.lock's, the index's): a
# TiB, past any wheel or sdist (vLLM's largest, a wheel, is about 509 MB)
MOST_BYTES = 2**40
# Characters of a number's text read at all: int() raises ValueError past
# 4300 digits and float() makes inf of 309; a number longer than this is
# refused before either sees it.
WIDTH = 40
# The most seconds a limit read from the environment may be: a day, which no
# read vpatch bounds needs (a socket refuses 1e10: past the platform's time_t)
MOST_SECONDS = 86400.0
_DECIMAL = re.compile(r"[0-9]+")
_SECONDS = re.compile(r"(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def whole(
    value: object,
    what: str,
    least: int = 1,
    most: int = MOST,
    *,
    text: bool = True,
    decimal: bool = False,
) -> int:
    """`value` as a whole number from `least` to `most`: text as Python's
    int() reads it (what vLLM's parser does with a flag's value; `text`
    false: a config's value, where "7168" is a string, not a number;
    `decimal`: ASCII digits only, as vpatch's own options take them, where
    int() takes `1_0`, ` 1`, `+1` and a fullwidth `１`), or an int as JSON
    or TOML gave it. Anything else (a word, a float, a bool, text of more
    than WIDTH characters, a number out of range) is a one-line ConfigError
    that begins with `what` (an argparse type gives none: argparse names
    the option itself)."""
    n: int | None = None
    if isinstance(value, str) and text:
        words = value if decimal else value.strip()
        if len(words) <= WIDTH and (not decimal or _DECIMAL.fullmatch(words)):
            try:
                n = int(words)
            except ValueError:
                n = None
    elif isinstance(value, int) and not isinstance(value, bool):
        n = value
    if n is None or not least <= n <= most:
        said = f"must be a whole number from {least} to {most}, got {shown(value)}"
        raise ConfigError(f"{what} {said}" if what else said)
    return n


def shown(value: object, limit: int = WIDTH) -> str:
    """A value as a message quotes it: text cut at `limit` characters, a
    number too long to print said by its length (str() of an int over 4300
    digits raises)."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 128:
        return f"a number of {value.bit_length()} bits"
    text = value if isinstance(value, str) else repr(value)
    if len(text) > limit:
        text = f"{text[:limit]}…({len(text)} characters)"
    return repr(text) if isinstance(value, str) else text


def seconds(variable: str, default: float) -> float:
    """`variable` as a number of seconds above 0 and at most MOST_SECONDS,
    written in ASCII (float() takes `1_0` and Arabic-Indic digits); unset or
    blank: default."""
    raw = os.environ.get(variable, "").strip()
    if not raw:
        return default
    value = float(raw) if _SECONDS.fullmatch(raw) else 0.0
    if value > MOST_SECONDS:
        raise ConfigError(
            f"{variable}={shown(raw)}: too large: at most {MOST_SECONDS:g} seconds (a day)"
        )
    if not value > 0:
        raise ConfigError(f"{variable}={raw[:40]!r}: not a number of seconds above 0")
    return value
