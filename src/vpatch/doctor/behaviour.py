"""How a release's vLLM behaves, given its facts (rules.py's Rules, the
data of rules.toml): which release an installed vLLM behaves as (place(),
and newer() past the releases the rules cover), which model runner serves a
pair, the PP split, the default aux ids, and how it reads a drafter config
(effective()). Each says which vLLM code it follows; the tier checks them
against real vLLM (tests/vllm/release/test_doctor_verdicts.py).

`vpatch docs` renders the per-release table into docs/doctor.md
(maintain/docs.py).

"dropped": the target returns no state for that id, so the drafter's fc gets
fewer states than it was built for and the first request fails in fc
(mat1 and mat2 shapes cannot be multiplied). Everywhere: ids come from the
drafter config's top-level `eagle_aux_hidden_state_layer_ids` when it is a
non-empty list[Any], else the target's default (2, n // 2, n - 3); id k is the
input of decoder layer k (hidden_states + residual), and the states are
concatenated in layer order, not in the order the ids are written.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from packaging.version import Version

from .. import lock, settings
from ..errors import ConfigError, NewerRelease
from ..rules import MLA, Rules


@dataclass(frozen=True)
class Release:
    """The release an installed vLLM version behaves as."""

    version: str  # as installed, e.g. "X.Y.Z+cu129"
    release: str  # the table's release it maps to, e.g. "X.Y.Z"
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


def newer(pins: lock.Lock, installed: str, what: str = "its verdict") -> NewerRelease | None:
    """NewerRelease when `installed` (a version as installed) is newer than
    the newest release doctor's rules cover, else None: vpatch does not guess
    what a release it has not read does (the V1 runner's removal changed
    verdicts that a release before it would have given). Lock.standing is
    the one answer, `vpatch check` and `install` take it too."""
    return pins.standing(installed).refusal(f"{what} would be a guess", rules=True)


def known_releases(pins: lock.Lock, newest: str | None = None) -> list[str]:
    """The pinned releases doctor's rules cover (up to `newest`: what a carry
    proposes, default rules.toml's)."""
    return pins.rules.known(pins.versions(), newest)


def runner(r: Rules, arch: str, pp: int, env: Mapping[str, str] | None = None) -> str:
    """The model runner that serves an EAGLE-3 pair for a target of
    architecture `arch`: "v1" or "v2" (VLLM_USE_V2_MODEL_RUNNER, when set,
    decides where it selects; a release with one runner has no choice, and
    runner_refused() says whether it starts at all)."""
    if len(r.runners) == 1:
        return next(iter(r.runners))
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


V2_ENV = "VLLM_USE_V2_MODEL_RUNNER"


