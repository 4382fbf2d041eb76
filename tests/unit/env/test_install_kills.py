"""env/install.py under SIGKILL (the journal's recovery): a kill at seeded
random points of install and uninstall (VPATCH_TEST_KILL_AT, the journal's
fault injection), during recovery and after random delays, leaves the
environment either as it was or as the command makes it, and the setting
itself is read with its bound. The rest of install's tests: test_install.py."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time

import pytest
from support import env as fake_env
from support.cli import command, environment
from support.env import OLD, make_fake, one_error_line, show, snapshot
from support.env import Fake as FakeEnv

# the fixtures (defined in fake_env, shared with test_check and the env tests)
fake, fake_release, fake_template = fake_env.fake, fake_env.fake_release, fake_env.fake_template


# -- SIGKILL at seeded random points ------------------------------------------------------

SEED = int(os.environ.get("VPATCH_KILL_SEED", "1129"))
SAMPLES = int(os.environ.get("VPATCH_KILL_SAMPLES", "4"))


@pytest.fixture
def hashed(fake_release, tmp_path) -> FakeEnv:
    """Bytecode in checked-hash mode: the patched state is the same bytes on
    every install, so a whole-tree snapshot names the state."""
    f = make_fake(fake_release, tmp_path / "venv", compile=False)
    subprocess.run(
        [str(f.py), "-m", "compileall", "-q", "--invalidation-mode", "checked-hash", f.root],
        check=True,
    )
    return f


def _states(f: FakeEnv) -> tuple[dict, dict, int, int]:
    """(original snapshot, installed snapshot, steps of install, steps of
    uninstall), from one counted install and uninstall."""
    before = snapshot(f.py)
    steps = []
    for cmd in ("install", "uninstall"):
        r = f.run(cmd, env={"VPATCH_TEST_KILL_AT": "0"})
        assert r.returncode == 0, r.stderr
        steps.append(int(r.stderr.split("vpatch-test-steps ")[1].split()[0]))
        if cmd == "install":
            after = snapshot(f.py)
    assert snapshot(f.py) == before
    return before, after, *steps


def _restore(f: FakeEnv, state: dict) -> None:
    """Back to a snapshot state through vpatch itself: check (recovery),
    then install or uninstall."""
    f.run("check")
    now = snapshot(f.py)
    if now == state:
        return
    r = f.run("uninstall" if (f.dist_info / "vpatch.json").exists() else "install")
    assert r.returncode == 0, r.stderr
    assert snapshot(f.py) == state


def _consistent(f: FakeEnv, before, after) -> str:
    """After a kill: the next `check` recovers; then the tree is exactly the
    original or exactly the installed one, and check says which."""
    r = f.run("check", "--format", "json")
    assert r.returncode in (0, 1), r.stderr
    now = snapshot(f.py)
    assert now in (before, after), "half-patched environment after recovery"
    ready = '"eagle3_ready": true' in r.stdout
    assert ready == (now == after)
    return "after" if now == after else "before"


def test_sigkill_at_seeded_random_points_of_install_and_uninstall(hashed):
    f = hashed
    before, after, n_install, n_uninstall = _states(f)
    assert n_install > 10 and n_uninstall > 10
    rng = random.Random(SEED)
    for cmd, n, start in (("install", n_install, before), ("uninstall", n_uninstall, after)):
        points = sorted(rng.sample(range(1, n + 1), min(SAMPLES, n)))
        for k in points:
            _restore(f, start)
            r = f.run(cmd, env={"VPATCH_TEST_KILL_AT": str(k)})
            assert r.returncode == -signal.SIGKILL, (cmd, k, r.stderr)
            _consistent(f, before, after)
            r = f.run(cmd)  # the re-run finishes the job
            assert r.returncode == 0, r.stderr
            assert snapshot(f.py) == (after if cmd == "install" else before)


def test_sigkill_during_recovery_and_after_random_delays(hashed):
    f = hashed
    before, after, n_install, _ = _states(f)
    rng = random.Random(SEED + 1)
    # a kill inside the rollback itself: the next run rolls back again
    for _ in range(2):
        k = rng.randrange(n_install // 2, n_install)
        r = f.run("install", env={"VPATCH_TEST_KILL_AT": str(k)})
        assert r.returncode == -signal.SIGKILL
        r = f.run("check", env={"VPATCH_TEST_KILL_AT": str(rng.randrange(1, 4))})
        assert r.returncode in (-signal.SIGKILL, 0, 1)
        _consistent(f, before, after)
        _restore(f, before)
    # plain kills after a random delay (no injected point)
    for _ in range(2):
        env = environment(fake_env.root_env(f.lock_path))
        p = subprocess.Popen(
            [*command(), "install", "--python", str(f.py)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(rng.uniform(0.2, 1.2))
        p.send_signal(signal.SIGKILL)
        p.wait()
        _consistent(f, before, after)
        _restore(f, before)


@pytest.mark.parametrize("at", ["x", "-1", "9" * 5000])
def test_the_kill_point_setting_is_read_with_the_bound(fake, at):
    """VPATCH_TEST_KILL_AT (the journal's fault injection) is a whole number
    from 0, read by settings.whole: anything else is one line, exit 2, and
    nothing changed (it was int()'s ValueError: exit 70)."""
    before = snapshot(fake.py)
    r = fake.run("install", env={"VPATCH_TEST_KILL_AT": at})
    assert r.returncode == 2 and "VPATCH_TEST_KILL_AT" in one_error_line(r), r.stderr
    assert snapshot(fake.py) == before and show(fake.py) == OLD
