"""cli/lint.py: `vpatch lint` lists the problems (stdout) and the skipped
releases (stderr); problems are exit 5."""

from vpatch import cli
from vpatch.errors import PatchError
from vpatch.maintain import lint


def test_problems_are_listed_and_exit_5(monkeypatch, capsys):
    found = lint.Linted(
        [lint.Problem("a", "p1"), lint.Problem("b", "p2")], ["9.9.1: not in the cache"]
    )
    monkeypatch.setattr(lint, "lint", lambda pins, offline, say: found)
    assert cli.main(["lint", "--offline"]) == PatchError.exit_code == 5
    out, err = capsys.readouterr()
    assert out == "a: p1\nb: p2\n"
    assert err.splitlines() == [
        "skipped: 9.9.1: not in the cache",
        "vpatch: error: lint found 2 problems (listed above)",
    ]
    found.problems.clear()
    assert cli.main(["lint"]) == 0
    assert capsys.readouterr().out == "lint: every series is consistent and up to date\n"


def test_newest_beyond_the_lock_is_bad_input_as_for_every_command(monkeypatch, capsys, tmp_path):
    """rules.toml's `newest` at a release the lock does not pin: every
    command refused it at load (exit 2) but lint, which said the data was
    clean (exit 0). lint loads the rules too: the same line, exit 2."""
    import shutil

    from support import minor_after, next_release
    from vpatch import lock, rules

    shutil.copytree(lock.load().root, tmp_path / "data")
    pins = lock.load(tmp_path / "data" / "VERSIONS.lock")
    beyond = minor_after(next_release(pins))
    f = tmp_path / "data" / rules.FILE
    f.write_text(rules.with_newest(f.read_text(), beyond))
    monkeypatch.setenv("VPATCH_ROOT", str(tmp_path / "data"))
    monkeypatch.setattr(lint, "lint", lambda pins, offline, say: lint.Linted())
    assert cli.main(["lint", "--offline"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"vpatch: error: {rules.FILE}: newest {beyond!r} is not a release VERSIONS.lock pins "
        f"(it pins up to {pins.newest})"
    ]
