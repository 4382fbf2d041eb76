"""cli/matrix.py: `vpatch matrix` prints the table, or JSON."""

import json

from vpatch import cli
from vpatch.commands import matrix


class Table:
    def to_json(self):
        return {"releases": {"9.9.0": {"a": "clean"}}}

    def to_markdown(self):
        return "| a |\n"


def test_markdown_by_default_or_json(monkeypatch, capsys):
    seen = []

    def build(versions, pins, offline, jobs, say):
        seen.append((versions, offline, jobs))
        return Table()

    monkeypatch.setattr(matrix, "build", build)
    assert cli.main(["matrix"]) == 0
    assert capsys.readouterr().out == "| a |\n"
    assert cli.main(["matrix", "--format", "json", "--versions", "1", "2", "--jobs", "3"]) == 0
    assert json.loads(capsys.readouterr().out) == Table().to_json()
    assert seen == [(None, False, None), (["1", "2"], False, 3)]
