"""doctor's checks of the code that serves the target (checks/models.py) and
the aux ids of the families vLLM serves from vllm/models/ (check_aux_layers'
family branch): DeepSeek-V3.2, V4, V4.1 and Kimi K3 pairs as published
(tests/support/families.py), through `vpatch doctor --vllm R [--patched]`.

The done-when table of the new families (V3.2, V4, V4.1, K3): on the releases the issue names, as
released and `--patched`, doctor says what each release's source does
(each release named in having(), which fails when serving.toml or
rules.toml says otherwise: the integration test reads those from the
source)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from support import families as FM
from support.releases import covered, having, newest
from vpatch import lock, resources
from vpatch.doctor import defects
from vpatch.serving import GENERIC

PINS = lock.load()
V32, V4, V41, K3 = (
    "DeepseekV32ForCausalLM",
    "DeepseekV4ForCausalLM",
    "DeepseekV41ForCausalLM",
    "KimiK3ForConditionalGeneration",
)
V32_NVIDIA = "vllm/models/deepseek_v32/nvidia/model.py"
STREAM = "VLLM_KIMI_K3_AUX_ATTN_RES_STREAM"
OWN = {"id0": "embedding", "id_n": False, "partial_sum": True, "path": V32_NVIDIA}
V4_AUX = {"eagle3": True, "id0": "dropped", "id_n": True}

# The new families' done-when releases, each with the facts of serving.toml and
# rules.toml its rows below rely on
DONE_WHEN = (
    having(
        "0.20.0",
        final_norm_id=False,
        upstream_eagle3=True,
        serves=(
            (V32, "cuda", {"path": GENERIC}),
            (V4, "cuda", {"path": "vllm/model_executor/models/deepseek_v4.py", "eagle3": False}),
            (V41, "cuda", {"path": ""}),
            (K3, "cuda", {"path": ""}),
        ),
    ),
    having(
        "0.22.0",
        final_norm_id=False,
        serves=(
            (V32, "cuda", {"path": GENERIC}),
            (V4, "cuda", {"eagle3": False}),
            (V41, "cuda", {"path": ""}),
            (K3, "cuda", {"path": ""}),
        ),
    ),
    having(
        "0.29.0",
        serves=(
            (V32, "cuda", OWN),
            (V4, "cuda", V4_AUX),
            (V41, "cuda", {"path": ""}),
            (K3, "cuda", {"aux_env": f"{STREAM}=0"}),
        ),
    ),
    having(
        "0.33.0",
        serves=(
            (V32, "cuda", OWN),
            (V32, "rocm", {"id0": "typeerror"}),
            (V4, "cuda", V4_AUX),
            (V41, "cuda", V4_AUX),
            (K3, "cuda", {"aux_env": f"{STREAM}=0"}),
        ),
    ),
    having(
        "0.34.0",
        serves=(
            (V32, "cuda", OWN),
            (V32, "rocm", {"id0": "embedding"}),
            (V4, "cuda", V4_AUX),
            (V41, "cuda", V4_AUX),
            (K3, "cuda", {"aux_env": f"{STREAM}=0"}),
        ),
    ),
)
R20, R22, R29, R33, R34 = DONE_WHEN
OWN_PACKAGE = (R29, R33, R34)  # V3.2's own package serves CUDA there (OWN above)


class Fixed:
    """The patched verdict of a defect of vpatch's series: "fixed here" where
    the patch set has its fix (patches.toml `doctor = KEY`), else the
    error's "no fix"."""

    def __init__(self, key: str):
        self.key = key

    def expect(self, check: str) -> tuple[str, str, str]:
        if defects.fix(PINS, self.key) is not None:
            return check, "info", "fixed here"
        return check, "error", "has no fix"


def v32(ids):
    return FM.llama_eagle3(7168, 129280, ids)


def v41(ids):
    return FM.llama_eagle3(FM.V4_HIDDEN, FM.V4_VOCAB, ids)


