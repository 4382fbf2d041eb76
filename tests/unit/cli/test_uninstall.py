"""cli/uninstall.py: `vpatch uninstall`'s report."""

from pathlib import Path
from types import SimpleNamespace

from vpatch import cli
from vpatch.env import install

DIST = SimpleNamespace(name="vllm", version="9.9.0", root=Path("/env/site"))


def test_restored_or_would_restore(monkeypatch, capsys):
    seen = []
    res = install.Result(DIST, "uninstalled", "2 files", files=["vllm/a.py"], verb="restore")
    monkeypatch.setattr(
        install, "uninstall", lambda py, dry_run, say: seen.append((py, dry_run)) or res
    )
    assert cli.main(["uninstall", "--python", "py"]) == 0
    assert capsys.readouterr().out == "vllm 9.9.0 at /env/site: uninstalled 2 files\n"
    res.action = "dry-run"
    assert cli.main(["uninstall", "--dry-run"]) == 0
    assert capsys.readouterr().out.splitlines()[1] == "  restore  vllm/a.py"
    assert seen == [("py", False), (None, True)]
