"""`vpatch doctor` on hub ids, against the stand-in hub (tests/support/hub.py)
on a cold Hugging Face cache: the verdict equals the verdict on the same
folders on disk, for every target and drafter shape of tests/support/pairs.py
and broken ones; a pair whose drafter checkpoint is 10 GB costs under 1 MB;
and the command line as a user runs it: HF_ENDPOINT, HF_TOKEN, HF_HUB_CACHE,
@revision, the serve command's --revision, --offline after a first run."""

from __future__ import annotations

import json

import pytest
from support import env as fake_env
from support import pairs as F
from support.cli import vpatch
from support.hub import TOKEN, StandIn
from support.releases import newest
from vpatch import lock
from vpatch.commands import doctor as D
from vpatch.doctor import hub
from vpatch.doctor.environment import Readiness

IDS = "eagle_aux_hidden_state_layer_ids"
CASES = {
    "kimi_k25-vllm": ("kimi_k25", "vllm", {}),
    "kimi_k25-speculators": ("kimi_k25", "speculators", {}),
    "kimi_k25-specforge": ("kimi_k25", "specforge_kimi", {}),
    "kimi_k25-torchspec-mla": ("kimi_k25", "torchspec_mla", {}),
    "kimi_k25-mla-sharded": ("kimi_k25", "torchspec_mla", {"shards": 3}),
    "kimi_k2-vllm": ("kimi_k2", "vllm", {}),
    "deepseek_v3-vllm": ("deepseek_v3", "vllm", {}),
    "deepseek_v3-specforge": ("deepseek_v3", "specforge_dsv3", {}),
    "deepseek_v3-mla": ("deepseek_v3", "mla", {}),
    "no-d2t": ("kimi_k25", "vllm", {"drop": ("d2t",)}),
    "id-out-of-range": ("kimi_k25", "vllm", {"config": {IDS: [2, 30, 99]}}),
    "fc-four-states": ("kimi_k25", "vllm", {"tensors": {"fc.weight": ("BF16", [7168, 28672])}}),
    "no-weights": ("kimi_k25", "vllm", {"drop": tuple(F.llama_tensors(F.KIMI_VOCAB))}),
}


@pytest.fixture(scope="module")
def py(tmp_path_factory) -> str:
    return str(fake_env.build_env(tmp_path_factory.mktemp("env") / "venv", version=newest()))


@pytest.fixture(scope="module")
def standin(tmp_path_factory):
    """Every case's target and drafter, published as <case>/target and
    <case>/drafter; the folders beside them."""
    root = tmp_path_factory.mktemp("pairs")
    s = StandIn()
    folders = {}
    for case, (target, fmt, kw) in CASES.items():
        t, d = F.pair(root / case, target=target, fmt=fmt, sparse=True, **kw)
        s.add(f"{case}/target", t)
        s.add(f"{case}/drafter", d)
        folders[case] = (t, d)
    s.folders = folders
    with s.running():
        yield s


def run(py, target, drafter, where=None):
    req = D.Request(target=target, drafter=drafter, python=py, tensor_parallel_size=8)
    return D.doctor(req, ready=lambda env: Readiness(True), where=where, pins=lock.load())


def seen(report, names: dict[str, str]) -> tuple[list, str]:
    """The findings and the serve command, with the models' names replaced."""

    def norm(text: str) -> str:
        for old, new in names.items():
            text = text.replace(old, new)
        return text

    found = [(f.check, f.severity, norm(f.message)) for f in report.findings]
    return found, norm(report.serve)


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_hub_gives_the_folders_verdict(standin, py, tmp_path, case):
    t, d = standin.folders[case]
    local = run(py, str(t), str(d))
    where = hub.Hub(cache_dir=tmp_path / "hf", endpoint=standin.url, offline=False)
    remote = run(py, f"{case}/target", f"{case}/drafter", where)
    names_local = {str(t): "TARGET", str(d): "DRAFTER"}
    names_hub = {f"{case}/target": "TARGET", f"{case}/drafter": "DRAFTER"}
    assert seen(remote, names_hub) == seen(local, names_local), remote.to_text()
    assert remote.ok == local.ok
    commits = [standin.repos[f"{case}/{k}"].refs["main"] for k in ("target", "drafter")]
    assert [r["commit"] for r in remote.read] == commits
    assert sum(line.startswith("read     ") for line in remote.header) == 2


def test_a_10_gb_drafter_costs_under_1_mb(tmp_path, py):
    """Kimi-K2.5 with an MLA drafter in float32 that ships its embeddings:
    12 GB in 4 shards (sparse files), read on a cold cache."""
    tensors = {
        k: ("F32", shape) for k, (_, shape) in F.mla_tensors(F.KIMI_VOCAB, F.KIMI_VOCAB).items()
    }
    tensors["embed_tokens.weight"] = ("F32", [F.KIMI_VOCAB, F.HIDDEN])
    t, d = F.pair(tmp_path / "pair", fmt="torchspec_mla", tensors=tensors, sparse=True, shards=4)
    size = sum(p.stat().st_size for p in d.glob("*.safetensors"))
    assert size > 10 * 10**9 and sum(p.stat().st_blocks for p in d.glob("*")) * 512 < 10**6
    s = StandIn()
    s.add("moonshotai/Kimi-K2.5", t)
    s.add("acme/kimi-k2.5-eagle3-mla", d)
    with s.running():
        where = hub.Hub(cache_dir=tmp_path / "hf", endpoint=s.url, offline=False)
        remote = run(py, "moonshotai/Kimi-K2.5", "acme/kimi-k2.5-eagle3-mla", where)
        assert s.served < 10**6, s.served
    local = run(py, str(t), str(d))
    assert [(f.check, f.severity) for f in remote.findings] == [
        (f.check, f.severity) for f in local.findings
    ]
    cached = sum(p.stat().st_size for p in (tmp_path / "hf").rglob("*") if p.is_file())
    assert cached < 10**5  # the configs and the index, never a shard


