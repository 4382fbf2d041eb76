"""doctor/checks/layers.py: the aux layer ids vLLM feeds, the states the
target yields for them, the layers the drafter was trained on (both
conventions), pipeline parallelism."""

from __future__ import annotations

import json

import pytest
from support import known
from support import pairs as F
from support.doctor import IDS_KEY, NO_ENV, PINS, check, errors, find, named, sev, span
from support.releases import (
    first_where,
    last_where,
    newest,
    newest_patched,
    serving,
    v1_by_default,
    v1_gone,
    v2_by_default,
)
from vpatch.doctor import checks as doctor
from vpatch.doctor import hub, serve
from vpatch.doctor.environment import Readiness, VllmEnv

_, FINAL_LAST, FINAL_FIXED = span("final_norm_id")
PATCHED = newest_patched()  # EAGLE-3 is vpatch's series, which checks the ids itself
LAYER0 = serving("layer0")  # EAGLE-3 upstream, layer 0 fixed by the series
V2_DEFAULT = last_where(v2_by_default)  # V1 still selectable (VLLM_USE_V2_MODEL_RUNNER=0)
V1_GONE = first_where(v1_gone)
NEWEST = newest()


def v1_reads_nested(r):
    """the V1 runner serves the targets by default and reads eagle_config's ids"""
    return v1_by_default(r) and r.v1_reads_nested_ids


def v1_before_nested(r):
    """EAGLE-3 is upstream, the V1 runner serves and reads no eagle_config ids"""
    return v1_by_default(r) and not r.v1_reads_nested_ids


V1_READS_FIRST = first_where(v1_reads_nested)
V1_READS_LAST = last_where(v1_reads_nested)
V1_BEFORE_NESTED = last_where(v1_before_nested)
# a release of each kind: the series' own, the V1 runner reading nested ids, the newest
SPREAD = [PATCHED, V1_READS_FIRST, NEWEST]


@pytest.mark.parametrize("version,phrase", [(PATCHED, "ValueError"), (NEWEST, "match no layer")])
def test_ids_out_of_range(tmp_path, version, phrase):
    r = check(tmp_path, version, config={IDS_KEY: [2, 30, 99]})
    assert "aux_layers" in errors(r) and phrase in find(r, "aux_layers").message


@pytest.mark.parametrize("version,ok", [(PATCHED, True), (FINAL_LAST, False), (FINAL_FIXED, True)])
def test_final_norm_id(tmp_path, version, ok):
    r = check(tmp_path, version, config={IDS_KEY: [2, 30, 61]})
    assert r.ok == ok, r.to_text()
    if not ok:
        assert errors(r) == {"aux_layers"} and FINAL_FIXED in find(r, "aux_layers").message


@pytest.mark.parametrize(
    "version,ready,ok",
    [
        (PATCHED, True, True),
        (LAYER0[0], True, True),  # vpatch's layer-0 fix installed (a release its span serves)
        (LAYER0[0], False, False),
        (LAYER0[-1], True, True),
        (LAYER0[-1], False, False),
    ],
)
def test_layer_0(tmp_path, version, ready, ok):
    r = check(tmp_path, version, ready, config={IDS_KEY: [0, 30, 58]})
    assert r.ok == ok, r.to_text()
    if not ok:
        assert "TypeError" in find(r, "aux_layers").message


def test_ids_out_of_order_and_duplicates(tmp_path):
    r = check(tmp_path / "a", config={IDS_KEY: [58, 2, 30]})
    assert r.ok and sev(r, "aux_layers") == "warning"
    assert "layer order [2, 30, 58]" in find(r, "aux_layers").message
    assert "acceptance 0.43 -> 0.36" in find(r, "aux_layers").message  # measured, cited
    r = check(tmp_path / "b", config={IDS_KEY: [2, 2, 30]})
    assert sev(r, "aux_layers") == "warning" and "fc" in errors(r)


