"""JSON that vpatch did not write: a model's config.json, a safetensors
header or index, a hub's answer, a serve command's --speculative-config,
the tier's results file. Any text is at worst a one-line ConfigError
(exit 2), never an internal error: json.loads raises RecursionError for
text nested deeper than the interpreter's recursion limit (100,000 `[`
were exit 70), and a file is read up to a limit, from a regular file only
(`--results /dev/zero` ran out of memory after 7 s; a FIFO never ends)."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

from .errors import ConfigError

LIMIT = 64 * 2**20  # bytes: a sharded checkpoint's index of 100,000 tensors is ~10 MB


def loads(text: str | bytes, where: str) -> Any:
    """The JSON value of `text`; a ConfigError that begins with `where`
    when it is not JSON (malformed, not UTF-8, nested too deep)."""
    try:
        return json.loads(text)
    except RecursionError:
        raise ConfigError(f"{where}: not valid JSON (nested too deep to read)") from None
    except ValueError as e:  # JSONDecodeError, UnicodeDecodeError
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ConfigError(f"{where}: not valid JSON ({first})") from None


def read(path: Path, where: str | None = None, limit: int = LIMIT) -> Any:
    """The JSON value of the file at `path` (named `where` in errors): a
    regular file of at most `limit` bytes."""
    where = where or str(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        raise ConfigError(f"{where}: missing") from None
    except OSError as e:
        raise ConfigError(f"{where}: cannot read: {e.strerror or e}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ConfigError(f"{where}: not a file")
        data = b""
        while len(data) <= limit and (more := os.read(fd, limit + 1 - len(data))):
            data += more
    except OSError as e:
        raise ConfigError(f"{where}: cannot read: {e.strerror or e}") from None
    finally:
        os.close(fd)
    if len(data) > limit:
        raise ConfigError(f"{where}: larger than {limit // 2**20} MiB, too large for a JSON file")
    return loads(data, where)
