"""cli/check.py: `vpatch check` exits 0 when EAGLE-3 is ready, 1 when not,
in text or JSON; and on the fake vLLM (fake_env): the JSON shape, each
status, readiness and exit codes, the Python API doctor uses."""

import json

import pytest
from support import env as fake_env
from support.cli import vpatch
from support.env import BASE, NEW_MODEL, PATCHED, RELEASE, UPSTREAM, make_fake, one_error_line
from vpatch import cli, quilt
from vpatch.env import check, readiness
from vpatch.shown import Shown

fake, fake_release, fake_template = fake_env.fake, fake_env.fake_release, fake_env.fake_template


class Report(Shown):
    def __init__(self, ready):
        self.eagle3_ready = ready

    def to_json(self):
        return {"eagle3_ready": self.eagle3_ready}

    def lines(self):
        return [f"ready: {self.eagle3_ready}"]


@pytest.mark.parametrize(("ready", "code"), [(True, 0), (False, 1)])
def test_ready_or_not(monkeypatch, capsys, ready, code):
    seen = []
    monkeypatch.setattr(check, "inspect", lambda py, pins, say: seen.append(py) or Report(ready))
    assert cli.main(["check", "--python", "py"]) == code
    assert capsys.readouterr().out == f"ready: {ready}\n"
    assert cli.main(["check", "--format", "json"]) == code
    assert json.loads(capsys.readouterr().out) == {"eagle3_ready": ready}
    assert seen == ["py", None]


def as_json(f, expect_rc: int) -> dict:
    r = f.run("check", "--format", "json")
    assert r.returncode == expect_rc, r.stderr
    return json.loads(r.stdout)


def test_json_shape_before_and_after_install(fake):
    data = as_json(fake, 1)
    assert data == {
        "vllm": {"dist": "vllm", "version": RELEASE, "location": str(fake.root)},
        "patches": {"0001-step-1": "missing", "0002-step-2": "missing"},
        "eagle3_ready": False,
    }
    assert fake.run("install").returncode == 0
    data = as_json(fake, 0)
    assert data["patches"] == {"0001-step-1": "applied", "0002-step-2": "applied"}
    assert data["eagle3_ready"] is True
    assert fake.run("uninstall").returncode == 0
    assert as_json(fake, 1)["patches"]["0001-step-1"] == "missing"


def test_text_report(fake):
    r = fake.run("check")
    assert r.returncode == 1
    assert r.stdout.splitlines()[0] == f"vllm {RELEASE} at {fake.root}"
    assert "missing  0001-step-1" in r.stdout
    # the command to run names the environment (`--python PY` was once left out)
    again = f"run `vpatch install --python {fake.py}`"
    assert f"NOT ready (0001-step-1, 0002-step-2); {again}" in r.stdout
    assert fake.run("install").returncode == 0
    r = fake.run("check")
    assert r.returncode == 0
    assert f"installed  series {RELEASE} (2 patches" in r.stdout
    assert "applied  0002-step-2" in r.stdout
    assert r.stdout.rstrip().endswith("EAGLE-3 for DeepSeek-V3 / Kimi-K2.5 targets: ready")


def test_modified_after_install_and_by_hand(fake):
    assert fake.run("install").returncode == 0
    (fake.root / "vllm/model.py").write_text(NEW_MODEL + "# mine\n")
    data = as_json(fake, 1)
    assert data["patches"] == {"0001-step-1": "modified", "0002-step-2": "applied"}
    r = fake.run("check")
    assert (
        f"a file was changed by hand: reinstall vLLM, then run `vpatch install --python {fake.py}`"
        in r.stdout
    )


def test_modified_by_hand_without_vpatch(fake):
    # what people do today: sed into site-packages; RECORD no longer matches
    (fake.root / "vllm/config.py").write_text("allow = ['llama', 'deepseek']\n")
    data = as_json(fake, 1)
    assert data["patches"] == {"0001-step-1": "missing", "0002-step-2": "modified"}


def test_upstream_release_without_series(fake_release, tmp_path):
    f = make_fake(fake_release, tmp_path / "venv", version=UPSTREAM, files={**BASE, **PATCHED})
    data = as_json(f, 0)
    assert data["patches"] == {"0001-step-1": "upstream", "0002-step-2": "upstream"}
    assert data["eagle3_ready"] is True
    g = make_fake(fake_release, tmp_path / "old", version=UPSTREAM)
    assert as_json(g, 1)["patches"] == {"0001-step-1": "missing", "0002-step-2": "missing"}
    r = g.run("check")
    assert f"vpatch has no series for vLLM {UPSTREAM}" in r.stdout


def test_vpatch_wheel_build_counts_as_applied(fake_release, tmp_path):
    digest = quilt.load(fake_release[0]).content_hash()
    version = f"{RELEASE}+eagle3.{digest[:8]}"
    f = make_fake(fake_release, tmp_path / "venv", version=version, files={**BASE, **PATCHED})
    data = as_json(f, 0)
    assert data["patches"] == {"0001-step-1": "applied", "0002-step-2": "applied"}
    r = f.run("install")
    assert r.returncode == 0 and "is vpatch's wheel of series" in r.stdout
    # a wheel of another series is not mistaken for this one
    g = make_fake(fake_release, tmp_path / "other", version=f"{RELEASE}+eagle3.00000001")
    r = g.run("install")
    assert r.returncode == 2 and "a vpatch wheel of another series" in one_error_line(r)


def test_check_without_vllm_is_one_line(fake, tmp_path):
    nothing = str(tmp_path / "nothing")
    r = vpatch("check", "--python", nothing, env=fake_env.root_env(fake.lock_path), timeout=120)
    assert r.returncode == 2
    assert "no such interpreter" in one_error_line(r)


def test_subjects_of_a_release_without_series(fake):
    pins = fake.pins()
    subs = readiness.subjects(pins, None)
    assert [s.name for s in subs] == ["0001-step-1", "0002-step-2"]
    assert not any(s.own for s in subs)