def test_default_ids_when_none_given(tmp_path):
    r = check(tmp_path, delete=(IDS_KEY,))
    assert r.ok and "[2, 30, 58]" in find(r, "aux_layers").message
    assert "default" in find(r, "aux_layers").message


@pytest.mark.parametrize("version", SPREAD)
@pytest.mark.parametrize("unread", ["2,30,58", 7])
def test_ids_that_are_no_list(tmp_path, version, unread):
    """`"2,30,58"` was silently ignored, and doctor then took eagle_config's
    ids; vLLM's model runner reads ids from a list only, and a key that is
    set keeps it from reading eagle_config's: it feeds the default."""
    cfg = {IDS_KEY: unread, "eagle_config": {IDS_KEY: [3, 30, 58]}}
    r = check(tmp_path, version, config=cfg)
    f = find(r, "aux_layers")
    assert f.severity == "warning" and "feeds the drafter layers [2, 30, 58]" in f.message
    assert f"{IDS_KEY} is {str(unread)!r} ({type(unread).__name__}), not a list" in f.message
    assert ("e.g. [2, 30, 58]" if unread == "2,30,58" else "e.g. [7]") in f.message
    # trained on eagle_config's [3, 30, 58] (vLLM's convention), fed the default
    assert "trained_layers" in errors(r), r.to_text()


def test_use_aux_hidden_state_false(tmp_path):
    r = check(
        tmp_path, config={"eagle_config": {"use_aux_hidden_state": False}}, drop=("fc.weight",)
    )
    assert "no aux layers" in find(r, "aux_layers").message
    assert sev(r, "fc") == "info"


@pytest.mark.parametrize(
    "version,environ,severity",
    [
        (PATCHED, NO_ENV, "error"),  # ignored: the default (2, 30, 58) is fed
        (V1_BEFORE_NESTED, NO_ENV, "error"),
        (V1_READS_LAST, NO_ENV, "warning"),  # the V1 runner reads them: right, but not portable
        (V2_DEFAULT, NO_ENV, "error"),  # the V2 runner (default) ignores them
        (V2_DEFAULT, {"VLLM_USE_V2_MODEL_RUNNER": "0"}, "warning"),
        (V1_GONE, NO_ENV, "error"),  # no V1 runner left to read them
        (V1_GONE, {"VLLM_USE_V2_MODEL_RUNNER": "0"}, "error"),
    ],
)
def test_ids_only_nested_in_vllms_convention(tmp_path, version, environ, severity):
    cfg = {"eagle_config": {IDS_KEY: [3, 30, 58]}}
    r = check(tmp_path, version, delete=(IDS_KEY,), config=cfg, environ=environ)
    assert sev(r, "trained_layers") == severity, r.to_text()
    assert r.ok == (severity != "error")
    if severity == "error":
        assert f"top-level {IDS_KEY}: [3, 30, 58]" in find(r, "trained_layers").message


def test_the_runner_variable_in_the_command_counts(tmp_path):
    cfg = {"eagle_config": {IDS_KEY: [3, 30, 58]}}

    def spec(d):
        s = {"method": "eagle3", "model": str(d), "num_speculative_tokens": 3}
        return ["--speculative-config", json.dumps(s)]

    t, d = F.pair(tmp_path, delete=(IDS_KEY,), config=cfg)
    env = VllmEnv("python3", "vllm", known(V2_DEFAULT), "/x")
    for words, want in (([], "error"), (["VLLM_USE_V2_MODEL_RUNNER=0"], "warning")):
        s = serve.parse([*words, "vllm", "serve", str(t), "--trust-remote-code", *spec(d)])
        r = doctor.diagnose(
            hub.resolve(str(t)), hub.resolve(str(d)), env, Readiness(True), s, {}, pins=PINS
        )
        assert sev(r, "trained_layers") == want, r.to_text()


