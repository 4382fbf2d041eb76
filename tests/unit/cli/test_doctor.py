"""cli/doctor.py: `vpatch doctor`'s options become a Request; exit 1 when
doctor found an error."""

import json

import pytest
from vpatch import cli
from vpatch.commands import doctor
from vpatch.shown import Shown


class Report(Shown):
    def __init__(self, ok):
        self.ok = ok

    def to_json(self):
        return {"ok": self.ok}

    def lines(self):
        return [f"ok: {self.ok}"]


@pytest.mark.parametrize(("ok", "code"), [(True, 0), (False, 1)])
def test_the_request_and_the_exit_code(monkeypatch, capsys, ok, code):
    seen = []
    monkeypatch.setattr(doctor, "doctor", lambda req, say, pins: seen.append(req) or Report(ok))
    argv = ["doctor", "--drafter", "d", "--tensor-parallel-size", "8", "--offline"]
    assert cli.main([*argv, "--", "vllm", "serve", "t", "--seed", "1"]) == code
    assert capsys.readouterr().out == f"ok: {ok}\n"
    (req,) = seen
    assert req.command == ("vllm", "serve", "t", "--seed", "1")
    assert (req.drafter, req.target, req.python) == ("d", None, None)  # None: python3
    assert (req.vllm, req.patched, req.platform) == (None, False, "")
    assert (req.tensor_parallel_size, req.pipeline_parallel_size) == (8, 1)
    assert req.num_speculative_tokens == 3 and req.offline is True
    assert cli.main(["doctor", "--format", "json"]) == code
    assert json.loads(capsys.readouterr().out) == {"ok": ok}


def test_a_doctor_run_reads_each_file_of_the_patch_set_once(tmp_path, monkeypatch):
    """VERSIONS.lock, rules.toml, serving.toml, patches.toml and each patch of
    the environment's series are opened once in a whole `vpatch doctor` run (the CLI loads them and
    passes them down): a part that loads the lock again, parses patches.toml
    again for its probes or renders a series twice shows here. Before a review
    fixed it: 20 opens, VERSIONS.lock 6 times, each patch twice."""
    import builtins
    import io
    from collections import Counter
    from pathlib import Path

    from support import env as fake_env
    from support import pairs as F
    from vpatch import lock, resources

    pins = lock.load()
    release = pins.default().version
    py = fake_env.build_env(tmp_path / "venv", version=release)
    t, d = F.pair(tmp_path)
    root = resources.root()
    opened: Counter[str] = Counter()
    real = io.open

    def counting(file, *a, **kw):
        if isinstance(file, (str, Path)) and Path(file).resolve().is_relative_to(root):
            opened[Path(file).resolve().relative_to(root).as_posix()] += 1
        return real(file, *a, **kw)

    monkeypatch.setattr(io, "open", counting)
    monkeypatch.setattr(builtins, "open", counting)
    argv = ["doctor", "--target", str(t), "--drafter", str(d), "--python", str(py)]
    assert cli.main([*argv, "--format", "json"]) in (0, 1)
    monkeypatch.undo()
    series = [v.path.relative_to(root).as_posix() for _, v in pins.patchset.named(release)]
    assert series and set(opened) == {
        "VERSIONS.lock",
        "rules.toml",
        "serving.toml",
        "patches/patches.toml",
        *series,
    }
    assert set(opened.values()) == {1}, opened


def test_the_help_states_the_hub_deadline():
    """--offline's help names network/hubclient.py's variable and default
    (written out: building the parser imports no library)."""
    from vpatch.cli import parser
    from vpatch.network import hubclient

    text = parser()._subparsers._group_actions[0].choices["doctor"].format_help()
    text = " ".join(text.split())
    assert f"{hubclient.VARIABLE} seconds (default {hubclient.DEFAULT:g})" in text


def test_the_server_options_become_the_request(monkeypatch, capsys):
    seen = []
    monkeypatch.setattr(doctor, "doctor", lambda req, say, pins: seen.append(req) or Report(True))
    argv = ["doctor", "--server", "http://a:1", "http://b:2", "--interval", "5"]
    assert cli.main([*argv, "--", "vllm", "serve", "t"]) == 0
    (req,) = seen
    assert (req.servers, req.interval, req.command) == (
        ("http://a:1", "http://b:2"),
        5,
        ("vllm", "serve", "t"),
    )
    assert cli.main(["doctor", "--target", "t"]) == 0
    assert (seen[-1].servers, seen[-1].interval) == ((), None)
    for bad in (["--interval", "0"], ["--interval", "1.5"], ["--server"]):
        with pytest.raises(SystemExit) as e:
            cli.main(["doctor", "--server", "http://a:1", *bad])
        assert e.value.code == 2
    capsys.readouterr()


def test_a_repeated_server_option_adds_its_urls(monkeypatch):
    """`--server A --server B` reads both servers, as `--server A B` does."""
    seen = []
    monkeypatch.setattr(doctor, "doctor", lambda req, say, pins: seen.append(req) or Report(True))
    argv = ["doctor", "--server", "http://a:1", "--server", "http://b:2", "http://c:3"]
    assert cli.main(argv) == 0
    assert seen[0].servers == ("http://a:1", "http://b:2", "http://c:3")


def test_the_help_states_the_server_deadline_and_exit_3():
    from vpatch.cli import parser
    from vpatch.postflight import server

    text = parser()._subparsers._group_actions[0].choices["doctor"].format_help()
    flat = " ".join(text.split())
    assert f"{server.VARIABLE} seconds (default {server.DEFAULT:g})" in flat
    assert "3 --server: a server that cannot be reached, or does not answer in time" in flat
    assert "a hub's or server's answer that broke off (try again)" in flat


@pytest.fixture
def vllm():
    from support import vllm_server as V

    with V.Vllm().running() as v:
        yield v


def test_a_server_end_to_end(vllm, capsys):
    """`vpatch doctor --server URL` on the stand-in: its figures printed,
    exit 0 (a warning: whether the series is installed cannot be told); no
    drafts while it decodes: exit 1; JSON."""
    from support import vllm_server as V
    from vpatch.postflight.server import Counters

    assert cli.main(["doctor", "--server", vllm.url]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"server   {vllm.url}: vLLM {V.NEWEST}"
    assert "acceptance rate 0.433, mean acceptance length 2.30" in out[2]
    assert out[-1] == "ok: 0 errors, 1 warning"
    vllm.metrics = V.render({(V.MODEL, "0"): Counters(0, 0, 0, (0, 0, 0), 500, 8, 0)})
    assert cli.main(["doctor", "--server", vllm.url, "--format", "json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["ok"] is False
    assert [f["check"] for f in data["findings"] if f["severity"] == "error"] == ["drafts"]
    assert data["servers"][0]["figures"][0]["since_start"]["generated"] == 500


def test_platform_is_passed_on_and_its_choices_are_serving_s(monkeypatch, capsys):
    """--platform takes serving.py's PLATFORMS (the parser imports no
    library, so the list is written there too: held equal here)."""
    from vpatch import serving

    seen = []
    monkeypatch.setattr(doctor, "doctor", lambda req, say, pins: seen.append(req) or Report(True))
    assert cli.main(["doctor", "--vllm", "X", "--platform", "rocm"]) == 0
    assert seen[-1].platform == "rocm"
    with pytest.raises(SystemExit):
        cli.main(["doctor", "--vllm", "X", "--platform", "tpu"])
    assert "invalid choice" in capsys.readouterr().err
    for platform in serving.PLATFORMS:
        assert cli.main(["doctor", "--vllm", "X", "--platform", platform]) == 0
