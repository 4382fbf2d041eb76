import subprocess
import sys

import pytest
from vpatch import cli


def run(*args):
    return subprocess.run(
        [sys.executable, "-m", "vpatch.cli", *args], capture_output=True, text=True
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


def test_offline_with_empty_cache(tmp_path, monkeypatch):
    r = subprocess.run(
        [sys.executable, "-m", "vpatch.cli", "fetch", "0.16.0", "--offline"],
        capture_output=True,
        text=True,
        env={**__import__("os").environ, "VPATCH_CACHE": str(tmp_path)},
    )
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
