"""doctor/checks/shapes.py: the drafter's widths, vocabularies, tensors and
heads against the target's, per release where vLLM's behaviour differs."""

from __future__ import annotations

import pytest
from support import pairs as F
from support.doctor import IDS_KEY, PINS, check, diag, errors, find, sev
from support.releases import edge, last_where, newest, newest_patched, oldest, v1_by_default
from vpatch.doctor.environment import VllmEnv

PATCHED = newest_patched()
NEWEST = newest()
_, FC_CONFIG = edge(lambda r: r.fc_width == "config")  # fc sized by num_aux_hidden_states


@pytest.mark.parametrize("version", [oldest(), PATCHED, last_where(v1_by_default), NEWEST])
def test_no_d2t_is_an_error(tmp_path, version):
    r = check(tmp_path, version, drop=("d2t", "t2d"))
    assert errors(r) == {"d2t"}
    assert "zero offsets" in find(r, "d2t").message


def test_d2t_of_the_wrong_length(tmp_path):
    r = check(tmp_path, tensors={"d2t": ("I64", [F.DRAFT_VOCAB + 1])})
    assert errors(r) == {"d2t"} and "weight load" in find(r, "d2t").message


D2T_KEPT, D2T_REFUSED = edge(lambda r: r.d2t_only_if_vocab_differs)


@pytest.mark.parametrize(
    "version,severity", [(PATCHED, "info"), (D2T_KEPT, "info"), (D2T_REFUSED, "error")]
)
def test_d2t_with_equal_vocabularies(tmp_path, version, severity):
    r = check(
        tmp_path,
        version,
        config={"draft_vocab_size": F.KIMI_VOCAB},
        tensors={
            "lm_head.weight": ("BF16", [F.KIMI_VOCAB, F.HIDDEN]),
            "d2t": ("I64", [F.KIMI_VOCAB]),
        },
    )
    assert sev(r, "d2t") == severity
    r = check(
        tmp_path / "nod2t",
        version,
        config={"draft_vocab_size": F.KIMI_VOCAB},
        drop=("d2t", "t2d"),
        tensors={"lm_head.weight": ("BF16", [F.KIMI_VOCAB, F.HIDDEN])},
    )
    assert r.ok, r.to_text()


def test_draft_vocab_defaults_to_vocab(tmp_path):
    r = check(
        tmp_path,
        delete=("draft_vocab_size",),
        drop=("d2t",),
        tensors={"lm_head.weight": ("BF16", [F.KIMI_VOCAB, F.HIDDEN])},
    )
    assert r.ok and "draft vocab 163840" in find(r, "vocab").message


@pytest.mark.parametrize("version", [PATCHED, NEWEST])
def test_fc_for_four_states(tmp_path, version):
    r = check(
        tmp_path,
        version,
        config={IDS_KEY: [2, 15, 30, 57]},
        tensors={"fc.weight": ("BF16", [F.HIDDEN, 4 * F.HIDDEN])},
    )
    assert errors(r) == {"fc"} and "weight load" in find(r, "fc").message
    three = PINS.rules.at(version).fc_width == "three"
    hint = "exactly 3 states" if three else "num_aux_hidden_states: 4"
    assert hint in find(r, "fc").message
    # where a later release reads the count, from rules.toml's fc_width
    since = PINS.rules.first_where(lambda x: x.fc_width == "config")
    said = f"({since}+ read num_aux_hidden_states)"
    assert (said in find(r, "fc").message) == three


@pytest.mark.parametrize("version,ok", [(PATCHED, False), (FC_CONFIG, True), (NEWEST, True)])
def test_num_aux_hidden_states(tmp_path, version, ok):
    r = check(
        tmp_path,
        version,
        config={IDS_KEY: [2, 15, 30, 57], "num_aux_hidden_states": 4},
        tensors={"fc.weight": ("BF16", [F.HIDDEN, 4 * F.HIDDEN])},
    )
    assert r.ok == ok, r.to_text()


def test_fewer_states_than_fc_takes(tmp_path):
    r = check(tmp_path, config={IDS_KEY: [20, 40]})
    assert errors(r) == {"fc"} and "first request" in find(r, "fc").message


