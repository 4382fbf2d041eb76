"""cli/__init__.py: the commands' modules in one parser, and every failure
as one line `vpatch: error: ...` with the error's exit code (errors.py).
Each command's own options and output: tests/unit/cli/test_<command>.py."""

import errno
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support.cli import vpatch
from vpatch import cli
from vpatch.errors import DiskError
from vpatch.maintain import lint


def test_help_lists_commands(capsys):
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    out = capsys.readouterr().out
    block = out.split("  COMMAND\n", 1)[1].split("\n\n", 1)[0]
    listed = [ln.split()[0] for ln in block.splitlines() if ln.startswith("    ") and ln[4] != " "]
    assert listed == list(cli.parser().commands)


def test_every_command_module_is_registered():
    """A module of cli/ is a command (add_parser, execute) listed in
    COMMANDS, or one of the shared ones."""
    here = Path(cli.__file__).parent
    found = {p.stem for p in here.glob("*.py")} - {"__init__", "__main__", "options"}
    registered = [m.__name__.rsplit(".", 1)[1] for m in cli.COMMANDS]
    assert sorted(registered) == sorted(found)
    assert all(callable(m.add_parser) and callable(m.execute) for m in cli.COMMANDS)
    names = [n.replace("-", "_") for n in cli.parser().commands]
    assert names == registered  # one parser per module, named as it


def test_an_option_taking_several_values_adds_them_when_repeated():
    """An option of one or more values (nargs "+") extends its list when it is
    given again: a plain store would keep only the last one's values."""
    import argparse

    for name, p in cli.parser().commands.items():
        for a in p._actions:
            if a.option_strings and a.nargs in ("+", "*"):
                assert isinstance(a, argparse._ExtendAction), (name, a.option_strings)


# -- failures no command converted -------------------------------------------------


def failing(monkeypatch, error: BaseException) -> None:
    def boom(*args, **kwargs):
        raise error

    monkeypatch.setattr(lint, "lint", boom)


def test_a_bug_is_one_line_exit_70_with_the_traceback_on_request(monkeypatch, capsys):
    failing(monkeypatch, RuntimeError("broken\nsecond line"))
    monkeypatch.delenv("VPATCH_DEBUG", raising=False)
    assert cli.main(["lint", "--offline"]) == cli.INTERNAL == 70
    err = capsys.readouterr().err
    assert err.splitlines() == ["vpatch: error: internal error: RuntimeError: broken"]
    monkeypatch.setenv("VPATCH_DEBUG", "1")
    assert cli.main(["lint", "--offline"]) == 70
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err
    assert err.splitlines()[-1].startswith("vpatch: error: internal error: RuntimeError")


def test_an_os_error_is_a_disk_error(monkeypatch, capsys):
    failing(monkeypatch, OSError(errno.ENOSPC, "No space left on device", "/x/y"))
    assert cli.main(["lint", "--offline"]) == DiskError.exit_code == 11
    assert capsys.readouterr().err.splitlines() == [
        "vpatch: error: /x/y: no space left on the device"
    ]


def test_an_error_line_shows_no_control_character_and_no_credential(monkeypatch, capsys):
    """An error may quote what a server sent (a CR, LF, ESC or BEL in it
    wrote over the line, or forged one) or a URL with a credential: each
    is shown escaped, the credential not at all, in one line."""
    from vpatch.errors import NetworkError

    said = "http://u:TOKEN@h/x?sig=s answered 'ok\r\nok: 0 errors\x1b]0;t\x07\u202e'"
    failing(monkeypatch, NetworkError(said))
    assert cli.main(["lint", "--offline"]) == 3
    assert capsys.readouterr().err.splitlines() == [
        "vpatch: error: http://***@h/x?sig=*** answered 'ok\\r\\nok: 0 errors\\x1b]0;t\\x07\\u202e'"
    ]
    failing(monkeypatch, RuntimeError("a bug \x1b[2J\nsecond line"))
    assert cli.main(["lint", "--offline"]) == 70
    assert capsys.readouterr().err.splitlines() == [
        "vpatch: error: internal error: RuntimeError: a bug \\x1b[2J"
    ]


def test_ctrl_c_is_exit_130(monkeypatch, capsys):
    failing(monkeypatch, KeyboardInterrupt())
    assert cli.main(["lint", "--offline"]) == cli.INTERRUPTED == 130
    assert capsys.readouterr().err.splitlines() == [
        "vpatch: error: interrupted; nothing was left half done"
    ]


def test_a_callers_git_dir_is_dropped_first(monkeypatch, tmp_path):
    seen = {}

    def record(*args, **kwargs):
        seen.update(os.environ)
        raise RuntimeError("stop")

    monkeypatch.setenv("GIT_DIR", str(tmp_path / "elsewhere.git"))
    monkeypatch.setenv("GIT_INDEX_FILE", str(tmp_path / "index"))
    monkeypatch.setattr(lint, "lint", record)
    assert cli.main(["lint", "--offline"]) == 70
    assert seen and "GIT_DIR" not in seen and "GIT_INDEX_FILE" not in seen


# -- --version, every command's --help, usage errors -----------------------------------------


@pytest.mark.parametrize("flag", ["--version", "-V"])
def test_version_names_the_tool_and_the_patch_set(flag, tmp_path):
    """`vpatch --version` said `the following arguments are required:
    COMMAND`. It names the version, the patch set (a hash of the data it
    carries, which any change to a patch changes) and what it holds."""
    from importlib import metadata

    from vpatch import lock, resources

    r = vpatch(flag)
    assert r.returncode == 0 and r.stderr == ""
    out = r.stdout.splitlines()
    pins = lock.load()
    assert out[0] == f"vpatch {metadata.version('vpatch')}"
    assert out[1].startswith(f"patch set {pins.identity()[:12]} ")
    n = len(pins.versions())
    assert f"{n} pinned, {pins.versions()[0]}-{pins.versions()[-1]}: " in out[2]
    assert f"patches   {len(pins.patchset.slugs)}, in " in out[3]
    # the identity is the data's: one byte of one patch changes it
    data = tmp_path / "data"
    shutil.copytree(resources.root(), data)
    patch = next((data / "patches").glob("*/*.patch"))
    env = {"VPATCH_ROOT": str(data)}
    assert vpatch(flag, env=env).stdout == r.stdout.replace(str(resources.root()), str(data))
    patch.write_bytes(patch.read_bytes() + b"\n")
    assert vpatch(flag, env=env).stdout.splitlines()[1] != out[1]


def subcommands() -> dict:
    return cli.parser().commands


def test_an_unknown_option_points_to_the_commands_help():
    r = vpatch("apply", "--no-such-option")
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [
        "vpatch: error: unrecognized arguments: --no-such-option (see `vpatch apply --help`)"
    ]
    r = vpatch("--no-such-option", "lock")
    assert r.stderr.strip().endswith("(see `vpatch lock --help`)")


def test_the_parser_loads_no_command():
    """`vpatch install` in an image pays for no other command: building the
    parser imports no commands/ module, no library and no GitPython."""
    code = (
        "import sys; from vpatch import cli; cli.parser(); "
        "print(' '.join(m for m in sys.modules if m.split('.')[0] in ('vpatch', 'git')))"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = r.stdout.split()
    assert "vpatch.cli.install" in loaded
    libraries = ("commands", "sources", "wheel", "env", "doctor", "pr")
    assert not [m for m in loaded if m == "git" or m.split(".")[1:2] in [[n] for n in libraries]]