@pytest.mark.parametrize(
    "version,environ,ok",
    [
        (PATCHED, NO_ENV, True),  # ignored: the default (2, 30, 58) is what [1, 29, 57] means
        (V1_BEFORE_NESTED, NO_ENV, True),
        (V1_READS_FIRST, NO_ENV, False),  # the V1 runner reads [1, 29, 57] as written: one off
        (V1_READS_LAST, NO_ENV, False),
        (V2_DEFAULT, NO_ENV, True),
        (V2_DEFAULT, {"VLLM_USE_V2_MODEL_RUNNER": "0"}, False),
        (V1_GONE, NO_ENV, True),  # the only runner feeds the default: what it means
    ],
)
def test_specforge_deepseek_v3_drafter(tmp_path, version, environ, ok):
    """SpecForge's DeepSeek-V3 drafter: [1, 29, 57] only in eagle_config, in the
    output-of-layer-k convention: physically vLLM's [2, 30, 58], the default."""
    r = check(tmp_path, version, target="deepseek_v3", fmt="specforge_dsv3", environ=environ)
    f = find(r, "trained_layers")
    assert (f.severity != "error") == ok, r.to_text()
    assert "[2, 30, 58] in vLLM's terms" in f.message and "first id is 1" in f.message
    assert "measuring acceptance with" in f.message  # it cannot know for sure
    if ok:
        assert r.ok, r.to_text()
    else:
        assert "one layer early" in f.message
        assert f"write the top-level {IDS_KEY}: [2, 30, 58]" in f.message


@pytest.mark.parametrize("version", SPREAD)
def test_copying_output_convention_ids_to_the_top_level_is_one_off(tmp_path, version):
    """What the old advice ("copy them to the top-level") made of SpecForge's
    drafter: [1, 29, 57] fed as written, one layer early, on every release."""
    r = check(
        tmp_path,
        version,
        target="deepseek_v3",
        fmt="specforge_dsv3",
        config={IDS_KEY: [1, 29, 57]},
    )
    f = find(r, "trained_layers")
    assert f.severity == "error" and "one layer early" in f.message, r.to_text()
    assert f"{IDS_KEY}: [2, 30, 58]" in f.message
    assert "0.43 -> 0.41" in f.message  # measured by make bench-spec, cited


def test_converted_ids_agree_with_the_nested_ones(tmp_path):
    r = check(
        tmp_path / "a", target="deepseek_v3", fmt="specforge_dsv3", config={IDS_KEY: [2, 30, 58]}
    )
    assert sev(r, "trained_layers") == "info" and r.ok, r.to_text()
    r = check(tmp_path / "b", config={"eagle_config": {IDS_KEY: [3, 31, 59]}})
    assert sev(r, "trained_layers") == "warning" and r.ok
    assert "disagree" in find(r, "trained_layers").message


@pytest.mark.parametrize(
    "version,read,deaf",
    [
        (V1_READS_LAST, True, "V1 runner, which serves it, reads them; its V2 runner does not"),
        (V2_DEFAULT, False, "V2 runner, which serves it, does not read them"),
        (V1_GONE, False, "V2 runner, which serves it, does not read them"),
    ],
)
def test_specforge_kimi_k25_drafter_ids(tmp_path, version, read, deaf):
    """SpecForge's Kimi-K2.5 drafter: [2, 30, 58] nested, vLLM's convention,
    the default: which of the release's runners do not read them is said
    (`read`: the V1 runner serves and reads them, right here, not portable)."""
    r = check(tmp_path / "a", version, fmt="specforge_kimi", max_len="128K")
    f = find(r, "trained_layers")
    assert f.severity == ("warning" if read else "info"), r.to_text()
    assert "first id is not 1" in f.message and r.ok
    assert deaf in f.message and ("V1" in f.message) == read, f.message


def test_speculators_ids_are_vllms_convention(tmp_path):
    r = check(tmp_path, NEWEST, fmt="speculators", config={IDS_KEY: [1, 29, 57]})
    f = find(r, "trained_layers")
    assert f.severity == "info" and "speculators format" in f.message, r.to_text()
    assert "measuring acceptance" not in f.message