# (case, target, drafter, {release: (check, severity, phrase in the message) as
# released, and --patched: the same, or a Fixed})
CASES = [
    (
        "final id",
        "deepseek_v32",
        v32([2, 30, 61]),
        {
            **dict.fromkeys(
                (R20, R22),
                (
                    ("aux_layers", "error", "id 61 (the final norm's input) matches no layer"),
                    ("aux_layers", "info", "61 the final norm's input"),
                ),
            ),
            **dict.fromkeys(
                OWN_PACKAGE,
                (
                    ("aux_layers", "error", "id 61 (the final norm's input) is never captured"),
                    Fixed("v32_aux_capture"),
                ),
            ),
        },
    ),
    (
        "TP partial sum",
        "deepseek_v32",
        v32(None),
        {
            **dict.fromkeys(
                (R20, R22),
                (("tp_capture", "info", "no serving-file facts"),) * 2,
            ),
            **dict.fromkeys(
                OWN_PACKAGE,
                (
                    ("tp_capture", "error", "every id >= 1 is this rank's partial sum"),
                    Fixed("v32_aux_capture"),
                ),
            ),
        },
    ),
    (
        "layer 0",
        "deepseek_v32",
        v32([0, 30, 58]),
        {
            **dict.fromkeys(
                (R20, R22),
                (
                    ("aux_layers", "error", "layer 0 crashes"),
                    ("aux_layers", "info", "id k is the input of decoder layer k"),
                ),
            ),
            # no false crash: V3.2's own package takes the embedding
            **dict.fromkeys(
                OWN_PACKAGE,
                (("aux_layers", "info", "0 the embedding"),) * 2,
            ),
        },
    ),
    (
        "refusal",
        "deepseek_v4",
        FM.aq_medai_v4_eagle3(),
        {
            R20: (("serving", "error", "refuses eagle3 for model type 'deepseek_v4'"),) * 2,
            R22: (("serving", "error", "Model does not support EAGLE3 interface"),) * 2,
            **dict.fromkeys(OWN_PACKAGE, (("serving", "info", "SupportsEagle3"),) * 2),
        },
    ),
    (
        "id 0",
        "deepseek_v4",
        FM.aq_medai_v4_eagle3([0, 21, 40]),
        {
            **dict.fromkeys((R20, R22), (("aux_layers", "info", "not checked"),) * 2),
            **dict.fromkeys(
                OWN_PACKAGE,
                (
                    ("aux_layers", "error", "id 0 (the embedding) is never captured"),
                    Fixed("v4_id0"),
                ),
            ),
        },
    ),
    (
        "id 0",
        "deepseek_v41",
        v41([0, 20, 37]),
        {
            **dict.fromkeys(
                (R20, R22, R29),
                (("serving", "error", f"does not register {V41}"),) * 2,
            ),
            **dict.fromkeys(
                (R33, R34),
                (
                    ("aux_layers", "error", "id 0 (the embedding) is never captured"),
                    Fixed("v41_id0"),
                ),
            ),
        },
    ),
    (
        "stream variable",
        "kimi_k3",
        FM.lightseek_k3_eagle31_mla(),
        {
            **dict.fromkeys((R20, R22), (("serving", "error", f"does not register {K3}"),) * 2),
            **dict.fromkeys(
                OWN_PACKAGE,
                (
                    (
                        "aux_stream",
                        "warning",
                        f"the prefix sum (prefix_only) as each aux state ({STREAM}=0, its default)",
                    ),
                )
                * 2,
            ),
        },
    ),
]

ROWS = [
    pytest.param(
        case,
        target,
        drafter,
        release,
        patched,
        expected[patched],
        id=f"{target}-{case.replace(' ', '_')}-{release}-{'patched' if patched else 'released'}",
    )
    for case, target, drafter, by_release in CASES
    for release, expected in by_release.items()
    for patched in (False, True)
]


@pytest.mark.parametrize(("case", "target", "drafter", "release", "patched", "expected"), ROWS)
def test_done_when(tmp_path, case, target, drafter, release, patched, expected):
    """The new families' done-when: the verdict on each case is what the release's
    source does (bites: serving.toml's id_n of V3.2's nvidia file set true
    fails the final-id rows of its releases; its partial_sum false, the TP
    rows; V3.2's CUDA route sent back to deepseek_v2.py, the layer-0 rows
    there; the V4 nvidia file's eagle3 true from its first table, the
    refusal row)."""
    if isinstance(expected, Fixed):
        expected = expected.expect(expected_check(case))
    check, severity, phrase = expected
    report = FM.doctor(tmp_path, target, drafter, release, patched=patched)
    f = FM.finding(report, check)
    assert (f.severity, phrase in f.message) == (severity, True), f.message
    if case == "layer 0":
        assert "TypeError" not in f.message or release in (R20, R22), f.message


