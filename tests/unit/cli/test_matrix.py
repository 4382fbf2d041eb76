"""cli/matrix.py: `vpatch matrix` prints the table, or JSON."""

import json

from vpatch import cli
from vpatch.commands import matrix


def table() -> matrix.Matrix:
    return matrix.Matrix(
        {"a": "9.9.0"}, ["a"], {"9.9.0": {"a": "clean"}}, {"9.9.0": "patched"}, {"9.9.0": "none"}
    )


def test_markdown_by_default_or_json(monkeypatch, capsys):
    seen = []

    def build(versions, pins, offline, jobs, say):
        seen.append((versions, offline, jobs))
        return table()

    monkeypatch.setattr(matrix, "build", build)
    assert cli.main(["matrix"]) == 0
    assert capsys.readouterr().out == table().to_text() + "\n"
    assert cli.main(["matrix", "--format", "json", "--versions", "1", "2", "--jobs", "3"]) == 0
    assert json.loads(capsys.readouterr().out) == table().to_json()
    assert seen == [(None, False, None), (["1", "2"], False, 3)]


def test_a_repeated_versions_option_adds_its_releases(monkeypatch):
    """`--versions a --versions b c` is the three releases, not the last two."""
    seen = []
    monkeypatch.setattr(matrix, "build", lambda versions, **kw: seen.append(versions) or table())
    assert cli.main(["matrix", "--versions", "1", "--versions", "2", "3", "--format", "json"]) == 0
    assert seen == [["1", "2", "3"]]
