"""doctor/checks/vllm.py: the environment's vLLM (EAGLE-3 ready, too old,
unknown), the target (remote code, Kimi-K2.5's placeholder), and a defect
vpatch's series fixes, told by `vpatch check`'s report."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from support import next_release
from support import pairs as F
from support.doctor import FORCED, PINS, check, diag, errors, find, reported, sev
from support.releases import (
    edge,
    last_where,
    newest,
    newest_patched,
    oldest,
    serving,
    v1_by_default,
)
from vpatch import lock, resources
from vpatch.doctor import behaviour, hub, serve
from vpatch.doctor import checks as doctor
from vpatch.doctor.environment import Readiness, VllmEnv
from vpatch.errors import NewerRelease

PATCHED = newest_patched()
NEWEST = newest()
V2_FIX = serving("forced_backend_v2")[-1]  # a series carries the V2 runner's backend fix


def test_no_vllm(tmp_path):
    r = check(tmp_path, None, None)
    assert errors(r) == {"vllm"} and PATCHED in find(r, "vllm").message


def test_a_patched_release_without_its_series_is_refused(tmp_path):
    r = check(tmp_path, PATCHED, False)
    assert errors(r) == {"vllm"} and "vpatch install --python python3" in find(r, "vllm").message


def test_readiness_unknown(tmp_path):
    r = check(tmp_path, NEWEST, None)
    assert r.ok and sev(r, "vllm") == "warning"


def test_kimi_k25_without_placeholder(tmp_path):
    cfg = F.kimi_k25()
    del cfg["media_placeholder_token_id"]
    t = F.write_model(tmp_path / "t", cfg)
    _, d = F.pair(tmp_path)
    env = VllmEnv("python3", "vllm", NEWEST, "/x")
    r = diag(t, d, env)
    assert errors(r) == {"target"}


def test_other_targets_get_a_warning(tmp_path):
    cfg = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": F.HIDDEN,
        "num_hidden_layers": 61,
        "vocab_size": F.KIMI_VOCAB,
        "num_attention_heads": 64,
    }
    t = F.write_model(tmp_path / "t", cfg)
    _, d = F.pair(tmp_path)
    env = VllmEnv("python3", "vllm", NEWEST, "/x")
    r = diag(t, d, env)
    assert r.ok and sev(r, "target") == "warning"
    assert "--trust-remote-code" not in r.serve


@pytest.mark.parametrize(
    "state,severity,phrase",
    [
        ("applied", "info", "is installed"),
        ("upstream", "info", "is installed"),
        ("missing", "error", "run `vpatch install"),
        ("modified", "error", "run `vpatch install"),
    ],
)
def test_a_defect_is_fixed_when_vpatch_check_says_its_patch_is(tmp_path, state, severity, phrase):
    r = check(
        tmp_path, V2_FIX, command=FORCED, patches=reported(V2_FIX, "forced_backend_v2", state)
    )
    f = find(r, "attention_backend")
    assert f.severity == severity and phrase in f.message, r.to_text()
    assert ("--attention-backend" in r.serve) == (severity == "info")


def test_a_defect_not_in_the_series_and_an_unknown_report(tmp_path):
    r = check(tmp_path / "a", V2_FIX, command=FORCED)
    assert "has no fix" in find(r, "attention_backend").message
    r = check(tmp_path / "b", V2_FIX, None, command=FORCED)
    assert "could not say" in find(r, "attention_backend").message
    assert sev(r, "attention_backend") == "error"


def serve_without_trust(tmp: Path, version: str, target: str, tokenizer: dict | None = None):
    t, d = F.pair(tmp, target=target)
    if tokenizer is not None:
        (t / "tokenizer_config.json").write_text(json.dumps(tokenizer))
    spec = {"method": "eagle3", "model": str(d), "num_speculative_tokens": 3}
    s = serve.parse(["vllm", "serve", str(t), "--speculative-config", json.dumps(spec)])
    env = VllmEnv("python3", "vllm", version, "/x")
    return doctor.diagnose(
        hub.resolve(str(t)), hub.resolve(str(d)), env, Readiness(True), s, {}, pins=PINS
    )


KIMI_CONFIG = edge(lambda r: "kimi_k2" in r.own_configs)  # vLLM's own class for kimi_k2 from [1]
# one release of each kind: the oldest, the series', vLLM's class, the V1 and the V2 runner's
KINDS = [oldest(), PATCHED, KIMI_CONFIG[1], last_where(v1_by_default), NEWEST]


@pytest.mark.parametrize("version", KINDS)
@pytest.mark.parametrize("target", ["kimi_k25", "kimi_k2"])
def test_kimi_targets_need_trust_remote_code_for_their_tokenizer(tmp_path, version, target):
    r = serve_without_trust(tmp_path, version, target)
    f = find(r, "target")
    assert (
        f.severity == "error"
        and "its tokenizer (tokenizer_config.json: TikTokenTokenizer" in f.message
    )
    # the config too where vLLM has no class of its own for kimi_k2
    config_remote = target == "kimi_k2" and "kimi_k2" not in PINS.rules.at(version).own_configs
    assert ("its config (model_type 'kimi_k2'" in f.message) == config_remote, f.message
    # and from which release vLLM has one: rules.toml's own_configs, not retyped
    since = PINS.rules.first_where(lambda x: "kimi_k2" in x.own_configs)
    assert (f"vLLM has a class of its own from {since})" in f.message) == config_remote
    assert "--trust-remote-code" in r.serve


@pytest.mark.parametrize("version", KINDS)
def test_deepseek_v3_needs_no_remote_code(tmp_path, version):
    """Its config.json names configuration_deepseek.DeepseekV3Config, but
    transformers has its own; its tokenizer is transformers' LlamaTokenizerFast."""
    r = serve_without_trust(tmp_path, version, "deepseek_v3")
    assert sev(r, "target") == "info" and "--trust-remote-code" not in r.serve
    assert "target" not in errors(r)


