"""cli.py: argparse, one command, its output, and every failure as one line
`vpatch: error: ...` with the error's exit code (errors.py)."""

import errno
import os
import shlex
import shutil
import subprocess
import sys

import pytest
from vpatch import cli
from vpatch.commands import lint, port
from vpatch.errors import DiskError, PatchError, TreeError

NAMES = ["0001-step-1.patch", "0002-step-2.patch"]


def run(*args, env=None):
    return subprocess.run(
        [sys.executable, "-m", "vpatch.cli", *args], capture_output=True, text=True, env=env
    )


def test_unknown_release_is_one_line_and_exit_2():
    r = run("apply", "0.1.0", "--offline")
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [
        "vpatch: error: unknown release '0.1.0'; pinned: " + r.stderr.split("pinned: ")[1].strip()
    ]
    assert "0.17.1" in r.stderr


def test_status_of_a_plain_folder(tmp_path):
    r = run("status", str(tmp_path))
    assert r.returncode == 6 and "not a vpatch tree" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_offline_with_empty_cache(tmp_path):
    r = run("fetch", "0.16.0", "--offline", env={**os.environ, "VPATCH_CACHE": str(tmp_path)})
    assert r.returncode == 3 and "--offline" in r.stderr


def test_lock_lists_releases(capsys):
    assert cli.main(["lock"]) == 0
    out = capsys.readouterr().out
    assert "0.17.1   patched" in out and "(default)" in out


def test_help_lists_commands(capsys):
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    out = capsys.readouterr().out
    for cmd in ("fetch", "apply", "status", "unapply", "lock"):
        assert cmd in out


def test_export_prints_a_summary_and_refuses_a_dirty_tree(patched_tree, tmp_path, capsys):
    assert cli.main(["export", str(patched_tree), "--into", str(tmp_path / "out")]) == 0
    assert "2 patches for vLLM 9.9.0 (3 files written, 0 removed)" in capsys.readouterr().out
    (patched_tree / "README.md").write_text("edit\n")
    code = cli.main(["export", str(patched_tree), "--into", str(tmp_path / "out")])
    assert code == TreeError.exit_code
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


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


def test_the_wheel_choices_are_the_commands_own():
    """The parser lists what commands/wheel.py accepts (one rule, two places
    only so that `vpatch --help` need not import the wheel code)."""
    from vpatch.commands import wheel

    sub = next(a for a in cli.parser()._actions if a.dest == "subcommand")
    opts = {a.dest: a.choices for a in sub.choices["wheel"]._actions}
    assert tuple(opts["variant"]) == wheel.VARIANTS and tuple(opts["mode"]) == wheel.MODES


# -- issue 31: --version, every command's --help, usage errors ---------------------------


@pytest.mark.parametrize("flag", ["--version", "-V"])
def test_version_names_the_tool_and_the_patch_set(flag, tmp_path):
    """`vpatch --version` said `the following arguments are required:
    COMMAND`. It names the version, the patch set (a hash of the data it
    carries, which any change to a patch changes) and what it holds."""
    from importlib import metadata

    from vpatch import lock, resources

    r = run(flag)
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
    env = {**os.environ, "VPATCH_ROOT": str(data)}
    assert run(flag, env=env).stdout == r.stdout.replace(str(resources.root()), str(data))
    patch.write_bytes(patch.read_bytes() + b"\n")
    assert run(flag, env=env).stdout.splitlines()[1] != out[1]


def subcommands() -> dict:
    return cli.parser().commands


@pytest.mark.parametrize("name", sorted(subcommands()))
def test_every_command_has_a_description_exit_codes_and_an_example(name):
    p = subcommands()[name]
    text = p.format_help()
    assert p.description and p.description.endswith(".") and "\n" not in p.description
    codes = text.split("exit codes (", 1)[1].split("\n\n", 1)[0].splitlines()[1:]
    assert [c.split()[0] for c in codes][:2] == ["0", "2"] or name in ("check", "doctor")
    assert codes[-1].split()[0] == "130"
    example = text.split("example:\n  ", 1)[1].strip()
    assert example.startswith(f"vpatch {name}")
    # the example is a command line the parser takes
    words = shlex.split(example)[1:]
    args = cli.parser().parse_args(words)
    assert args.subcommand == name


def test_an_unknown_option_points_to_the_commands_help():
    r = run("apply", "--no-such-option")
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [
        "vpatch: error: unrecognized arguments: --no-such-option (see `vpatch apply --help`)"
    ]
    r = run("--no-such-option", "lock")
    assert r.stderr.strip().endswith("(see `vpatch lock --help`)")


def test_the_synopsis_is_the_parsers():
    """One line (wrapped) per command, in the parser's order, with every option."""
    text = cli.synopsis()
    starts = [ln.split()[1] for ln in text.splitlines() if ln.startswith("vpatch ")]
    assert starts == list(subcommands())
    assert all(len(ln) <= 100 for ln in text.splitlines())
    for name, p in subcommands().items():
        block = text.split(f"vpatch {name} ", 1)[1].split("\nvpatch ", 1)[0]
        for a in p._actions:
            if a.option_strings and a.dest != "help":
                assert max(a.option_strings, key=len) in block, (name, a.dest)
