"""Settings read from the environment, one parser per kind, so every
variable of a kind refuses bad input with the same one line (exit 2)."""

from __future__ import annotations

import os

from .errors import ConfigError


def seconds(variable: str, default: float) -> float:
    """`variable` as a number of seconds above 0; unset or blank: default."""
    raw = os.environ.get(variable, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = 0.0
    if not 0 < value < float("inf"):
        raise ConfigError(f"{variable}={raw[:40]!r}: not a number of seconds above 0")
    return value
