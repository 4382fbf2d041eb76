"""cli/export.py: `vpatch export` prints a summary of what it wrote."""

from vpatch import cli
from vpatch.errors import TreeError


def test_export_prints_a_summary_and_refuses_a_dirty_tree(patched_tree, tmp_path, capsys):
    assert cli.main(["export", str(patched_tree), "--into", str(tmp_path / "out")]) == 0
    assert "2 patches for vLLM 9.9.0 (3 files written, 0 removed)" in capsys.readouterr().out
    (patched_tree / "README.md").write_text("edit\n")
    code = cli.main(["export", str(patched_tree), "--into", str(tmp_path / "out")])
    assert code == TreeError.exit_code
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
