"""cli/apply.py: `vpatch apply`'s options reach commands/apply.apply, and
its one line says what was applied."""

from pathlib import Path

from support.cli import vpatch
from vpatch import cli, lock
from vpatch.checkout import Applied
from vpatch.commands import apply


def test_unknown_release_is_one_line_and_exit_2():
    r = vpatch("apply", "0.1.0", "--offline")
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [
        "vpatch: error: unknown release '0.1.0'; pinned: " + r.stderr.split("pinned: ")[1].strip()
    ]
    assert r.stderr.strip().endswith("pinned: " + ", ".join(lock.load().versions()))


def test_applied_or_already_patched(monkeypatch, capsys):
    calls = []
    results = [
        Applied(Path("t"), "9.9.0", applied=["a", "b"]),
        Applied(Path("t"), "9.9.0", already=["a", "b"]),
    ]

    def fake(version, **kw):
        calls.append((version, kw["dest"], kw["series_dir"], kw["source"], kw["offline"]))
        return results.pop(0)

    monkeypatch.setattr(apply, "apply", fake)
    assert cli.main(["apply", "9.9.0", "--dest", "t", "--series", "s", "--offline"]) == 0
    assert capsys.readouterr().out == "t: vLLM 9.9.0, applied 2 patches\n"
    assert cli.main(["apply"]) == 0
    assert capsys.readouterr().out == "t: already patched (2 patches); nothing to do\n"
    assert calls == [
        ("9.9.0", Path("t"), Path("s"), "auto", True),
        (None, None, None, "auto", False),
    ]
