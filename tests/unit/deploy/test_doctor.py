"""doctor as one library call (deploy.doctor.run): a request (a serve
command, or --target/--drafter), the environment's readiness from the callable
it is given, bad input as ConfigError."""

from __future__ import annotations

import json

import pytest
from support import deploy as F
from support import env as fake_env
from vpatch.deploy import doctor as D
from vpatch.deploy.environment import Readiness
from vpatch.errors import ConfigError


@pytest.fixture(scope="module")
def py(tmp_path_factory) -> str:
    return str(fake_env.build_env(tmp_path_factory.mktemp("env") / "venv", version="0.25.0"))


def test_run_takes_readiness_from_the_callable(tmp_path, py):
    t, d = F.pair(tmp_path)
    seen = []

    def ready(env):
        seen.append(env)
        return Readiness(True)

    req = D.Request(target=str(t), drafter=str(d), python=py, tensor_parallel_size=8)
    r = D.run(req, ready=ready)
    assert seen[0].version == "0.25.0" and seen[0].dist == "vllm"
    assert r.ok, r.to_text()
    assert "--trust-remote-code" in r.serve  # the Kimi-K2.5 target is remote code
    # EAGLE-3 is upstream on 0.25.0: without the layer-0 fix the pair still
    # runs (it asks for no layer 0), and doctor says what is missing
    r = D.run(req, ready=lambda env: Readiness(False))
    assert r.ok
    assert any(f.check == "vllm" and "layer-0 fix not installed" in f.message for f in r.findings)


def test_run_a_serve_command(tmp_path, py):
    t, d = F.pair(tmp_path, fmt="specforge_kimi")
    spec = json.dumps({"method": "eagle3", "model": str(d), "num_speculative_tokens": 3})
    cmd = ("vllm", "serve", str(t), "-tp", "8", "--trust-remote-code", "--speculative-config", spec)
    r = D.run(D.Request(command=cmd, python=py), ready=lambda env: Readiness(True))
    # 0.25.0: Kimi-K2.5's 262144 positions by default, the drafter has 131072
    assert not r.ok and "max_model_len" in {f.check for f in r.findings if f.severity == "error"}
    assert r.serve.startswith(f"vllm serve {t} --tensor-parallel-size 8 --max-model-len 131072 ")


@pytest.mark.parametrize(
    "req,phrase",
    [
        (D.Request(), "nothing to check"),
        (D.Request(target="t"), "nothing to check"),
        (D.Request(command=("vllm", "serve", "M"), target="t", drafter="d"), "not both"),
        (D.Request(target="t", drafter="d", tensor_parallel_size=0), "at least 1"),
        (D.Request(target="t", drafter="d", num_speculative_tokens=0), "at least 1"),
    ],
)
def test_bad_requests(req, phrase):
    with pytest.raises(ConfigError, match=phrase):
        D.run(req, ready=lambda env: Readiness(True))


def test_a_drafter_hub_id_not_in_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf"))
    t, _ = F.pair(tmp_path)
    spec = json.dumps({"method": "eagle3", "model": "acme/nowhere", "num_speculative_tokens": 3})
    req = D.Request(command=("vllm", "serve", str(t), "--speculative-config", spec))
    with pytest.raises(ConfigError, match="not in the local Hugging Face cache"):
        D.run(req, ready=lambda env: Readiness(True))