@pytest.mark.parametrize("version,broken", [(KIMI_CONFIG[0], True), (KIMI_CONFIG[1], False)])
def test_kimi_k2_config_is_remote_code_before_vllm_has_its_class(tmp_path, version, broken):
    """Kimi-K2's config with a transformers tokenizer: only the config speaks."""
    r = serve_without_trust(tmp_path, version, "kimi_k2", F.DSV3_TOKENIZER)
    assert (sev(r, "target") == "error") == broken, r.to_text()


def test_trust_remote_code_not_needed_is_said(tmp_path):
    r = check(tmp_path, NEWEST, target="deepseek_v3")  # check() gives --trust-remote-code
    assert "--trust-remote-code is not needed" in find(r, "target").message


def pinned_past_the_rules(tmp: Path) -> lock.Lock:
    """vpatch's data as a `vpatch carry X --write` leaves it before a person
    decides what its report lists: X pinned, the newest series carried to
    it, doctor's rules ending before it."""
    root = tmp / "root"
    shutil.copytree(resources.root(), root)
    pins = lock.load(root / "VERSIONS.lock")
    last, new = pins.versions()[-1], next_release(pins)
    toml = root / "patches" / "patches.toml"
    assert f':{last}"' in toml.read_text()
    toml.write_text(toml.read_text().replace(f':{last}"', f':{new}"'))
    with (root / "VERSIONS.lock").open("a") as f:
        f.write(f'\n[releases."{new}"]\ntag = "v{new}"\ncommit = "c"\nstatus = "upstream-fix"\n')
    pins = lock.load(root / "VERSIONS.lock")
    assert pins.has_series(new) and new not in behaviour.known_releases(pins)
    return pins


def test_a_release_pinned_past_doctors_rules_is_named_as_pinned(tmp_path):
    """After `carry --write`, doctor called the release "not a pinned release"
    and sent the user to the series before it: the lock pins it,
    and doctor's rules stop before it; doctor says that, and refuses to
    guess (exit 12) rather than judge it by the release before."""
    pins = pinned_past_the_rules(tmp_path)
    new = pins.versions()[-1]
    t, d = F.pair(tmp_path / "pair", target="kimi_k25", fmt="torchspec_mla")
    env = VllmEnv("python3", "vllm", new, "/x")
    s = serve.from_options(str(t), str(d), 8)
    with pytest.raises(NewerRelease) as e:
        doctor.diagnose(
            hub.resolve(str(t)), hub.resolve(str(d)), env, Readiness(False), s, {}, pins=pins
        )
    said = str(e.value)
    assert f"vLLM {new} is pinned, but doctor's rules for it are not written yet" in said
    assert f"(they end at {pins.rules.newest})" in said and "not a pinned release" not in said


def test_not_ready_quotes_vpatch_checks_verdict(tmp_path):
    """The `vllm` finding gives `vpatch check`'s answer: on a release with
    EAGLE-3 upstream and check NOT ready, a warning that quotes its verdict
    line (what install and check say too), not "EAGLE-3 ... (upstream)"."""
    said = "EAGLE-3 for DeepSeek-V3 / Kimi-K2.5 targets: NOT ready (0001-x); run `vpatch ...`"
    t, d = F.pair(tmp_path)
    env = VllmEnv("python3", "vllm", NEWEST, "/x")
    s = serve.from_options(str(t), str(d), 8)
    for ready, severity in ((False, "warning"), (True, "info")):
        readiness = Readiness(ready, {"0001-x": "missing" if not ready else "applied"}, said=said)
        r = doctor.diagnose(
            hub.resolve(str(t)), hub.resolve(str(d)), env, readiness, s, {}, pins=PINS
        )
        f = find(r, "vllm")
        assert f.severity == severity and (said in f.message) == (not ready), f
