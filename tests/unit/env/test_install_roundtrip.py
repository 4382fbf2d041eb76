"""env/install.py's round trip on the fake vLLM (support.env): a dry run,
an install of another series, an uninstall back to the release's files;
and the commands without git, through the CLI."""

from __future__ import annotations

import pytest
from support import env as fake_env
from support import make_series
from support.env import BASE, NEW_MODEL, OLD, PATCHED, RELEASE, show
from vpatch import lock
from vpatch.env import install
from vpatch.errors import ConfigError

fake, fake_release, fake_template = fake_env.fake, fake_env.fake_release, fake_env.fake_template


def test_install_dry_run_then_install_then_uninstall(fake, monkeypatch, tmp_path):
    monkeypatch.setenv("VPATCH_ROOT", str(fake.lock_path.parent))
    said: list[str] = []
    pins = lock.load(fake.lock_path)
    dry = install.install(fake.py, dry_run=True, say=said.append, pins=pins)
    assert (dry.action, dry.release, dry.files) == ("dry-run", RELEASE, sorted(PATCHED))
    assert show(fake.py) == OLD
    # series_dir reaches the engine: a series of the first patch alone
    other = make_series(tmp_path, BASE, [("model: new behaviour", {"vllm/model.py": NEW_MODEL})])
    res = install.install(fake.py, other, say=said.append, pins=pins)
    assert (res.action, res.files) == ("installed", ["vllm/model.py"])
    assert show(fake.py) == "new ['llama']"
    assert install.uninstall(fake.py, dry_run=True).action == "dry-run"
    assert show(fake.py) == "new ['llama']"
    back = install.uninstall(fake.py, say=said.append)
    assert (back.action, back.files) == ("uninstalled", ["vllm/model.py"]) and show(fake.py) == OLD
    assert said == []  # nothing was interrupted: nothing to say


def test_no_python_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="no such interpreter"):
        install.install(tmp_path / "nothing", pins=lock.load())
    with pytest.raises(ConfigError, match="no such interpreter"):
        install.uninstall(tmp_path / "nothing")


def test_install_without_git_says_so_and_changes_nothing(fake, tmp_path):
    """It was `internal error: ImportError: Failed to initialize: Bad git
    executable`, exit 70; `check` and `uninstall` need no git."""
    (tmp_path / "bin").mkdir()
    no_git = {"PATH": str(tmp_path / "bin")}
    before = fake_env.snapshot(fake.py)
    r = fake.run("install", env=no_git)
    assert r.returncode == 9, r.stderr
    assert fake_env.one_error_line(r).startswith("vpatch: error: git not found on PATH")
    assert fake_env.snapshot(fake.py) == before
    assert fake.run("check", env=no_git).returncode == 1  # not ready, said without git
    assert fake.run("install").returncode == 0
    assert fake.run("check", env=no_git).returncode == 0
    assert fake.run("uninstall", env=no_git).returncode == 0
    assert fake_env.snapshot(fake.py) == before