def test_no_fc_in_checkpoint(tmp_path):
    assert "fc" in errors(check(tmp_path, drop=("fc.weight",)))


def test_target_hidden_size_mismatch(tmp_path):
    r = check(
        tmp_path,
        config={"target_hidden_size": 4096},
        tensors={"fc.weight": ("BF16", [F.HIDDEN, 3 * 4096])},
    )
    assert errors(r) == {"hidden_size"} and "4096" in find(r, "hidden_size").message


def test_drafter_hidden_used_when_no_target_hidden_size(tmp_path):
    r = check(tmp_path, delete=("target_hidden_size",))
    assert r.ok and "hidden_size (no target_hidden_size)" in find(r, "hidden_size").message


def test_null_target_hidden_size(tmp_path):
    r = check(tmp_path / "a", config={"target_hidden_size": None})
    assert "hidden_size" in errors(r) and "null" in find(r, "hidden_size").message
    # the speculators converter skips a null (its configs write one)
    assert check(tmp_path / "b", fmt="speculators").ok


def test_drafter_for_another_vocabulary(tmp_path):
    cfg, ten = F.drafter_for("deepseek_v3", "vllm")
    t = F.write_model(tmp_path / "kimi", F.kimi_k25())
    d = F.write_model(tmp_path / "ds-drafter", cfg, ten)
    env = VllmEnv("python3", "vllm", PATCHED, "/x")
    r = diag(t, d, env)
    assert "vocab" in errors(r) and "another tokenizer" in find(r, "vocab").message


def test_lm_head(tmp_path):
    assert "vocab" in errors(check(tmp_path / "a", drop=("lm_head.weight",)))
    r = check(tmp_path / "b", tensors={"lm_head.weight": ("BF16", [F.KIMI_VOCAB, F.HIDDEN])})
    assert "vocab" in errors(r) and "weight load" in find(r, "vocab").message


def test_embed_tokens(tmp_path):
    r = check(tmp_path / "a", tensors={"embed_tokens.weight": ("BF16", [F.KIMI_VOCAB, F.HIDDEN])})
    assert r.ok and "own embed_tokens" in find(r, "embed_tokens").message
    r = check(tmp_path / "b", tensors={"embed_tokens.weight": ("BF16", [F.KIMI_VOCAB, 4096])})
    assert errors(r) == {"embed_tokens"}
    r = check(
        tmp_path / "c",
        config={"hidden_size": 4096},
        tensors={
            "fc.weight": ("BF16", [4096, 3 * F.HIDDEN]),
            "lm_head.weight": ("BF16", [F.DRAFT_VOCAB, 4096]),
        },
    )
    assert errors(r) == {"embed_tokens"}, r.to_text()


def test_tensor_parallel(tmp_path):
    assert errors(check(tmp_path / "a", tp=7)) == {"tensor_parallel"}
    assert check(tmp_path / "b", tp=16).ok  # 8 KV heads replicated over 16 ranks
    r = check(tmp_path / "c", config={"num_key_value_heads": 3})
    assert errors(r) == {"tensor_parallel"} and "KV heads" in find(r, "tensor_parallel").message


def test_pickled_weights_are_not_read(tmp_path):
    t, d = F.pair(tmp_path)
    (d / "model.safetensors").unlink()
    (d / "pytorch_model.bin").write_bytes(b"\x80not read")
    env = VllmEnv("python3", "vllm", PATCHED, "/x")
    r = diag(t, d, env)
    assert r.ok and sev(r, "weights") == "warning" and sev(r, "d2t") == "warning"


def test_no_weights(tmp_path):
    t, d = F.pair(tmp_path)
    (d / "model.safetensors").unlink()
    env = VllmEnv("python3", "vllm", PATCHED, "/x")
    r = diag(t, d, env)
    assert "weights" in errors(r)


def test_headers_only_no_tensor_data(tmp_path):
    """The fixtures' safetensors hold no data: doctor reading any would fail."""
    _, d = F.pair(tmp_path)
    f = d / "model.safetensors"
    n = int.from_bytes(f.read_bytes()[:8], "little")
    assert f.stat().st_size == 8 + n
    assert check(tmp_path / "again").ok