def expected_check(case: str) -> str:
    return {"TP partial sum": "tp_capture"}.get(case, "aux_layers")


@pytest.mark.parametrize(
    ("target", "drafter", "key", "releases"),
    [
        ("deepseek_v4", FM.aq_medai_v4_eagle3([0, 21, 40]), "v4_id0", OWN_PACKAGE),
        ("deepseek_v41", v41([0, 20, 37]), "v41_id0", (R33, R34)),
    ],
)
def test_the_v4_id_0_drop_names_vpatch_s_fix(tmp_path, target, drafter, key, releases):
    """DeepSeek-V4's and V4.1's dropped id 0 is a defect vpatch's series
    fixes: as released the error names the patch and `vpatch install`;
    --patched the fix is installed and id 0 is the embedding (bites: the
    patch's `doctor` key taken out of patches.toml, or served.effective
    leaving id0 as the file has it)."""
    slug = defects.fix(PINS, key)
    assert slug is not None, key
    for rel in releases:
        got = FM.finding(FM.doctor(tmp_path / rel, target, drafter, rel), "aux_layers")
        assert got.severity == "error", got.message
        assert f"series fixes it ({slug}), not installed here" in got.message
        got = FM.finding(
            FM.doctor(tmp_path / f"{rel}-p", target, drafter, rel, patched=True), "aux_layers"
        )
        assert got.severity == "info", got.message
        assert "(0 the embedding, " in got.message
        assert f"fixed here: vpatch's patch {slug} is installed" in got.message


# -- beyond the done-when table: platforms, methods, variables ---------------------------


def where(arch: str, platform: str, holds) -> list[str]:
    """The covered releases where the file serving `arch` on `platform` has
    facts `holds` is true of (serving.toml)."""
    out = []
    for v in covered():
        s = PINS.serving.served(arch, v, platform)
        if s is not None and s.code is not None and holds(s.code):
            out.append(v)
    return out


def test_rocm_s_own_file_and_its_layer_0_crash(tmp_path):
    """--platform rocm: V3.2's amd module where its id 0 is a TypeError
    (bites: the platform ignored, CUDA's file takes the embedding)."""
    rel = where(V32, "rocm", lambda c: c.id0 == "typeerror")[0]
    report = FM.doctor(tmp_path, "deepseek_v32", v32([0, 30, 58]), rel, platform="rocm")
    f = FM.finding(report, "aux_layers")
    assert f.severity == "error" and "TypeError" in f.message and "amd/model.py" in f.message
    assert "platform ROCm (--platform rocm)" in report.header


def test_on_cuda_one_line_says_where_rocm_differs(tmp_path):
    rel = where(V32, "rocm", lambda c: c.id0 == "typeerror")[0]
    msg = FM.finding(FM.doctor(tmp_path, "deepseek_v32", v32(None), rel), "serving").message
    assert "on ROCm it is vllm/models/deepseek_v32/amd/model.py: id 0 a TypeError" in msg


def test_sequence_parallelism_gathers_whole_states(tmp_path):
    rel = where(V32, "cuda", lambda c: c.partial_sum)[-1]
    flags = ("--enable-expert-parallel", "--data-parallel-size", "2")
    f = FM.finding(FM.doctor(tmp_path, "deepseek_v32", v32(None), rel, flags=flags), "tp_capture")
    assert f.severity == "info" and "sequence parallelism" in f.message
    one = FM.finding(
        FM.doctor(tmp_path / "tp1", "deepseek_v32", v32(None), rel, tp=1), "tp_capture"
    )
    assert one.severity == "info" and "TP 1" in one.message


def test_glm_5_is_refused_by_the_allowlist_where_a_release_has_one(tmp_path):
    """GLM-5 (glm_moe_dsa) matches no entry of speculative.py's allowlist."""
    rel = next(
        v
        for v in covered()
        if PINS.serving.release(v).allowlist and PINS.rules.at(v).upstream_eagle3
    )
    f = FM.finding(
        FM.doctor(tmp_path, "glm_5_2", FM.llama_eagle3(6144, 154880, None), rel), "serving"
    )
    assert f.severity == "error" and "'glm_moe_dsa'" in f.message


