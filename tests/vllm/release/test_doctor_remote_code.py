"""`vpatch doctor`'s verdict on --trust-remote-code against real vLLM.

Each target family's config as its public repo writes it (DeepSeek-V3's and
DeepSeek-V2's name their config class in auto_map, as Kimi-K2's and
Kimi-K2.5's do) meets each tokenizer shape: a tokenizer transformers ships
(DeepSeek-V3's LlamaTokenizerFast; here the fixtures' PreTrainedTokenizerFast)
or Kimi's, a class of the repo (tokenization_kimi.TikTokenTokenizer, named
in tokenizer_config.json's auto_map, no tokenizer.json). This vLLM is asked
with trust_remote_code=False for the config and the tokenizer, in a process
of its own (remote_code.py); `vpatch doctor -- vllm serve T ...` without
--trust-remote-code must call the target an error exactly when vLLM does not
load one of them as the repo means it (refuses it; or, for a tokenizer class
of the repo, makes another: transformers 5's TokenizersBackend), and name
which. The same on both installs: no patch of the series touches it, so
it runs on the patched install only (one_install).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import FIXTURES
from tier_builders.doctor_pairs import VARIANTS, make, severity, verdict_serve

pytestmark = pytest.mark.one_install
HERE = Path(__file__).resolve().parent
DSV3_MAP = {
    "AutoConfig": "configuration_deepseek.DeepseekV3Config",
    "AutoModel": "modeling_deepseek.DeepseekV3Model",
    "AutoModelForCausalLM": "modeling_deepseek.DeepseekV3ForCausalLM",
}
DSV2_MAP = {
    "AutoConfig": "configuration_deepseek.DeepseekV2Config",
    "AutoModel": "modeling_deepseek.DeepseekV2Model",
    "AutoModelForCausalLM": "modeling_deepseek.DeepseekV2ForCausalLM",
}
K25_MAP = {
    "AutoConfig": "configuration_kimi_k25.KimiK25Config",
    "AutoModel": "modeling_kimi_k25.KimiK25ForConditionalGeneration",
}
# name: (fixture folder, auto_map set on its config (None: the fixture's own), tokenizer)
SHAPES = {
    "deepseek_v3": ("deepseek_v3", DSV3_MAP, "transformers"),
    "deepseek_v2": ("deepseek_v2", DSV2_MAP, "transformers"),
    "kimi_k2": ("kimi_k2", None, "kimi"),
    "kimi_k25": ("kimi_k25", K25_MAP, "kimi"),
    # the two halves apart: the tokenizer alone, the config alone
    "deepseek_v3-kimi_tokenizer": ("deepseek_v3", DSV3_MAP, "kimi"),
    "kimi_k2-transformers_tokenizer": ("kimi_k2", None, "transformers"),
}
KIMI_TOKENIZER = {
    "auto_map": {"AutoTokenizer": ["tokenization_kimi.TikTokenTokenizer", None]},
    "tokenizer_class": "TikTokenTokenizer",
    "bos_token": "<s>",
    "eos_token": "</s>",
    "model_max_length": 512,
}
MEDIA_PROC_CFG = {
    "patch_size": 14,
    "merge_kernel_size": 2,
    "temporal_merge_kernel_size": 4,
    "in_patch_limit": 64,
    "in_patch_limit_each_frame": 16,
    "in_patch_limit_video": None,
    "patch_limit_on_one_side": 16,
    "fixed_output_tokens": None,
    "image_mean": [0.5, 0.5, 0.5],
    "image_std": [0.5, 0.5, 0.5],
}
# The repo's tokenizer module: never imported here (nothing is trusted).
KIMI_TOKENIZER_MODULE = '''
from transformers import PreTrainedTokenizer


class TikTokenTokenizer(PreTrainedTokenizer):
    """Kimi's tiktoken tokenizer stands here as remote code: a class of the repo."""
