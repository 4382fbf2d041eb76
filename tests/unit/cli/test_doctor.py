"""cli/doctor.py: `vpatch doctor`'s options become a Request; exit 1 when
doctor found an error."""

import json

import pytest
from vpatch import cli
from vpatch.commands import doctor


class Report:
    def __init__(self, ok):
        self.ok = ok

    def to_json(self):
        return {"ok": self.ok}

    def to_text(self):
        return f"ok: {self.ok}"


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
    assert (req.vllm, req.patched) == (None, False)
    assert (req.tensor_parallel_size, req.pipeline_parallel_size) == (8, 1)
    assert req.num_speculative_tokens == 3 and req.offline is True
    assert cli.main(["doctor", "--format", "json"]) == code
    assert json.loads(capsys.readouterr().out) == {"ok": ok}


def test_a_doctor_run_reads_each_file_of_the_patch_set_once(tmp_path, monkeypatch):
    """VERSIONS.lock, rules.toml, patches.toml and each patch of the environment's series
    are opened once in a whole `vpatch doctor` run (the CLI loads them and
    passes them down): a part that loads the lock again, parses patches.toml
    again for its probes or renders a series twice shows here. Before issue
    36: 20 opens, VERSIONS.lock 6 times, each patch twice."""
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
        "patches/patches.toml",
        *series,
    }
    assert set(opened.values()) == {1}, opened


def test_the_help_states_the_hub_deadline():
    """--offline's help names doctor/deadline.py's variable and default
    (written out: building the parser imports no library)."""
    from vpatch.cli import parser
    from vpatch.doctor import deadline

    text = parser()._subparsers._group_actions[0].choices["doctor"].format_help()
    text = " ".join(text.split())
    assert f"{deadline.VARIABLE} seconds (default {deadline.DEFAULT:g})" in text
