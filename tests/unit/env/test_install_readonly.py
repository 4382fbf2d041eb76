"""env/install.py where it cannot write: read-only site-packages, a
read-only folder or an immutable file in the middle of the series, an
update that fails after taking the old series out. A failed install rolls
back every file it replaced (env/journal.py) and leaves the environment
exactly as it was; it says nothing was changed only when that was checked.
The rest of install's tests: test_install.py."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from support import env as fake_env
from support.cli import command, environment
from support.env import OLD, RELEASE, exact, make_fake_series, one_error_line, show, snapshot
from support.env import Fake as FakeEnv
from vpatch.env import install as inst
from vpatch.env import receipt
from vpatch.errors import TreeError

# the fixtures (defined in fake_env, shared with test_check and the env tests)
fake, fake_release, fake_template = fake_env.fake, fake_env.fake_release, fake_env.fake_template


def _read_only(fake: FakeEnv, *args: str, folder: str = ""):
    """Run vpatch with site-packages (or its folder `folder`) read-only: a
    read-only bind mount in a user namespace (EROFS; EXDEV for a rename
    into a folder mounted apart), else, not as root, file modes (EACCES)."""
    root = fake.root / folder
    if os.geteuid() != 0:
        mode = root.stat().st_mode
        for p in [root, *root.rglob("*")]:
            if p.is_dir():
                p.chmod(0o555)
        try:
            return fake.run(*args)
        finally:
            for p in [root, *root.rglob("*")]:
                if p.is_dir():
                    p.chmod(mode)
    if not shutil.which("unshare"):
        pytest.skip("running as root without unshare: no way to make a folder read-only")
    inner = [*command(), *args, "--python", str(fake.py)]
    script = 'mount --bind "$0" "$0" && mount -o remount,ro,bind "$0" && exec "$@"'
    cmd = ["unshare", "-rm", "sh", "-c", script, str(root), *inner]
    probe = subprocess.run(["unshare", "-rm", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip("user namespaces are not available here")
    return subprocess.run(
        cmd,
        capture_output=True,
        text=True,
        env=environment(fake_env.root_env(fake.lock_path)),
    )


def test_read_only_site_packages(fake):
    before = snapshot(fake.py)
    r = _read_only(fake, "install")
    assert r.returncode == 6
    line = one_error_line(r)
    assert "cannot write" in line and "nothing was changed" in line
    assert snapshot(fake.py) == before
    # check only reads: it works there
    r = _read_only(fake, "check")
    assert r.returncode == 1 and "missing  0001-step-1" in r.stdout, r.stderr
    # an installed environment made read-only: uninstall refuses, changes nothing
    assert fake.run("install").returncode == 0
    after = snapshot(fake.py)
    r = _read_only(fake, "uninstall")
    assert r.returncode == 6 and "cannot write" in one_error_line(r)
    assert snapshot(fake.py) == after


def test_a_folder_it_cannot_write_leaves_the_environment_exactly_as_it_was(fake):
    """The sources are replaced, then their .pyc cannot be (a
    read-only mount over __pycache__); the rollback must not stop at the
    .pyc it never replaced (whose mode it cannot set there), and the
    environment is exactly as it was, journal gone."""
    before = exact(fake.py)
    r = _read_only(fake, "install", folder="vllm/__pycache__")
    assert r.returncode == 6, r.stderr
    assert exact(fake.py) == before
    assert show(fake.py) == OLD
    line = one_error_line(r)
    assert f"cannot write {fake.root / 'vllm/__pycache__'}" in line, line
    assert "rolled back and checked: nothing was changed" in line


@pytest.mark.skipif(os.geteuid() != 0, reason="chattr +i needs root (CAP_LINUX_IMMUTABLE)")
def test_a_file_it_cannot_replace_leaves_the_environment_exactly_as_it_was(fake):
    """As a hostile pass filed it: `chattr +i` on the series' second file (the
    first, vllm/config.py, is replaced before it fails)."""
    target = fake.root / "vllm/model.py"
    if shutil.which("chattr") is None:
        pytest.skip("no chattr here")
    before = exact(fake.py)
    if subprocess.run(["chattr", "+i", target], capture_output=True).returncode != 0:
        pytest.skip(f"this file system takes no immutable flag ({fake.root})")
    try:
        r = fake.run("install")
    finally:
        subprocess.run(["chattr", "-i", target], check=True)
    assert r.returncode == 6, r.stderr
    assert exact(fake.py) == before
    assert show(fake.py) == OLD
    line = one_error_line(r)
    assert f"cannot write {target}: Operation not permitted" in line
    assert "rolled back and checked: nothing was changed" in line


def test_an_update_that_fails_never_says_nothing_was_changed(fake, tmp_path, monkeypatch):
    """An update takes the old series out first (one transaction), then
    puts the new one in (another); when the second fails and is rolled
    back, vLLM is unpatched, not as the command found it: said so."""
    assert fake.run("install").returncode == 0
    other = make_fake_series(tmp_path / "other")
    text = (other / "0002-step-2.patch").read_text().replace("'deepseek'", "'kimi'")
    (other / "0002-step-2.patch").write_text(text)
    real = os.replace

    def replace(src, dst):
        if Path(dst).name == receipt.NAME:  # the new receipt: only the second one writes it
            raise OSError(errno.EROFS, "Read-only file system")
        return real(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    with pytest.raises(TreeError) as err:
        inst.install(fake.py, other, pins=fake.pins(), checks=fake.checks())
    monkeypatch.undo()
    line = str(err.value)
    assert "rolled back and checked" in line
    assert f"before that, series {RELEASE} (" in line and "is unpatched now" in line
    assert show(fake.py) == OLD and receipt.read(fake.dist_info) is None