'''


def write_shape(root: Path, name: str) -> Path:
    folder, auto_map, tokenizer = SHAPES[name]
    out = root / name
    shutil.copytree(FIXTURES / folder, out, ignore=shutil.ignore_patterns("*.safetensors"))
    cfg = json.loads((out / "config.json").read_text())
    if auto_map is not None:
        cfg["auto_map"] = {**cfg.get("auto_map", {}), **auto_map}
    (out / "config.json").write_text(json.dumps(cfg, indent=1))
    pre = out / "preprocessor_config.json"
    if pre.is_file():
        # Kimi-K2.5's media processor settings as the repo ships them, which
        # vLLM's own processor reads where it does not run the repo's
        cfg = json.loads(pre.read_text())
        cfg.setdefault("media_proc_cfg", MEDIA_PROC_CFG)
        pre.write_text(json.dumps(cfg, indent=1))
    if tokenizer == "kimi":
        (out / "tokenizer.json").unlink()
        (out / "tokenizer_config.json").write_text(json.dumps(KIMI_TOKENIZER, indent=1))
        (out / "tokenization_kimi.py").write_text(KIMI_TOKENIZER_MODULE)
        (out / "tiktoken.model").write_text("")
    return out


@pytest.fixture(scope="module")
def shapes(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("remote-code")
    return {name: write_shape(root, name) for name in SHAPES}


@pytest.fixture(scope="module")
def loaded(shapes) -> dict[str, dict]:
    """What vLLM does with each shape without trust_remote_code
    (remote_code.py, in a process of its own)."""
    cmd = [sys.executable, "-m", "tier_builders.remote_code", *map(str, shapes.values())]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    return {name: got[str(path)] for name, path in shapes.items()}


def wrong(name: str, seen: dict) -> dict[str, bool]:
    """What vLLM does not load as the repo means it: the config when it is
    refused (get_config or the engine's ModelConfig); the tokenizer when it is
    refused, or when the repo names a class of its own (auto_map) and the
    tokenizer vLLM made is not of that class."""
    own = KIMI_TOKENIZER["tokenizer_class"] if SHAPES[name][2] == "kimi" else None
    other = own is not None and own not in seen.get("classes", [own])
    return {
        "config": bool(seen["config"] or seen["model_config"]),
        "tokenizer": bool(seen["tokenizer"]) or other,
    }


@pytest.fixture(scope="module")
def drafter(tmp_path_factory) -> Path:
    return make(FIXTURES, tmp_path_factory.mktemp("drafter") / "good", VARIANTS["good"])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_doctor_trust_remote_code_verdict_matches_vllm(name, shapes, loaded, drafter):
    spec = json.dumps({"method": "eagle3", "model": str(drafter), "num_speculative_tokens": 3})
    report = verdict_serve("vllm", "serve", str(shapes[name]), "--speculative-config", spec)
    target = next(f for f in report.findings if f.check == "target")
    bad = wrong(name, loaded[name])
    detail = f"{name}: vLLM {loaded[name]}; doctor: {target.severity} {target.message}"
    assert (severity(report, "target") == "error") == any(bad.values()), detail
    assert ("its config (" in target.message) == bad["config"], detail
    assert ("its tokenizer (" in target.message) == bad["tokenizer"], detail
    if any(bad.values()):
        assert "--trust-remote-code" in report.serve, detail
    if loaded[name]["tokenizer"] is None and bad["tokenizer"]:  # transformers 5
        assert "TokenizersBackend" in target.message, detail


def test_each_verdict_is_exercised(loaded):
    """The shapes bite on every release: DeepSeek-V3 as its repo ships it
    loads without remote code, and Kimi's tokenizer never loads as the repo
    means it, so both verdicts above are asked of doctor."""
    assert not any(wrong("deepseek_v3", loaded["deepseek_v3"]).values())
    assert wrong("deepseek_v3-kimi_tokenizer", loaded["deepseek_v3-kimi_tokenizer"])["tokenizer"]
