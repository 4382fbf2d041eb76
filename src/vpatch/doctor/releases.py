"""What each vLLM release (0.15.0-0.33.0) does with an EAGLE-3 drafter for a
DeepSeek-V2/V3, Kimi-K2 or Kimi-K2.5 target: the facts `vpatch doctor`
checks a pair against. Read from each release's own source (sdists for
0.16.0+, the wheel's Python files for 0.15.x); every entry names the vLLM
file and function it comes from. `RULES` lists only what changes, by the
first release that changes it; `rules(release)` folds them.

`vpatch docs` renders the per-release table from RULES into docs/doctor.md
(maintain/docs.py). The patch that fixes each defect of DEFECTS is the one patches.toml
gives that `doctor` key (fixes()); which releases carry it, its spans.

"dropped": the target returns no state for that id, so the drafter's fc gets
fewer states than it was built for and the first request fails in fc
(mat1 and mat2 shapes cannot be multiplied). Everywhere: ids come from the
drafter config's top-level `eagle_aux_hidden_state_layer_ids` when it is a
non-empty list[Any], else the target's default (2, n // 2, n - 3); id k is the
input of decoder layer k (hidden_states + residual), and the states are
concatenated in layer order, not in the order the ids are written.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from packaging.version import Version

from .. import lock, settings
from ..errors import ConfigError

# Release of each change. Comments cite the vLLM source it was read from.
FIRST = "0.15.0"
LAST = "0.33.0"


@dataclass(frozen=True)
class Rules:
    release: str
    # model_executor/models/deepseek_v2.py: DeepseekV2ForCausalLM lists
    # SupportsEagle3 (and kimi_k25.py KimiK25ForConditionalGeneration), the
    # proposer aliases media_placeholder_token_id, and config/speculative.py
    # SpeculativeConfig._verify_args accepts the model types. Before 0.18
    # only vpatch's series gives all four.
    upstream_eagle3: bool
    # DeepseekV2Model.forward: `if self.end_layer in self.aux_hidden_state_layers`
    # after the last layer (0.25+, vLLM PR #46973). Before, id n matches no
    # layer: dropped (vpatch's series fixes it where patches.toml says: DEFECTS).
    final_norm_id: bool
    # llama_eagle3.py / deepseek_eagle3.py, the fc's input_size:
    # "three": 3 * (target_hidden_size if hasattr else hidden_size) (0.15-0.21);
    # "config": getattr(num_aux_hidden_states) or len(eagle_config
    # ["eagle_aux_hidden_state_layer_ids"]) or 3, times
    # getattr(target_hidden_size, hidden_size) (0.22+).
    fc_width: str
    # v1/worker/gpu_model_runner.py GPUModelRunner._get_eagle3_aux_layers_from_config
    # falls back to eagle_config["eagle_aux_hidden_state_layer_ids"] (0.22+);
    # v1/worker/gpu/spec_decode/eagle/eagle3_utils.py get_eagle3_aux_layers_from_config
    # (the V2 runner) never reads that key; from 0.27 it reads eagle_config["layer_ids"].
    v1_reads_nested_ids: bool
    v2_nested_key: str | None
    # config/vllm.py VllmConfig.use_v2_model_runner: the target architectures
    # the V2 model runner serves by default ("*": all; 0.24-0.28 list[Any]
    # DeepseekV2ForCausalLM but not V3 or Kimi; 0.29+ all);
    # VLLM_USE_V2_MODEL_RUNNER overrides it. EAGLE-3 with pipeline parallelism
    # is on the V2 runner's unsupported list until 0.29 (falls back to V1).
    v2_default: frozenset[str]
    v2_supports_pp: bool
    # llama_eagle3.py Eagle3LlamaForCausalLM.__init__: the draft_id_to_target_id
    # parameter exists always (0.15-0.29; zeros unless d2t is loaded), or only
    # when draft_vocab_size != the target's vocab (0.30+), so a d2t in the
    # checkpoint of an equal-vocab drafter has nowhere to go.
    d2t_only_if_vocab_differs: bool
    # transformers_utils/configs/speculators/algos.py update_eagle3: the
    # architecture is always Eagle3LlamaForCausalLM (0.15-0.23), or chosen by
    # transformer_layer_config.model_type: llama / qwen3, else ValueError (0.24+).
    speculators_arch_by_type: bool
    # algos.py update_eagle3: the top-level keys copied onto the
    # transformer_layer_config (norm_before_fc from 0.19, fc_norm and
    # norm_output from 0.25); draft_vocab_size, target_hidden_size (when not
    # null), norm_before_residual (default True) and the aux ids always.
    speculators_copies: frozenset[str]
    # speculators/base.py SpeculatorsConfig.from_pretrained validates
    # speculators_config (proposal_methods[0].speculative_tokens,
    # verifier.name_or_path) and transformer_layer_config (0.15.x only).
    speculators_validated: bool
    # llama_eagle3.py: norm_before_fc (0.18+), fc_norm / norm_output (0.22+);
    # an older release ignores the key and builds the model without the norm.
    norm_before_fc: bool
    fc_norm: bool
    # PP and aux states from DeepSeek targets: vLLM's DeepseekV2Model never
    # relays aux states between PP ranks (no supports_aux_hidden_states_over_pp),
    # so ids off the last rank are dropped (V1 runner), or the V2 runner refuses
    # the pair (eagle3_utils.verify_supports_aux_hidden_states_over_pp, 0.30+).
    # models/registry.py _SPECULATIVE_DECODING_MODELS: EAGLE-3 drafter classes.
    archs: frozenset[str]
    # Defects that vpatch's series fixes per release (DEFECTS; fixes() names the
    # patch of each; doctor asks `vpatch check` whether the environment has it):
    # the model runners on which a forced attention backend (--attention-backend,
    # --attention-config.backend, VLLM_ATTENTION_BACKEND) is applied to a non-MLA
    # (Llama) drafter under an MLA target and the drafter fails to load: the V1
    # runner until 0.21.0, the V2 runner from 0.29.0.
    forced_backend_crash: frozenset[str]
    # The drafter's rotary embedding is built for its own max_position_embeddings
    # and a --max-model-len above it kills a running server on the first longer
    # prompt (until 0.27.0).
    draft_positions_short: bool
    # deepseek_eagle3.py: an MLA drafter without rope_scaling rebuilds its rope
    # without rope_theta (the default 10000 instead of the drafter's; KeyError
    # 'factor' under transformers 5), from the first MLA drafter until 0.28.0.
    mla_rope_without_theta: bool
    # deepseek_eagle3.py reads fc_norm (0.23.0+; 0.22.x's Llama drafter reads it,
    # its MLA drafter ignores it).
    mla_fc_norm: bool
    # ModelConfig.is_deepseek_mla: an EAGLE drafter counts as MLA only for
    # model_type deepseek_v2/deepseek_v3(/_v32), so a kimi_k2 MLA drafter
    # (TorchSpec's) is set up as a non-MLA model (every release with MLA drafters).
    kimi_k2_drafter_not_mla: bool
    # transformers_utils/config.py _CONFIG_REGISTRY, read by
    # HFConfigParser.parse before AutoConfig: the target model types vLLM
    # loads with a config class of its own, never the repo's remote code
    # (kimi_k25 from 0.15.0, kimi_k2 "uses same architecture as DeepSeek V3"
    # from 0.18.0). See TRANSFORMERS_CONFIGS for the others.
    own_configs: frozenset[str]
    # requirements/common.txt: the transformers majors the release allows
    # (< 5 up to 0.19.0; 4.56+ or 5.5.1+ from 0.19.1 to 0.23.0; >= 5.5.3 from
    # 0.24.0). A tokenizer of the repo's own, untrusted, is refused by
    # transformers 4's AutoTokenizer; transformers 5 refuses it too, or makes
    # its generic TokenizersBackend of the files, depending on the minor
    # version (TRANSFORMERS_TOKENIZERS).
    transformers: tuple[int, ...]


_LLAMA = frozenset(
    {
        "Eagle3LlamaForCausalLM",
        "LlamaForCausalLMEagle3",
        "Eagle3Qwen2_5vlForCausalLM",
        "Eagle3Qwen3vlForCausalLM",
    }
)
MLA = frozenset({"Eagle3DeepseekV2ForCausalLM", "Eagle3DeepseekV3ForCausalLM"})

RULES: list[tuple[str, dict[str, Any]]] = [
    (
        "0.15.0",
        dict(
            upstream_eagle3=False,
            final_norm_id=False,
            fc_width="three",
            v1_reads_nested_ids=False,
            v2_nested_key=None,
            v2_default=frozenset(),
            v2_supports_pp=False,
            d2t_only_if_vocab_differs=False,
            speculators_arch_by_type=False,
            speculators_copies=frozenset(),
            speculators_validated=True,
            norm_before_fc=False,
            fc_norm=False,
            archs=_LLAMA,
            forced_backend_crash=frozenset({"v1"}),
            draft_positions_short=True,
            mla_rope_without_theta=False,
            mla_fc_norm=False,
            kimi_k2_drafter_not_mla=False,
            own_configs=frozenset({"kimi_k25"}),
            transformers=(4,),
        ),
    ),
    ("0.16.0", dict(speculators_validated=False)),
    # deepseek_v2.py / kimi_k25.py SupportsEagle3; deepseek_eagle3.py (MLA
    # drafter); llama_eagle3.py norm_before_fc
    (
        "0.18.0",
        dict(
            upstream_eagle3=True,
            archs=_LLAMA | MLA,
            norm_before_fc=True,
            mla_rope_without_theta=True,
            kimi_k2_drafter_not_mla=True,
            own_configs=frozenset({"kimi_k25", "kimi_k2"}),
        ),
    ),
    ("0.19.0", dict(speculators_copies=frozenset({"norm_before_fc"}))),
    ("0.19.1", dict(transformers=(4, 5))),
    ("0.20.0", dict(archs=_LLAMA | MLA | {"Eagle3MiniMaxM2ForCausalLM"})),
    ("0.21.0", dict(forced_backend_crash=frozenset())),
    (
        "0.22.0",
        dict(
            fc_width="config",
            v1_reads_nested_ids=True,
            fc_norm=True,
            archs=_LLAMA | MLA | {"Eagle3MiniMaxM2ForCausalLM"},
        ),
    ),
    ("0.23.0", dict(mla_fc_norm=True)),
    (
        "0.24.0",
        dict(
            speculators_arch_by_type=True,
            transformers=(5,),
            v2_default=frozenset({"DeepseekV2ForCausalLM"}),
            archs=_LLAMA | MLA | {"Eagle3MiniMaxM2ForCausalLM", "Eagle3Qwen3ForCausalLM"},
        ),
    ),
    (
        "0.25.0",
        dict(
            final_norm_id=True,
            speculators_copies=frozenset({"norm_before_fc", "fc_norm", "norm_output"}),
        ),
    ),
    ("0.27.0", dict(v2_nested_key="layer_ids", draft_positions_short=False)),
    ("0.28.0", dict(mla_rope_without_theta=False)),
    ("0.29.0", dict(v2_default=frozenset({"*"}), forced_backend_crash=frozenset({"v2"}))),
    ("0.30.0", dict(d2t_only_if_vocab_differs=True, v2_supports_pp=True)),
]


# The defects of RULES that a patch of vpatch's series fixes, by the key that
# patch's table in patches.toml gives as `doctor`: the table names the patch,
# its spans the releases that carry it. doctor reads from `vpatch check`'s
# per-patch report whether the environment's series has the patch installed.
DEFECTS = (
    "layer0",  # aux layer 0 crashes (Rules.upstream_eagle3: every release with it)
    "forced_backend_v1",  # Rules.forced_backend_crash, V1 runner
    "forced_backend_v2",  # the same on the V2 runner: another file, another patch
    "draft_positions",  # Rules.draft_positions_short
    "mla_rope_theta",  # Rules.mla_rope_without_theta
    "mla_fc_norm",  # Rules.mla_fc_norm (where Rules.fc_norm)
    "kimi_k2_mla",  # Rules.kimi_k2_drafter_not_mla
    "final_norm_id",  # not Rules.final_norm_id: id n matches no layer (EAGLE-3 upstream)
)


def fixes(pins: lock.Lock) -> dict[str, str]:
    """{defect key: the slug of the patch that fixes it}, from patches.toml."""
    return pins.patchset.fixes()


def fix(pins: lock.Lock, key: str) -> str | None:
    """The slug of the patch that fixes defect `key` (one of DEFECTS); None
    when the patch set has none."""
    return fixes(pins).get(key)


def carried(pins: lock.Lock, key: str) -> set[str]:
    """The pinned releases whose series carry the fix of defect `key`."""
    slug = fix(pins, key)
    return set(pins.patchset.serving(slug, pins.versions())) if slug else set()


# 0.15.0-0.17.1's series add EAGLE-3 for DeepSeek/Kimi with their own aux-state
# rules (id n = final-norm input, out-of-range ids and ids off the last PP rank
# raise ValueError, layer 0 = the embeddings); later series fix the layer-0 crash.
def patched_eagle3(pins: lock.Lock) -> set[str]:
    """Releases where EAGLE-3 for these targets is vpatch's series (status
    `patched` in VERSIONS.lock)."""
    return set(pins.versions("patched"))


def patched_layer0(pins: lock.Lock) -> set[str]:
    """Releases with EAGLE-3 upstream whose series carries the layer-0 fix."""
    return carried(pins, "layer0")


def rules(release: str) -> Rules:
    """The rules of `release` (a pinned release, e.g. "0.17.1")."""
    v = Version(release)
    acc: dict[str, Any] = {}
    for first, changes in RULES:
        if Version(first) <= v:
            acc.update(changes)
    names = {f.name for f in fields(Rules)} - {"release"}
    assert set(acc) == names, sorted(names ^ set(acc))
    return Rules(release=release, **acc)


@dataclass(frozen=True)
class Release:
    """The release an installed vLLM version behaves as."""

    version: str  # as installed, e.g. "0.17.1+cu129"
    release: str  # the table's release it maps to, e.g. "0.17.1"
    exact: bool  # the installed release is in the table


def place(installed: str, known: list[str]) -> Release | None:
    """Map an installed version (local labels and dev/post parts ignored) to
    the newest known release at or below it; None below the first."""
    try:
        base = Version(Version(installed).base_version)
    except ValueError:  # InvalidVersion, or a part of over 4300 digits
        return None
    below = [r for r in known if Version(r) <= base]
    if not below:
        return None
    best = max(below, key=Version)
    return Release(installed, best, Version(best) == base)


def known_releases(pins: lock.Lock, last: str | None = None) -> list[str]:
    """The releases the table covers: the pinned ones (VERSIONS.lock) from
    FIRST to LAST (or `last`: what a carry proposes LAST to be)."""
    top = Version(last or LAST)
    return [v for v in pins.versions() if Version(FIRST) <= Version(v) <= top]


def runner(r: Rules, arch: str, pp: int, env: Mapping[str, str] | None = None) -> str:
    """The model runner that serves an EAGLE-3 pair for a target of
    architecture `arch`: "v1" or "v2" (VLLM_USE_V2_MODEL_RUNNER, when set,
    decides)."""
    env = os.environ if env is None else env
    forced = env.get("VLLM_USE_V2_MODEL_RUNNER", "").strip().lower()
    if forced in ("1", "true"):
        return "v2"
    if forced in ("0", "false"):
        return "v1"
    if "*" not in r.v2_default and arch not in r.v2_default:
        return "v1"
    if pp > 1 and not r.v2_supports_pp:
        return "v1"
    return "v2"


def pp_indices(
    num_layers: int, rank: int, size: int, env: Mapping[str, str] | None = None
) -> tuple[int, int]:
    """vllm/distributed/utils.py get_pp_indices (the same in every release):
    which layers [start, end) PP rank `rank` of `size` owns.
    VLLM_PP_LAYER_PARTITION overrides the even split: vLLM reads it with
    int() and raises ValueError when it does not split the layers; so does
    this, each part read with settings.whole's bound."""
    env = os.environ if env is None else env
    given = env.get("VLLM_PP_LAYER_PARTITION")
    if given:
        try:
            parts = [settings.whole(x, "", 0) for x in given.split(",")]
        except ConfigError as e:
            raise ValueError(f"VLLM_PP_LAYER_PARTITION: a part {e}") from None
        if len(parts) != size or sum(parts) != num_layers:
            raise ValueError(
                f"VLLM_PP_LAYER_PARTITION={given} does not split {num_layers} layers "
                f"into {size} ranks"
            )
    else:
        parts = [num_layers // size] * size
        for i in range(2, num_layers % size + 2):
            parts[-i] += 1
    start = sum(parts[:rank])
    return start, start + parts[rank]


def default_ids(num_layers: int) -> tuple[int, int, int]:
    """DeepseekV2ForCausalLM.get_eagle3_aux_hidden_state_layers (0.18+; the
    0.15-0.17 series: the same): (2, n // 2, n - 3)."""
    return (2, num_layers // 2, num_layers - 3)


# Remote code of a target (HFConfigParser.parse, then transformers'
# AutoConfig / AutoTokenizer.from_pretrained with vLLM's trust_remote_code):
# a config whose auto_map names a class of the repo loads without
# --trust-remote-code when vLLM (Rules.own_configs) or transformers has its
# own class for the model type: transformers has DeepseekV3Config and
# DeepseekV2Config in every version these releases allow (>= 4.56, which
# 0.15.0 requires; added in 4.51 and 4.54). A tokenizer whose
# tokenizer_config.json names a class of the repo in auto_map.AutoTokenizer
# (Kimi-K2's and Kimi-K2.5's TikTokenTokenizer, tokenization_kimi.py), unless
# its tokenizer_class is one transformers ships, is not the repo's tokenizer
# without it: every release hands it to AutoTokenizer (tokenizers/registry.py
# get_tokenizer, tokenizer mode "auto" -> "hf"), which refuses it under
# transformers 4, and under transformers 5 refuses it too unless the model
# config's type has a tokenizer mapping there (models/auto/
# tokenization_auto.py: has_local_code), in which case it makes a
# TokenizersBackend of the repo's files (tiktoken.model converted with
# transformers' own split pattern): DeepseekV3Config has one in 5.19, not in
# 5.24 (the tier's venvs: 0.32.0 loads it so, 0.22.1 and 0.26.0 refuse it).
# Either way the tokenizer served is not the repo's. Checked against real
# vLLM by tests/vllm/release/test_doctor_remote_code.py.
TRANSFORMERS_CONFIGS = frozenset({"deepseek_v2", "deepseek_v3"})
TRANSFORMERS_TOKENIZERS = frozenset(
    {"LlamaTokenizer", "LlamaTokenizerFast", "PreTrainedTokenizerFast", "TokenizersBackend"}
)


# SpeculativeConfig.hf_config_override (every release): a draft config of
# these model types is rewritten into a DeepSeek MTP head before EAGLE-3 sees
# it (glm_moe_dsa from 0.16).
MTP_REWRITE = ("deepseek_v3", "deepseek_v32", "glm_moe_dsa")
SPECULATORS_ARCH = {"llama": "Eagle3LlamaForCausalLM", "qwen3": "Eagle3Qwen3ForCausalLM"}


@dataclass(frozen=True)
class Effective:
    """A drafter config as the release's vLLM builds it."""

    cfg: dict[str, Any]  # the transformers config vLLM ends up with (a plain dict here)
    architectures: tuple[str, ...]  # after vLLM's renaming
    arch: str | None  # the first of them the release's registry knows
    problems: tuple[str, ...]  # what makes vLLM refuse the config
    ignored: tuple[str, ...]  # keys set to a non-default value that the release ignores

    @property
    def mla(self) -> bool:
        return self.arch in MLA


def effective(raw: dict[str, Any], fmt: str, r: Rules) -> Effective:
    """How release `r` reads a drafter's config.json (`raw`, in format
    "speculators" or "vllm": see configs.read_drafter)."""
    problems: list[str] = []
    ignored: list[str] = []
    if fmt == "speculators":
        # speculators/base.py extract_transformers_pre_trained_config + algos.update_eagle3
        layer = raw.get("transformer_layer_config")
        cfg = dict(layer) if isinstance(layer, dict) else {}
        if r.speculators_validated:
            sc: Any = raw.get("speculators_config")
            try:
                sc["proposal_methods"][0]["speculative_tokens"]
                sc["verifier"]["name_or_path"]
            except (KeyError, IndexError, TypeError):
                problems.append(
                    "vLLM rejects it: 'Invalid speculators config structure' (this release "
                    "needs speculators_config.proposal_methods[0].speculative_tokens and "
                    "speculators_config.verifier.name_or_path)"
                )
        cfg["draft_vocab_size"] = raw.get("draft_vocab_size")
        if raw.get("target_hidden_size") is not None:
            cfg["target_hidden_size"] = raw["target_hidden_size"]
        cfg["norm_before_residual"] = raw.get("norm_before_residual", True)
        for key in ("norm_before_fc", "fc_norm", "norm_output"):
            if key in r.speculators_copies:
                cfg[key] = raw.get(key, False)
            elif raw.get(key):
                ignored.append(key)
        if raw.get("eagle_aux_hidden_state_layer_ids"):
            cfg["eagle_aux_hidden_state_layer_ids"] = raw["eagle_aux_hidden_state_layer_ids"]
        if r.speculators_arch_by_type:
            mt = cfg.get("model_type", "llama")
            if mt not in SPECULATORS_ARCH:
                problems.append(
                    f"vLLM rejects it: 'Unsupported model_type {mt} for Eagle3 speculator' "
                    "(this release builds llama or qwen3 speculators only)"
                )
                archs: tuple[str, ...] = ()
            else:
                archs = (SPECULATORS_ARCH[mt],)
        else:
            archs = ("Eagle3LlamaForCausalLM",)
    else:
        cfg = dict(raw)
        written = tuple(a for a in (raw.get("architectures") or ()) if isinstance(a, str))
        mtp = MTP_REWRITE if Version(r.release) >= Version("0.16.0") else MTP_REWRITE[:2]
        if cfg.get("model_type") in mtp:
            problems.append(
                f"model_type {cfg['model_type']!r}: vLLM turns a draft config of this type "
                "into a DeepSeek MTP head (SpeculativeConfig.hf_config_override), so the "
                "EAGLE-3 class becomes Eagle3DeepSeekMTPModel, which no release has; "
                "declare model_type deepseek_v2 for an MLA drafter"
            )
            written = ("DeepSeekMTPModel",)
        # transformers_utils/configs/eagle.py EAGLEConfig.__init__, method eagle3
        archs = tuple(
            a if a.startswith("Eagle3") or a.endswith("Eagle3") else f"Eagle3{a}" for a in written
        )
        if not r.norm_before_fc and cfg.get("norm_before_fc"):
            ignored.append("norm_before_fc")
        if not r.fc_norm:
            ignored += [k for k in ("fc_norm", "norm_output") if cfg.get(k)]
    arch = next((a for a in archs if a in r.archs), None)
    if cfg.get("draft_vocab_size") is None:
        # Eagle3LlamaForCausalLM.__init__: draft_vocab_size defaults to vocab_size
        cfg["draft_vocab_size"] = cfg.get("vocab_size")
    return Effective(cfg, archs, arch, tuple(problems), tuple(ignored))