# -- the command line, as a user runs it ---------------------------------------------


@pytest.fixture(scope="module")
def gated(tmp_path_factory):
    """A gated Kimi-K2.5 with two commits (main, and the tag v1 before it),
    and a drafter on main and on a branch."""
    root = tmp_path_factory.mktemp("gated")
    s = StandIn()
    t1, d1 = F.pair(root / "old", sparse=True)
    t2, d2 = F.pair(root / "new", sparse=True, config={IDS: [2, 30, 99]})
    s.add("moonshotai/Kimi-K2.5", t1, tags=("v1",), gated=True)
    s.add("moonshotai/Kimi-K2.5", t2, gated=True)
    s.add("acme/drafter", d2)
    s.add("acme/drafter", d1, branch="good")
    with s.running():
        yield s


def test_cli_from_the_hub_with_hf_variables(gated, py, tmp_path):
    # no token of the machine: the gated repo refuses until one is given
    env = {"HF_ENDPOINT": gated.url, "HF_HUB_CACHE": str(tmp_path / "hf"), "HF_TOKEN": ""}
    args = ["--target", "moonshotai/Kimi-K2.5@v1", "--drafter", "acme/drafter@good"]
    args += ["--python", py, "--format", "json"]
    r = vpatch("doctor", *args, env=env)
    assert r.returncode == 2 and "gated" in r.stderr and "hf auth login" in r.stderr
    assert r.stderr.count("\n") == 1
    r = vpatch("doctor", *args, env={**env, "HF_TOKEN": TOKEN})
    assert r.returncode == 0, r.stderr + r.stdout
    out = json.loads(r.stdout)
    v1 = gated.repos["moonshotai/Kimi-K2.5"].refs["v1"]
    assert out["read"][0]["commit"] == v1 and out["read"][0]["revision"] == "v1"
    assert out["read"][1]["from"] == gated.url
    # the command vLLM needs for that pair: --revision, and "revision" for the drafter
    assert "vllm serve moonshotai/Kimi-K2.5 --revision v1 " in out["serve"]
    assert '"model": "acme/drafter", "revision": "good"' in out["serve"]
    # main's drafter asks for id 99 of 61 layers
    spec = json.dumps({"method": "eagle3", "model": "acme/drafter", "num_speculative_tokens": 3})
    words = ["--", "vllm", "serve", "moonshotai/Kimi-K2.5", "--trust-remote-code", "-tp", "8"]
    words += ["--speculative-config", spec]
    r = vpatch("doctor", "--python", py, "--format", "json", *words, env={**env, "HF_TOKEN": TOKEN})
    assert r.returncode == 1, r.stderr
    assert "aux_layers" in {
        f["check"] for f in json.loads(r.stdout)["findings"] if f["severity"] == "error"
    }
    # offline, what the first runs put in the cache is enough: configs and
    # tokenizer configs whole, and the drafter's headers doctor read and kept
    # (it advised downloading the whole weights): the same verdict
    online = vpatch("doctor", *args, env={**env, "HF_TOKEN": TOKEN})
    off = [*args, "--offline"]
    r = vpatch("doctor", *off, env={**env, "HF_ENDPOINT": "http://127.0.0.1:9"})
    assert r.returncode == 0, r.stderr
    out, was = json.loads(r.stdout), json.loads(online.stdout)
    assert out["findings"] == was["findings"] and out["serve"] == was["serve"]
    drafter, before = out["read"][1], was["read"][1]
    assert drafter["from"] == "cache" and drafter["commit"] == before["commit"]
    assert "model.safetensors header (kept from an online run)" in drafter["read"]


def test_a_bad_drafter_leaves_the_targets_whole_files(standin, py, tmp_path):
    """The target and the drafter are read at once: the drafter's failure
    takes back only what it made; the target's error, when both fail, is
    the one said."""
    from vpatch.errors import ConfigError

    cache = tmp_path / "hf"
    where = hub.Hub(cache_dir=cache, endpoint=standin.url, offline=False)
    with pytest.raises(ConfigError, match="acme/nowhere: no such repo"):
        run(py, "kimi_k25-vllm/target", "acme/nowhere", where)
    snap = next((cache / "models--kimi_k25-vllm--target" / "snapshots").iterdir())
    assert sorted(p.name for p in snap.iterdir()) == ["config.json", "tokenizer_config.json"]
    assert not (cache / "models--acme--nowhere").exists() and (cache / "CACHEDIR.TAG").is_file()
    with pytest.raises(ConfigError, match="acme/no-target: no such repo"):
        run(py, "acme/no-target", "acme/nowhere", where)
