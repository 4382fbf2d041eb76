"""cli/check.py: `vpatch check` exits 0 when EAGLE-3 is ready, 1 when not,
in text or JSON."""

import json

import pytest
from vpatch import cli
from vpatch.commands import check


class Report:
    def __init__(self, ready):
        self.eagle3_ready = ready

    def to_json(self):
        return {"eagle3_ready": self.eagle3_ready}

    def to_text(self):
        return f"ready: {self.eagle3_ready}"


@pytest.mark.parametrize(("ready", "code"), [(True, 0), (False, 1)])
def test_ready_or_not(monkeypatch, capsys, ready, code):
    seen = []
    monkeypatch.setattr(check, "check", lambda py, say, pins: seen.append(py) or Report(ready))
    assert cli.main(["check", "--python", "py"]) == code
    assert capsys.readouterr().out == f"ready: {ready}\n"
    assert cli.main(["check", "--format", "json"]) == code
    assert json.loads(capsys.readouterr().out) == {"eagle3_ready": ready}
    assert seen == ["py", None]
