"""env/check.py: the readiness report `vpatch check` prints and `vpatch
doctor` asks, on the fake vLLM (support.env)."""

from __future__ import annotations

from support import env as fake_env
from support.env import RELEASE
from vpatch.env import check

fake, fake_release, fake_template = fake_env.fake, fake_env.fake_release, fake_env.fake_template


def test_inspect_api(fake):
    rep = check.inspect(fake.py, pins=fake.pins(), checks=fake.checks())
    assert isinstance(rep, check.Report)
    assert (rep.dist, rep.version, rep.release, rep.series) == ("vllm", RELEASE, RELEASE, RELEASE)
    assert rep.location == str(fake.root) and rep.python.endswith("/bin/python")
    assert rep.patches == {"0001-step-1": "missing", "0002-step-2": "missing"}
    assert rep.eagle3_ready is False and rep.installed is None and rep.recovered is None
    assert rep.to_json()["vllm"] == {"dist": "vllm", "version": RELEASE, "location": str(fake.root)}
    assert "NOT ready" in rep.to_text()


def test_inspect_rolls_back_an_interrupted_install_first(fake):
    """A journal left by a killed install is rolled back before the report."""
    r = fake.run("install", env={"VPATCH_TEST_KILL_AT": "3"})
    assert r.returncode != 0
    rep = check.inspect(fake.py, pins=fake.pins(), checks=fake.checks())
    assert rep.recovered and not rep.eagle3_ready
    assert set(rep.patches.values()) == {"missing"}


def test_a_newer_series_names_the_install_that_updates_it(fake, tmp_path):
    """A series installed from --series that is not this vpatch's: the note
    says to update, with the command for this environment (`--python PY`:
    it once said `vpatch install`, which reads python3 on PATH)."""
    import shutil

    older = tmp_path / "older"
    shutil.copytree(fake.series_dir, older)
    (older / "series").write_text("0001-step-1.patch\n")
    assert fake.run("install", "--series", str(older)).returncode == 0
    rep = check.inspect(fake.py, pins=fake.pins(), checks=fake.checks())
    (note,) = rep.notes
    assert note.startswith(f"this vpatch has a newer series {RELEASE} (")
    assert note.endswith(f"run `vpatch install --python {fake.py}` to update")
