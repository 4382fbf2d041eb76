"""cli/port.py: `vpatch port` prints each patch's fate and, on a conflict,
the command that goes on."""

from vpatch import cli
from vpatch.errors import PatchError
from vpatch.maintain import port

NAMES = ["0001-step-1.patch", "0002-step-2.patch"]


def test_port_prints_the_report_and_what_to_do_next(monkeypatch, capsys, tmp_path):
    report = port.Ported("9.8.0", "10.0.0", tmp_path / "work")
    report.status = {NAMES[0]: "merged", NAMES[1]: "conflict"}
    report.unresolved = ["vllm/config.py"]
    monkeypatch.setattr(port, "port", lambda *a, **kw: report)
    assert cli.main(["port", "9.8.0", "10.0.0"]) == PatchError.exit_code
    out, err = capsys.readouterr()
    assert out.splitlines() == [f"  merged    {NAMES[0]}", f"  conflict  {NAMES[1]}"]
    assert len(err.strip().splitlines()) == 1
    assert f"{NAMES[1]} conflicts with vLLM 10.0.0 in vllm/config.py" in err
    assert "git am --continue" in err and "vpatch port 9.8.0 10.0.0 --continue" in err


def test_continue_names_the_folders_given(monkeypatch, capsys, tmp_path):
    report = port.Ported("9.8.0", "10.0.0", tmp_path / "w")
    report.status = {NAMES[0]: "conflict"}
    report.unresolved = ["x.py"]
    seen = []
    monkeypatch.setattr(port, "resume", lambda *a, **kw: seen.append((a, kw)) or report)
    argv = ["port", "9.8.0", "10.0.0", "--continue", "--work", "w", "--into", "i"]
    assert cli.main(argv) == PatchError.exit_code
    assert "vpatch port 9.8.0 10.0.0 --work w --into i --continue`" in capsys.readouterr().err
    assert seen[0][0] == ("9.8.0", "10.0.0") and seen[0][1]["keep"] is False