def runner_refused(r: Rules, env: Mapping[str, str] | None = None) -> str | None:
    """vLLM's error at engine start for the environment's
    VLLM_USE_V2_MODEL_RUNNER, None when it starts: with the V1 runner gone
    (Rules.v2_env "must_be_1", platforms/interface.py
    Platform.validate_environ) any value but "1" is refused."""
    env = os.environ if env is None else env
    value = env.get(V2_ENV)
    if r.v2_env != "must_be_1" or value is None or value == "1":
        return None
    return (
        f"ValueError: {V2_ENV}={value} is no longer supported: Model Runner V1 has been "
        "removed. Unset this variable."
    )


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
    """DeepseekV2ForCausalLM.get_eagle3_aux_hidden_state_layers (upstream
    where rules.toml has upstream_eagle3; the patched series: the same):
    (2, n // 2, n - 3)."""
    return (2, num_layers // 2, num_layers - 3)


# Remote code of a target (HFConfigParser.parse, then transformers'
# AutoConfig / AutoTokenizer.from_pretrained with vLLM's trust_remote_code):
# a config whose auto_map names a class of the repo loads without
# --trust-remote-code when vLLM (Rules.own_configs) or transformers has its
# own class for the model type: transformers has DeepseekV3Config and
# DeepseekV2Config in every version these releases allow (>= 4.56, which
# the oldest pinned release requires; added in 4.51 and 4.54). A tokenizer whose
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
# 5.24 (the tier's venvs hold both: one release's loads it so, others refuse it).
# Either way the tokenizer served is not the repo's. Checked against real
# vLLM by tests/vllm/release/test_doctor_remote_code.py.
TRANSFORMERS_CONFIGS = frozenset({"deepseek_v2", "deepseek_v3"})
TRANSFORMERS_TOKENIZERS = frozenset(
    {"LlamaTokenizer", "LlamaTokenizerFast", "PreTrainedTokenizerFast", "TokenizersBackend"}
)


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
        if cfg.get("model_type") in r.mtp_rewrite:
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


# -- the serve command's speculative config, and who reads a draft's use_mla
# ------------------------------------------------------------------

# The config classes transformers lacks, by major (CONFIG_MAPPING_NAMES of
# 4.57.6, the newest 4.x any release allows, and of 5.19.0 and 5.25.0: the
# tier's venvs; research-54 D read 4.56.0 too): a model type vLLM has no class
# for either (Rules.own_configs) loads only from the repo's auto_map.
TRANSFORMERS_LACKS = {4: frozenset({"kimi_k2", "kimi_k25"}), 5: frozenset({"kimi_k2"})}


def config_class_missing(model_type: object, r: Rules) -> bool:
    """Whether a config.json of `model_type` has no class in release `r`:
    vLLM's _CONFIG_REGISTRY lacks it (transformers_utils/config.py
    HFConfigParser.parse asks it first) and so does every transformers
    major the release allows (then AutoConfig.from_pretrained raises "does
    not recognize this architecture" unless auto_map names a class)."""
    if not isinstance(model_type, str) or model_type in r.own_configs:
        return False
    majors = r.transformers or (4,)
    return all(model_type in TRANSFORMERS_LACKS.get(m, frozenset()) for m in majors)


@dataclass(frozen=True)
class Speculative:
    """The speculative config as release `r` builds it from the command
    (engine/arg_utils.py EngineArgs.create_speculative_config)."""

    config: dict[str, Any]  # the keys SpeculativeConfig gets
    refused: tuple[str, ...]  # why vLLM stops at startup
    ignored: tuple[str, ...]  # keys it drops without a word (Rules.spec_extra "ignore")
    merged: tuple[str, ...]  # the --spec-* flags merged into it


def nearest(key: str, fields: frozenset[str]) -> str | None:
    """The field a mistyped key most likely meant (difflib), if any is close."""
    got = difflib.get_close_matches(key, sorted(fields), n=1, cutoff=0.5)
    return got[0] if got else None


def speculative(
    spec: Mapping[str, Any],
    flags: tuple[tuple[str, str, Any], ...],
    r: Rules,
    dashed_since: str | None = None,
) -> Speculative:
    """--speculative-config `spec` and the --spec-* `flags` ((flag, key,
    value)) as release `r` reads them: the flags merged where the release
    has them (Rules.spec_flags; a key in both is "mutually exclusive"), else
    refused by argparse (and merged here, so that the rest is judged as the
    command would be with them moved into the JSON); dashed keys read as
    underscored (Rules.spec_dashed, from `dashed_since`); a key
    SpeculativeConfig lacks refused or dropped (Rules.spec_extra)."""
    cfg = dict(spec)
    refused: list[str] = []
    merged: list[str] = []
    for flag, key, value in flags:
        if not r.spec_flags:
            refused.append(
                f"{flag}: vLLM {r.release}'s parser has no such flag and refuses it at startup "
                f'(unrecognized arguments; engine/arg_utils.py); give "{key}" in '
                "--speculative-config"
            )
            cfg.setdefault(key, value)
        elif key in cfg:
            refused.append(
                f'{flag} and --speculative-config\'s "{key}" both set it: vLLM {r.release} '
                f"refuses the command (ValueError: {flag} and --speculative-config['{key}'] are "
                "mutually exclusive; engine/arg_utils.py create_speculative_config)"
            )
        else:
            cfg[key] = value
            merged.append(flag)
    if r.spec_dashed:
        cfg = {k.replace("-", "_"): v for k, v in cfg.items()}
    ignored = []
    for key in [k for k in cfg if k not in r.spec_fields]:
        near = nearest(key.replace("-", "_"), r.spec_fields)
        said = f"; the nearest field is {near!r}" if near else ""
        if near == key.replace("-", "_"):
            later = f"only from {dashed_since}" if dashed_since else "only in later releases"
            said = (
                f"; vLLM {r.release} reads keys as written (dashes as underscores {later}): "
                f"write {near!r}"
            )
        if r.spec_extra == "forbid":
            refused.append(
                f"{key!r} is no key of vLLM {r.release}'s speculative config: pydantic refuses "
                f"it at startup (SpeculativeConfig forbids extra fields: config/utils.py){said}"
            )
        else:
            ignored.append(f"{key!r}{said}")
            del cfg[key]
    for key, allowed in (
        ("rejection_sample_method", r.rejection_sample_methods),
        ("draft_sample_method", r.draft_sample_methods),
    ):
        if key in cfg and key in r.spec_fields and cfg[key] not in allowed:
            refused.append(
                f"{key} {cfg[key]!r}: vLLM {r.release} takes "
                f"{', '.join(map(repr, sorted(allowed)))} (config/speculative.py), and pydantic "
                "refuses any other at startup"
            )
    return Speculative(cfg, tuple(refused), tuple(ignored), tuple(merged))


def backend_refused(name: object, r: Rules) -> str | None:
    """vLLM's error for an attention backend name the release lacks
    (AttentionBackendEnum[name.upper()], "auto" = none), None when it takes it."""
    if not isinstance(name, str) or name.lower() == "auto" or not r.attention_backends:
        return None
    if name.upper() in r.attention_backends:
        return None
    near = difflib.get_close_matches(name.upper(), sorted(r.attention_backends), n=1)
    said = f"; the nearest is {near[0]}" if near else ""
    return (
        f"ValueError: Unknown attention backend: '{name.upper()}' (vLLM {r.release}'s "
        f"v1/attention/backends/registry.py AttentionBackendEnum has no such member, and "
        f"nothing of vLLM registers one; a plugin's register_backend could{said})"
    )


# What uses each reader of a draft's use_mla (Rules.draft_mla_readers), by the
# start of its path under vllm/, read from each file: who calls it, and when.
# "{connectors}" stands for the release's Rules.draft_mla_connectors.
DRAFT_MLA_USES = (
    # nixl/base_worker.py _resolve_head_sharded_draft_kv_heads: a non-MLA draft
    # under an MLA target has its KV head-sharded, sized by its total KV heads
    ("distributed/kv_transfer/", "KV transfer with {connectors}"),
    # DSparkSpeculator subclasses DFlashSpeculator: the draft's decode context
    # parallel size
    ("v1/worker/gpu/spec_decode/dflash/", "methods dflash and dspark"),
    # PCPManager refuses a DCP other than 1 or the PCP size for an MLA draft
    ("v1/worker/gpu/pcp_manager.py", "method dspark with --prefill-context-parallel-size > 1"),
)
DFLASH_METHODS = ("dflash", "dspark")


def draft_mla_uses(r: Rules) -> list[str]:
    """What of release `r` reads a draft's use_mla, each with its file (a
    reader DRAFT_MLA_USES does not know is named by its file alone)."""
    out = []
    connectors = ", ".join(sorted(r.draft_mla_connectors)) or "no connector"
    for reader in sorted(r.draft_mla_readers):
        use = next((u for start, u in DRAFT_MLA_USES if reader.startswith(start)), "")
        out.append(f"{use.format(connectors=connectors)} ({reader})" if use else reader)
    return out


def kv_connectors(kv_transfer: Mapping[str, Any]) -> list[str]:
    """The connectors a --kv-transfer-config uses: its kv_connector, and a
    MultiConnector's own (kv_connector_extra_config.connectors[].kv_connector,
    multi_connector.py)."""
    name = kv_transfer.get("kv_connector")
    out = [name] if isinstance(name, str) else []
    extra = kv_transfer.get("kv_connector_extra_config")
    subs = extra.get("connectors") if isinstance(extra, dict) else None
    for sub in subs if isinstance(subs, list) else ():
        if isinstance(sub, dict):
            out += kv_connectors(sub)
    return out


def draft_mla_read(r: Rules, kv_transfer: Mapping[str, Any], method: object) -> list[str]:
    """What of the command reads the draft's use_mla on release `r`: the KV
    connectors of Rules.draft_mla_connectors, a DFlash/DSpark method where a
    dflash reader is there."""
    out = [
        f"--kv-transfer-config {c}"
        for c in kv_connectors(kv_transfer)
        if c in r.draft_mla_connectors
    ]
    dflash = any(x.startswith("v1/worker/gpu/spec_decode/dflash/") for x in r.draft_mla_readers)
    if dflash and method in DFLASH_METHODS:
        out.append(f"method {method}")
    return out