@pytest.mark.parametrize("value", ["1", "0", "x"])
def test_the_stream_variable_as_the_command_sets_it(tmp_path, value):
    rel = where(K3, "cuda", lambda c: bool(c.aux_env))[0]
    report = FM.doctor(
        tmp_path, "kimi_k3", FM.lightseek_k3_eagle31_mla(), rel, assign=(f"{STREAM}={value}",)
    )
    f = FM.finding(report, "aux_stream")
    said = {"1": "the pre-norm AttnRes mixture as each", "0": "the prefix sum (prefix_only) as"}
    if value == "x":
        assert f.severity == "error" and "int()" in f.message
    else:
        assert f.severity == "warning" and said[value] in f.message and ", set)" in f.message


def test_without_attn_res_the_variable_changes_nothing(tmp_path):
    rel = where(K3, "cuda", lambda c: bool(c.aux_env))[0]
    d = FM.lightseek_k3_eagle31_mla()
    changes = {"attn_res_block_size": None}
    f = FM.finding(FM.doctor(tmp_path, "kimi_k3", d, rel, target_changes=changes), "aux_stream")
    assert f.severity == "info" and "changes nothing without attn_res_block_size" in f.message


def test_before_the_variable_k3_feeds_the_prefix_sum_only(tmp_path):
    rels = [v for v in covered() if PINS.serving.served(K3, v, "cuda").registered]
    rel = next(v for v in rels if v not in where(K3, "cuda", lambda c: bool(c.aux_env)))
    f = FM.finding(FM.doctor(tmp_path, "kimi_k3", FM.lightseek_k3_eagle31_mla(), rel), "aux_stream")
    assert (
        f.severity == "warning" and "no variable chooses the pre-norm AttnRes mixture" in f.message
    )


def test_a_dspark_drafter_is_fed_its_ids_as_vllm_converts_them(tmp_path):
    """V4-Flash-0731's own DSpark module ([40, 41, 42] + 1: 43 is the final
    norm's input, which V4 captures); V4.1's ids as written, and its id 0
    dropped as for EAGLE-3."""
    rel = newest()
    report = FM.doctor(
        tmp_path, "deepseek_v4_0731", FM.deepseek_v4_flash_0731(), rel, method="dspark"
    )
    f = FM.finding(report, "aux_layers")
    assert f.severity == "info" and "[41, 42, 43] (from dspark_target_layer_ids + 1)" in f.message
    assert {x.check for x in report.findings} >= {"serving", "aux_layers", "tp_capture"}
    assert "fc" not in {x.check for x in report.findings}  # EAGLE-3's checks do not run
    assert "for dspark, the DSpark drafter's own config" in FM.finding(report, "serving").message
    v41 = FM.deepseek_v41_flash()
    v41["text_config"]["dspark_target_layer_ids"] = [0, 20, 37]
    f = FM.finding(
        FM.doctor(tmp_path / "v41", "deepseek_v41", v41, rel, method="dspark"), "aux_layers"
    )
    assert f.severity == "error" and "as written for deepseek_v41" in f.message
    assert "id 0 (the embedding) is never captured" in f.message


def test_a_dflash_drafter_on_v32_meets_the_partial_sum_too(tmp_path):
    rel = where(V32, "cuda", lambda c: c.partial_sum)[-1]
    d = {
        "architectures": ["DFlashDraftModel"],
        "model_type": "qwen3",
        "dflash_config": {"target_layer_ids": [1, 30, 57]},
    }
    report = FM.doctor(tmp_path, "deepseek_v32", d, rel, method="dflash")
    assert (
        "[2, 31, 58] (from dflash_config.target_layer_ids + 1)"
        in FM.finding(report, "aux_layers").message
    )
    assert FM.finding(report, "tp_capture").severity == "error"
    assert FM.finding(report, "speculative_config").message.startswith("dflash, 3 draft tokens")


def test_an_mtp_drafter_reads_no_aux_states(tmp_path):
    rel = where(V32, "cuda", lambda c: c.partial_sum)[-1]
    report = FM.doctor(tmp_path, "deepseek_v32", FM.deepseek_v32(), rel, method="mtp")
    assert FM.finding(report, "aux_layers").message == "MTP reads no aux states: no aux layers"
    assert FM.finding(report, "tp_capture").severity == "info"
    assert "MTP reads no aux states" in FM.finding(report, "serving").message


