"""cli/install.py: `vpatch install`'s report (uninstall's too): what
changed, or dry, what would."""

from pathlib import Path
from types import SimpleNamespace

import pytest
from vpatch import cli
from vpatch.env import install

DIST = SimpleNamespace(name="vllm", version="9.9.0", root=Path("/env/site"), python="py")


def result(action, said=None):
    """install's Result; `said`: the verdict its readiness gives."""
    ready = SimpleNamespace(verdict=lambda install: said) if said else None
    return install.Result(DIST, action, "2 files", readiness=ready)


@pytest.mark.parametrize(
    ("action", "line"),
    [
        ("nothing", "vllm 9.9.0 at /env/site: 2 files; nothing to do"),
        ("installed", "vllm 9.9.0 at /env/site: installed 2 files"),
    ],
)
def test_one_line(monkeypatch, capsys, action, line):
    monkeypatch.setattr(install, "install", lambda py, series, dry_run, say, pins: result(action))
    assert cli.main(["install"]) == 0
    assert capsys.readouterr().out == line + "\n"


def test_after_an_install_the_line_check_ends_with(monkeypatch, capsys):
    """install's last line is `vpatch check`'s verdict on the environment as
    it left it (readiness.Readiness.verdict): one answer, whichever is asked."""
    said = "EAGLE-3 for DeepSeek-V3 / Kimi-K2.5 targets: ready"
    res = result("nothing", said=said)
    monkeypatch.setattr(install, "install", lambda py, series, dry_run, say, pins: res)
    assert cli.main(["install"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == said


def test_a_dry_run_lists_the_files(monkeypatch, capsys):
    seen = []
    res = result("dry-run")
    res.files, res.bytecode = ["vllm/a.py"], {"vllm/__pycache__/a.pyc": "removed"}

    def fake(py, series, dry_run, say, pins):
        seen.append((py, series, dry_run))
        return res

    monkeypatch.setattr(install, "install", fake)
    assert cli.main(["install", "--python", "py", "--series", "s", "--dry-run"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "vllm 9.9.0 at /env/site: 2 files (dry run: nothing changed)",
        "  replace  vllm/a.py",
        "  removed                  vllm/__pycache__/a.pyc",
    ]
    assert seen == [("py", Path("s"), True)]
