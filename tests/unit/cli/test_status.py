"""cli/status.py: `vpatch status` lists each patch of a tree."""

from pathlib import Path

from support.cli import vpatch
from vpatch import cli
from vpatch.checkout import PatchState, Status
from vpatch.commands import apply


def test_status_of_a_plain_folder(tmp_path):
    r = vpatch("status", str(tmp_path))
    assert r.returncode == 6 and "not a vpatch tree" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_one_line_a_patch(monkeypatch, capsys):
    patches = [PatchState("0001-a.patch", "a", True), PatchState("0002-b.patch", "b", False)]
    st = Status(Path("t"), "9.9.0", patches, extra=["mine"], dirty=["x", "y"])
    monkeypatch.setattr(apply, "status", lambda dest, series, pins: st)
    assert cli.main(["status", "t"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "t: vLLM 9.9.0",
        "  applied      0001-a.patch",
        "  not applied  0002-b.patch",
        "  unknown      mine",
        "  uncommitted changes in 2 paths",
    ]
    st.extra, st.dirty = [], []
    assert cli.main(["status", "t"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "  not applied  0002-b.patch"
