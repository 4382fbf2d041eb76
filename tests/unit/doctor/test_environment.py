"""The serving environment: which vLLM `--python` has, and `vpatch check`'s
report on it (readiness, and each patch's state by slug)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from support import env as fake_env
from vpatch import lock
from vpatch.doctor import environment as E
from vpatch.errors import ConfigError

fake, fake_release, fake_template = fake_env.fake, fake_env.fake_release, fake_env.fake_template


def test_find_vllm(fake):
    env = E.find_vllm(str(fake.py))
    assert (env.dist, env.version, Path(env.location)) == ("vllm", fake_env.RELEASE, fake.root)
    none = E.find_vllm(sys.executable)  # vpatch's own environment has no vLLM
    assert none.version is None and none.dist is None


def test_find_vllm_bad_python(tmp_path):
    with pytest.raises(ConfigError, match="no such interpreter"):
        E.find_vllm(str(tmp_path / "no-python"))
    with pytest.raises(ConfigError, match="not a Python 3.8\\+ interpreter"):
        E.find_vllm("false")


def test_readiness_is_what_vpatch_check_says(fake, monkeypatch):
    monkeypatch.setenv("VPATCH_ROOT", str(fake.lock_path.parent))  # the fake release's lock
    env = E.find_vllm(str(fake.py))
    pins = lock.load(fake.lock_path)
    before = E.by_check(env, pins)
    assert before.ready is False and before.known  # the series is not installed
    assert before.patches and all(s == "missing" for s in before.patches.values())
    assert fake.run("install").returncode == 0
    after = E.by_check(env, pins)
    assert after.ready is True and all(s == "applied" for s in after.patches.values())
    name = next(iter(after.patches))  # NNNN-slug, as the release's series names it
    assert before.fix(name) == "not installed" and after.fix(name) == "installed"
    assert E.by_check(E.VllmEnv(sys.executable), pins) == E.UNKNOWN  # no vLLM


def test_doctor_asks_the_interpreter_once(fake, monkeypatch):
    # find_vllm keeps what the interpreter said; by_check's `vpatch check`
    # report reuses it instead of starting the interpreter again (0.1 s a call)
    from vpatch.env import dist

    monkeypatch.setenv("VPATCH_ROOT", str(fake.lock_path.parent))
    asked = []
    real = dist.ask
    monkeypatch.setattr(dist, "ask", lambda py, *say: asked.append(py) or real(py, *say))
    env = E.find_vllm(str(fake.py))
    assert E.by_check(env, lock.load(fake.lock_path)).known and len(asked) == 1


@pytest.mark.parametrize(
    "patches,name,want",
    [
        ({"0001-a-fix": "applied"}, "0001-a-fix", "installed"),
        ({"0001-a-fix": "upstream"}, "0001-a-fix", "installed"),
        ({"0001-a-fix": "missing"}, "0001-a-fix", "not installed"),
        ({"0001-a-fix": "modified"}, "0001-a-fix", "not installed"),
        ({"0001-a-fix-more": "applied"}, "0001-a-fix", "none"),  # the whole slug, not a prefix
        ({"0001-not-a-fix": "applied"}, "0001-a-fix", "none"),
        ({"0002-a-fix": "applied"}, "0001-a-fix", "none"),  # its place in the series too
        ({}, "0001-a-fix", "none"),
        ({"0001-a-fix": "applied"}, None, "none"),  # the release's series has no such patch
    ],
)
def test_fix_by_its_name_in_the_series(patches, name, want):
    assert E.Readiness(True, patches).fix(name) == want
    assert E.UNKNOWN.fix(name) == "unknown"
