"""Targets and drafters read as vLLM reads them."""

from __future__ import annotations

import json

import pytest
from support import pairs as F
from vpatch.doctor import configs
from vpatch.errors import ConfigError


@pytest.mark.parametrize(
    "name,family,vocab,heads",
    [
        ("kimi_k25", "kimi_k25", 163840, 64),
        ("kimi_k2", "kimi_k2", 163840, 64),
        ("deepseek_v3", "deepseek_v3", 129280, 128),
    ],
)
def test_targets(tmp_path, name, family, vocab, heads):
    t = configs.read_target(F.write_model(tmp_path, F.TARGETS[name]()))
    assert (t.family, t.num_layers, t.hidden_size, t.vocab_size, t.num_heads) == (
        family,
        61,
        7168,
        vocab,
        heads,
    )
    assert t.config_class  # every public target names its config class


def test_kimi_k25_reads_the_text_model(tmp_path):
    t = configs.read_target(F.write_model(tmp_path, F.kimi_k25()))
    assert t.model_type == "kimi_k25" and t.text_model_type == "deepseek_v3"
    assert t.media_placeholder_token_id == 163605
    assert "Kimi-K2.5" in t.describe()


def test_remote_code_the_repo_names(tmp_path):
    cfg = F.deepseek_v3()
    F.write_model(tmp_path, cfg)
    t = configs.read_target(tmp_path)
    assert (t.config_class, t.tokenizer_auto_map) == (
        "configuration_deepseek.DeepseekV3Config",
        None,
    )
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(F.KIMI_TOKENIZER))
    t = configs.read_target(tmp_path)
    assert t.tokenizer_auto_map == "tokenization_kimi.TikTokenTokenizer"
    assert t.tokenizer_class == "TikTokenTokenizer"
    del cfg["auto_map"]
    F.write_model(tmp_path, cfg)
    assert configs.read_target(tmp_path).config_class is None


@pytest.mark.parametrize(
    "edit,phrase",
    [
        (lambda c: c.pop("architectures"), "no architectures"),
        (
            lambda c: c["text_config"].pop("num_hidden_layers"),
            "num_hidden_layers must be a whole number from 1 to 10000, got None",
        ),
        (
            lambda c: c["text_config"].update(hidden_size="7168"),
            "hidden_size must be a whole number .*, got '7168'",
        ),
        (
            lambda c: c["text_config"].update(num_hidden_layers=10**18),
            r"num_hidden_layers must be a whole number from 1 to 10000, got 10{18}",
        ),
        (lambda c: c["text_config"].update(num_hidden_layers=10_000), None),
        (
            lambda c: c["text_config"].update(vocab_size=2**31),
            r"vocab_size must be a whole number from 1 to 2147483647, got 2147483648",
        ),
    ],
)
def test_bad_targets(tmp_path, edit, phrase):
    cfg = F.kimi_k25()
    edit(cfg)
    if phrase is None:  # the most that is taken
        configs.read_target(F.write_model(tmp_path, cfg))
        return
    with pytest.raises(ConfigError, match=phrase):
        configs.read_target(F.write_model(tmp_path, cfg))


def test_missing_or_broken_config(tmp_path):
    with pytest.raises(ConfigError, match="missing"):
        configs.read_target(tmp_path)
    (tmp_path / "config.json").write_text("[1]")
    with pytest.raises(ConfigError, match="not a JSON object"):
        configs.read_drafter(tmp_path)


def test_drafter_formats(tmp_path):
    cfg, _ = F.drafter_for("kimi_k25", "speculators")
    d = configs.read_drafter(F.write_model(tmp_path / "s", cfg))
    assert d.speculators and not d.problems
    cfg, _ = F.drafter_for("kimi_k25", "vllm")
    d = configs.read_drafter(F.write_model(tmp_path / "v", cfg))
    assert d.format == "vllm" and not d.problems
    cfg, _ = F.drafter_for("kimi_k25", "speculators")
    cfg["model_type"] = "llama"
    d = configs.read_drafter(F.write_model(tmp_path / "m", cfg))
    assert d.format == "vllm" and "ignores the speculators fields" in d.problems[0]
    cfg.pop("model_type")
    cfg.pop("transformer_layer_config")
    d = configs.read_drafter(F.write_model(tmp_path / "n", cfg))
    assert d.speculators and "transformer_layer_config" in d.problems[0]