def test_a_release_without_a_dspark_class_for_the_family(tmp_path):
    """A serving.toml whose V4 family has no DSpark class at the release (a
    copy of vpatch's data, edited): DSpark is refused there (bites: the check
    of the family's drafters taken out)."""
    root = Path(shutil.copytree(resources.root(), tmp_path / "data"))
    toml = root / "serving.toml"
    text = toml.read_text()
    since, names = next(
        (v, d)
        for v, d in PINS.serving.families["deepseek_v4"].drafters
        if any("DSpark" in x for x in d)
    )
    gone = f', "{since}" = {{ drafters = {json.dumps(sorted(names))} }}'
    assert gone in text
    toml.write_text(text.replace(gone, ""))
    pins = lock.load(root / "VERSIONS.lock")
    report = FM.doctor(
        tmp_path,
        "deepseek_v4_0731",
        FM.deepseek_v4_flash_0731(),
        newest(),
        method="dspark",
        pins=pins,
    )
    f = FM.finding(report, "serving")
    assert f.severity == "error" and "registers no DSpark drafter class" in f.message


def test_pp_is_relayed_where_the_file_says(tmp_path):
    rel = where(V4, "cuda", lambda c: c.pp_relay)[0]
    d = FM.aq_medai_v4_eagle3([2, 21, 40])
    f = FM.finding(
        FM.doctor(tmp_path, "deepseek_v4", d, rel, flags=("-pp", "2")), "pipeline_parallel"
    )
    assert f.severity == "info" and "relays aux states across PP ranks" in f.message
    f = FM.finding(
        FM.doctor(tmp_path / "rocm", "deepseek_v4", d, rel, flags=("-pp", "2"), platform="rocm"),
        "pipeline_parallel",
    )
    assert f.severity == "error"


def test_the_same_rules_warning_stays_only_outside_the_families(tmp_path):
    report = FM.doctor(tmp_path, "deepseek_v4", FM.aq_medai_v4_eagle3(), newest())
    assert FM.finding(report, "target").severity == "info"
    t = FM.F.write_model(
        tmp_path / "qwen",
        {**FM.deepseek_v4_flash(), "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3"},
    )
    d = FM.write_drafter(tmp_path, FM.aq_medai_v4_eagle3(), name="d2")
    from vpatch.commands.doctor import Request, preflight

    spec = json.dumps({"method": "eagle3", "model": str(d), "num_speculative_tokens": 3})
    r = preflight(
        Request(command=("vllm", "serve", str(t), "--speculative-config", spec), vllm=newest()),
        pins=PINS,
    )
    assert "checked with the same rules" in FM.finding(r, "target").message


def test_k3_s_config_needs_no_remote_code_where_vllm_has_its_class(tmp_path):
    """Kimi K3's config.json names configuration_kimi_k3.KimiK3Config in
    auto_map; vLLM registers its own KimiK3Config (rules.toml own_configs),
    so doctor asks no --trust-remote-code for the config (bites: kimi_k3
    taken out of own_configs says 'refused at startup')."""
    rel = next(v for v in covered() if "kimi_k3" in PINS.rules.at(v).own_configs)
    report = FM.doctor(
        tmp_path, "kimi_k3", FM.lightseek_k3_eagle31_mla(), rel, trust_remote_code=False
    )
    f = FM.finding(report, "target")
    assert f.severity == "info" and f.message.endswith("no remote code"), f.message


def test_redhat_s_k3_dspark_is_fed_its_ids_as_written_and_meets_the_stream(tmp_path):
    """A speculators-format DSpark drafter (update_dspark copies its
    aux_hidden_state_layer_ids to the top-level ids): fed as written, and,
    reading aux states, subject to K3's AttnRes variable."""
    rel = where(K3, "cuda", lambda c: bool(c.aux_env))[-1]
    d = FM.redhat_k3_dspark()
    report = FM.doctor(tmp_path, "kimi_k3", d, rel, method="dspark")
    f = FM.finding(report, "aux_layers")
    ids = d["aux_hidden_state_layer_ids"]
    assert (
        f.severity == "info" and f"{ids} (from aux_hidden_state_layer_ids (speculators" in f.message
    )
    assert FM.finding(report, "aux_stream").severity == "warning"
    assert "DSpark (K3DSparkModel)" in FM.finding(report, "serving").message
