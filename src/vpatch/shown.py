"""What a command returns, as the CLI shows it: a result says itself.

A result (what a command module or library returns to its cli module) is
a `Shown`: `lines()` is its text, one line an item, as read, and, where the
command takes `--format json`, `to_json()` is its JSON-ready dict. The CLI
prints either through one function (cli/options.py, `show`), which passes
each line through untrusted.text: a line may hold what a server, a hub, an
environment or a file said, newline and escape sequences included, and it
reaches the terminal as one line, escaped, with no credential of a URL.
JSON keeps every value as read (json.dumps escapes what JSON must).

`to_text()` is the lines as one text, unescaped: what a test reads, or a
report written to a file (a carry's report.md)."""

from __future__ import annotations

from typing import Any


class Shown:
    """A command's result: its text (`lines()`) and, for `--format json`,
    its JSON (`to_json()`)."""

    def lines(self) -> list[str]:
        """The text, one line an item, as read (cli.options.show escapes it)."""
        raise NotImplementedError

    def to_text(self) -> str:
        return "\n".join(self.lines())

    def to_json(self) -> dict[str, Any]:
        """The JSON form (a command that takes `--format json` has one)."""
        raise TypeError(f"{type(self).__name__} has no JSON form")