def test_nested_four_ids_size_the_fc_by_the_config(tmp_path):
    """Releases that size fc from the config (fc_width) size it by the nested
    ids while the V2 runner feeds 3 states."""
    r = check(
        tmp_path,
        known(first_where(lambda r: r.fc_width == "config" and "*" in r.v2_default)),
        delete=(IDS_KEY,),
        config={"eagle_config": {IDS_KEY: [2, 15, 30, 57]}},
        tensors={"fc.weight": ("BF16", [F.HIDDEN, 4 * F.HIDDEN])},
    )
    assert {"trained_layers", "fc"} <= errors(r)


ON_LAST_RANK = {IDS_KEY: [40, 50, 58]}
# the V2 runner serves by default but leaves a PP pair to the V1 runner, or takes it
V2_NO_PP = last_where(lambda r: v2_by_default(r) and not r.v2_supports_pp)
V2_PP = first_where(lambda r: r.v2_supports_pp)


EMBED = {"embed_tokens.weight": ("BF16", [F.KIMI_VOCAB, F.HIDDEN])}


@pytest.mark.parametrize(
    "version,config,ok",
    [
        (PATCHED, {}, False),  # layer 2 is on rank 0: the series raises
        (PATCHED, ON_LAST_RANK, True),
        (V1_READS_LAST, {}, False),  # dropped: fc gets 2 states
        (V2_NO_PP, ON_LAST_RANK, True),  # PP runs on the V1 runner there
        (V2_PP, ON_LAST_RANK, False),  # the V2 runner refuses any PP pair
    ],
)
def test_pipeline_parallel(tmp_path, monkeypatch, version, config, ok):
    monkeypatch.delenv("VLLM_PP_LAYER_PARTITION", raising=False)
    monkeypatch.delenv("VLLM_USE_V2_MODEL_RUNNER", raising=False)
    r = check(tmp_path, version, tp=4, pp=2, config=config, tensors=EMBED)
    assert r.ok == ok, r.to_text()
    assert ("--pipeline-parallel-size 2" in r.serve) == ok  # the printed command drops PP
    assert ("--tensor-parallel-size 8" in r.serve) != ok
    if not ok:
        assert errors(r) == {"pipeline_parallel"}
        assert "--tensor-parallel-size 8" in find(r, "pipeline_parallel").message


def test_pipeline_partition_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("VLLM_PP_LAYER_PARTITION", "55,6")
    r = check(tmp_path, tp=4, pp=2, config=ON_LAST_RANK, tensors=EMBED)
    assert "pipeline_parallel" in errors(r) and "55..60" in find(r, "pipeline_parallel").message


def test_pipeline_parallel_without_drafter_embeddings(tmp_path, monkeypatch):
    monkeypatch.delenv("VLLM_PP_LAYER_PARTITION", raising=False)
    r = check(tmp_path, tp=4, pp=2, config=ON_LAST_RANK)
    assert errors(r) == {"embed_tokens"}


@pytest.mark.parametrize(
    "version,patches,severity,phrase",
    [
        (FINAL_LAST, {}, "error", "vpatch's series for this release has no fix"),
        (
            FINAL_LAST,
            {named(FINAL_LAST, "final_norm_id"): "missing"},
            "error",
            "run `vpatch install",
        ),
        (FINAL_LAST, {named(FINAL_LAST, "final_norm_id"): "applied"}, "info", "feeds the drafter"),
        (FINAL_FIXED, {}, "info", "feeds the drafter"),
    ],
)
def test_final_norm_id_follows_vpatch_check(tmp_path, version, patches, severity, phrase):
    ids = [2, 30, F.LAYERS]
    r = check(tmp_path, version, patches=patches, config={IDS_KEY: ids})
    f = find(r, "aux_layers")
    assert f.severity == severity and phrase in f.message, r.to_text()
    assert (sev(r, "fc") == "error") is False  # the cause is said once, in aux_layers
