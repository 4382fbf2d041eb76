"""doctor's facts per vLLM release (data/rules.toml): what each release does
with an EAGLE-3 drafter for a DeepSeek-V2/V3, Kimi-K2 or Kimi-K2.5 target.

The table is data beside VERSIONS.lock, read and validated once when the
lock's `rules` is first asked for (as auditwheel reads its policy): a
release table lists only the facts that change there, the first one every
fact; `newest` is the newest release whose facts were read (a carry moves it
when a new release's facts read as before, a person when they do not).
Nothing else names a release: the Rules fields below say what each fact
means and where vLLM has it; their values live only in the data.

Each fact is re-read from every pinned release's source by
releasefacts/facts.py (tests/integration/doctor/test_releases_real.py), and
`vpatch carry` reads a new release's before anyone writes them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import tomllib
from packaging.version import InvalidVersion, Version

from . import settings
from .errors import ConfigError, disk_error

FILE = "rules.toml"  # beside VERSIONS.lock
# models/deepseek_eagle3.py: the EAGLE-3 drafter classes with MLA layers, as
# the registry names them (Eagle3DeepseekV3ForCausalLM is an alias of V2's);
# which of them a release registers is its `archs`.
MLA = frozenset({"Eagle3DeepseekV2ForCausalLM", "Eagle3DeepseekV3ForCausalLM"})
# The model types whose config class Rules.own_configs tells about: vLLM
# registers them (transformers_utils/config.py _CONFIG_REGISTRY) because a
# transformers it allows has none (doctor/behaviour.py TRANSFORMERS_LACKS);
# and the model types of serving.toml's families whose repos name remote
# code (Kimi K3's config.json has auto_map configuration_kimi_k3.KimiK3Config).
CONFIG_TYPES = (
    "kimi_k25",
    "kimi_k2",
    "deepseek_v32",
    "deepseek_v4",
    "deepseek_v41",
    "kimi_k3",
    "kimi_k31",
)
# The speculative-config keys whose value builds the EAGLE drafter
# (Rules.spec_applied says on which runner).
DRAFT_KEYS = ("attention_backend", "kv_cache_dtype", "enforce_eager")


@dataclass(frozen=True)
class Rules:
    release: str
    # model_executor/models/deepseek_v2.py: DeepseekV2ForCausalLM lists
    # SupportsEagle3 (and kimi_k25.py KimiK25ForConditionalGeneration), the
    # proposer aliases media_placeholder_token_id, and config/speculative.py
    # SpeculativeConfig._verify_args accepts the model types. Before it,
    # only vpatch's series gives all four.
    upstream_eagle3: bool
    # DeepseekV2Model.forward: `if self.end_layer in self.aux_hidden_state_layers`
    # after the last layer (vLLM PR #46973). Before, id n matches no layer:
    # dropped (vpatch's series fixes it where patches.toml says: DEFECTS).
    final_norm_id: bool
    # llama_eagle3.py / deepseek_eagle3.py, the fc's input_size:
    # "three": 3 * (target_hidden_size if hasattr else hidden_size);
    # "config": getattr(num_aux_hidden_states) or len(eagle_config
    # ["eagle_aux_hidden_state_layer_ids"]) or 3, times
    # getattr(target_hidden_size, hidden_size).
    fc_width: str
    # v1/worker/gpu_model_runner.py GPUModelRunner._get_eagle3_aux_layers_from_config
    # falls back to eagle_config["eagle_aux_hidden_state_layer_ids"];
    # v1/worker/gpu/spec_decode/eagle/eagle3_utils.py get_eagle3_aux_layers_from_config
    # (the V2 runner) never reads that key; it reads eagle_config["layer_ids"]
    # where v2_nested_key says so ("": no nested key).
    v1_reads_nested_ids: bool
    v2_nested_key: str
    # config/vllm.py VllmConfig.use_v2_model_runner: the target architectures
    # the V2 model runner serves by default ("*": all);
    # VLLM_USE_V2_MODEL_RUNNER overrides it. EAGLE-3 with pipeline
    # parallelism is on the V2 runner's unsupported list (falls back to V1)
    # until v2_supports_pp.
    v2_default: frozenset[str]
    v2_supports_pp: bool
    # llama_eagle3.py Eagle3LlamaForCausalLM.__init__: the draft_id_to_target_id
    # parameter exists always (zeros unless d2t is loaded), or only when
    # draft_vocab_size != the target's vocab, so a d2t in the checkpoint of an
    # equal-vocab drafter has nowhere to go.
    d2t_only_if_vocab_differs: bool
    # transformers_utils/configs/speculators/algos.py update_eagle3: the
    # architecture is always Eagle3LlamaForCausalLM, or chosen by
    # transformer_layer_config.model_type: llama / qwen3, else ValueError.
    speculators_arch_by_type: bool
    # algos.py update_eagle3: the top-level keys copied onto the
    # transformer_layer_config (norm_before_fc, fc_norm, norm_output);
    # draft_vocab_size, target_hidden_size (when not null),
    # norm_before_residual (default True) and the aux ids always.
    speculators_copies: frozenset[str]
    # speculators/base.py SpeculatorsConfig.from_pretrained validates
    # speculators_config (proposal_methods[0].speculative_tokens,
    # verifier.name_or_path) and transformer_layer_config.
    speculators_validated: bool
    # llama_eagle3.py: norm_before_fc, fc_norm / norm_output; a release
    # without one ignores the key and builds the model without the norm.
    norm_before_fc: bool
    fc_norm: bool
    # models/registry.py _SPECULATIVE_DECODING_MODELS: EAGLE-3 drafter classes.
    # (PP and aux states from DeepSeek targets: DeepseekV2Model never relays
    # aux states between PP ranks, no supports_aux_hidden_states_over_pp, so
    # ids off the last rank are dropped on V1, or the V2 runner refuses the
    # pair: eagle3_utils.verify_supports_aux_hidden_states_over_pp.)
    archs: frozenset[str]
    # Defects that vpatch's series fixes per release (doctor/defects.py
    # DEFECTS names the patch of each; doctor asks `vpatch check` whether the
    # environment has it): the model runners on which a forced attention
    # backend (--attention-backend, --attention-config.backend,
    # VLLM_ATTENTION_BACKEND) is applied to a non-MLA (Llama) drafter under
    # an MLA target and the drafter fails to load.
    forced_backend_crash: frozenset[str]
    # The drafter's rotary embedding is built for its own
    # max_position_embeddings and a --max-model-len above it kills a running
    # server on the first longer prompt.
    draft_positions_short: bool
    # deepseek_eagle3.py: an MLA drafter without rope_scaling rebuilds its
    # rope without rope_theta (the default 10000 instead of the drafter's;
    # KeyError 'factor' under transformers 5).
    mla_rope_without_theta: bool
    # deepseek_eagle3.py reads fc_norm (a release's Llama drafter may read it
    # while its MLA drafter ignores it: fc_norm without mla_fc_norm).
    mla_fc_norm: bool
    # ModelConfig.is_deepseek_mla: an EAGLE drafter counts as MLA only for
    # model_type deepseek_v2/deepseek_v3(/_v32), so a kimi_k2 MLA drafter
    # (TorchSpec's) is set up as a non-MLA model.
    kimi_k2_drafter_not_mla: bool
    # transformers_utils/config.py _CONFIG_REGISTRY, read by
    # HFConfigParser.parse before AutoConfig: the target model types vLLM
    # loads with a config class of its own, never the repo's remote code
    # (doctor/behaviour.py TRANSFORMERS_CONFIGS for the others).
    own_configs: frozenset[str]
    # requirements/common.txt: the transformers majors the release allows.
    # A tokenizer of the repo's own, untrusted, is refused by transformers
    # 4's AutoTokenizer; transformers 5 refuses it too, or makes its generic
    # TokenizersBackend of the files, depending on the minor version
    # (doctor/behaviour.py TRANSFORMERS_TOKENIZERS).
    transformers: tuple[int, ...]
    # v1/worker/gpu_worker.py Worker: the model runners the release has, "v1"
    # (v1/worker/gpu_model_runner.py) and "v2" (v1/worker/gpu/model_runner.py).
    runners: frozenset[str]
    # How VLLM_USE_V2_MODEL_RUNNER is taken: "selects" (1 / 0 choose the
    # runner: gpu_worker.py Worker.__init__ or config/vllm.py
    # VllmConfig.use_v2_model_runner) or "must_be_1" (the V1 runner removed:
    # platforms/interface.py Platform.validate_environ refuses any other
    # value at engine start, "Model Runner V1 has been removed").
    v2_env: str
    # config/vllm.py VllmConfig._limit_max_model_len_to_draft: the runners on
    # which the served max_model_len is lowered to the drafter's when the
    # drafter does not share the target's positions (its RoPE type is not
    # one of cache_only_rope_types: config/speculative.py
    # draft_shares_target_positions / _rope_only_sizes_cache).
    draft_caps_max_model_len: frozenset[str]
    cache_only_rope_types: frozenset[str]
    # config/speculative.py SpeculativeConfig.hf_config_override: a draft
    # config of these model types is rewritten into a DeepSeek MTP head
    # before EAGLE-3 sees it.
    mtp_rewrite: frozenset[str]

    # -- the serve command's speculative config, and who reads a draft's
    # use_mla ---------------------------------------------------
    # config/speculative.py SpeculativeConfig: the keys --speculative-config
    # takes (its init fields); engine/arg_utils.py
    # EngineArgs.create_speculative_config hands the JSON to
    # SpeculativeConfig(**...). Any other key: spec_extra, "forbid"
    # (config/utils.py config(): ConfigDict(extra="forbid"), a pydantic
    # ValidationError at startup) or "ignore" (a pydantic dataclass's
    # default: the key is dropped, nothing said).
    spec_fields: frozenset[str]
    spec_extra: str
    # engine/arg_utils.py EngineArgs.add_cli_args: --spec-method,
    # --spec-model, --spec-tokens, which create_speculative_config merges
    # into the speculative config (one key in both: ValueError "... are
    # mutually exclusive"); without them argparse refuses the flags.
    # spec_dashed: create_speculative_config reads "num-speculative-tokens"
    # as num_speculative_tokens (k.replace("-", "_")).
    spec_flags: bool
    spec_dashed: bool
    # The speculative-config keys (rules.DRAFT_KEYS) each runner builds the
    # EAGLE drafter with, "runner:key": the V1 proposer
    # (v1/spec_decode/, SpecDecodeBaseProposer._create_draft_vllm_config
    # and the V1 runner's reads of speculative_config.enforce_eager), the
    # V2 runner's v1/worker/gpu/spec_decode/eagle/utils.py load_eagle_model
    # (its own `speculative_config.KEY` or, from apply_draft_overrides,
    # config/speculative.py _DRAFT_VLLM_CONFIG_OVERRIDES). A key a runner
    # lacks is ignored there: the drafter takes the target's.
    spec_applied: frozenset[str]
    # v1/attention/backends/registry.py AttentionBackendEnum: the names
    # --attention-backend and the speculative config's attention_backend
    # take (upper-cased, "auto" = none); any other is "Unknown attention
    # backend" (its metaclass) at startup.
    attention_backends: frozenset[str]
    # config/speculative.py: the values of rejection_sample_method
    # (RejectionSampleMethod) and draft_sample_method (DraftSampleMethod)
    # the release takes; another is a pydantic ValidationError.
    rejection_sample_methods: frozenset[str]
    draft_sample_methods: frozenset[str]
    # The files (under vllm/) that read a draft model config's use_mla
    # (`<draft...>.use_mla`), searched in every file of
    # distributed/kv_transfer/, v1/worker/ and v1/spec_decode/, where a
    # draft model config is held; and the KV connectors
    # (--kv-transfer-config kv_connector, kv_connector/factory.py
    # register_connector) whose module holds one of those files. What
    # uses each other reader: doctor/behaviour.py DRAFT_MLA_USES.
    draft_mla_readers: frozenset[str]
    draft_mla_connectors: frozenset[str]


# How each field is written in the TOML: its type there and how it is read.
_KINDS: dict[str, str] = {
    "str": "a string",
    "bool": "true or false",
    "frozenset[str]": "a list of strings",
    "tuple[int, ...]": "a list of integers",
}


def names() -> list[str]:
    """The facts, in Rules' order (the release aside)."""
    return [f.name for f in fields(Rules) if f.name != "release"]


def _kind(name: str) -> str:
    return str(next(f.type for f in fields(Rules) if f.name == name))


def _value(where: str, name: str, v: Any) -> Any:
    """A TOML value as the field's type, or ConfigError."""
    return typed(where, name, _kind(name), v)


def typed(where: str, name: str, kind: str, v: Any) -> Any:
    """A TOML value as `kind` (one of _KINDS), or ConfigError: the one
    reading of a fact's value, rules.toml's and serving.toml's."""
    ok = {
        "str": isinstance(v, str),
        "bool": isinstance(v, bool),
        "frozenset[str]": isinstance(v, list) and all(isinstance(x, str) for x in v),
        "tuple[int, ...]": isinstance(v, list)
        and all(isinstance(x, int) and not isinstance(x, bool) for x in v),
    }[kind]
    if not ok:
        raise ConfigError(f"{where}: {name} must be {_KINDS[kind]}")
    if kind == "frozenset[str]":
        if len(set(v)) != len(v):
            raise ConfigError(f"{where}: {name} lists a name twice")
        return frozenset(v)
    if kind == "tuple[int, ...]":
        return tuple(v)
    return v


def toml_value(v: Any) -> str:
    """A fact's value as the TOML writes it (sorted, so a carry's text is
    stable)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, frozenset):
        return "[" + ", ".join(toml_value(x) for x in sorted(v)) + "]"
    if isinstance(v, tuple):
        return "[" + ", ".join(str(x) for x in v) + "]"
    raise TypeError(f"no TOML form for {v!r}")


@dataclass(frozen=True)
class Table:
    """rules.toml, validated: {release: the facts that change there}."""

    path: Path
    changes: tuple[tuple[str, Mapping[str, Any]], ...]  # oldest first
    newest: str  # the newest release whose facts were read

    @property
    def first(self) -> str:
        return self.changes[0][0]

    def releases(self) -> list[str]:
        """The releases that change a fact."""
        return [v for v, _ in self.changes]

    def first_where(self, holds: Callable[[Rules], bool]) -> str | None:
        """The first release whose rules `holds` is true of (a fact changes
        only at a table's release, so it is one of those), None when none:
        what a message says as "from X" reads the release here."""
        return next((v for v in self.releases() if holds(self.at(v))), None)

    def at(self, release: str) -> Rules:
        """The rules of `release` (folded from every table at or below it)."""
        v = Version(release)
        acc: dict[str, Any] = {}
        for first, changes in self.changes:
            if Version(first) <= v:
                acc.update(changes)
        if not acc:
            raise ConfigError(f"{self.path.name}: no rules at or below {release}")
        return Rules(release=release, **acc)

    def covers(self, release: str) -> bool:
        """Whether `release` lies from the first table to `newest`."""
        try:
            v = Version(release)
        except InvalidVersion:
            return False
        return Version(self.first) <= v <= Version(self.newest)

    def known(self, pinned: list[str], newest: str | None = None) -> list[str]:
        """The pinned releases the table covers (up to `newest`: what a carry
        proposes it to be, default the table's)."""
        top = Version(newest or self.newest)
        return [v for v in pinned if Version(self.first) <= Version(v) <= top]


_NEWEST = re.compile(r'^newest = "[^"\n]*"$', re.M)


def with_newest(text: str, newest: str) -> str:
    """rules.toml's text with `newest` set (the rest byte for byte)."""
    new, n = _NEWEST.subn(f'newest = "{newest}"', text, count=1)
    if n != 1:
        raise ConfigError(f'{FILE} has no `newest = "X.Y.Z"` line')
    return new


def load(path: Path) -> Table:
    """rules.toml at `path`, validated: every key a fact, every value of
    its type, releases oldest first, the first table complete, `newest`
    at or after the last table. ConfigError (exit 2) names what is wrong."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{path} not found: vpatch's data is incomplete") from None
    except (ValueError, UnicodeDecodeError) as e:  # TOMLDecodeError; int() over 4300 digits
        raise ConfigError(f"{path.name} is not valid TOML: {e}") from None
    except OSError as e:
        raise disk_error(e, f"cannot read {path.name}") from None
    unknown = sorted(set(data) - {"newest", "releases"})
    if unknown:
        raise ConfigError(f"{path.name}: unknown keys {', '.join(unknown)}")
    tables = data.get("releases")
    if not isinstance(tables, dict) or not tables:
        raise ConfigError(f'{path.name}: no [releases."X.Y.Z"] tables')
    known = set(names())
    changes: list[tuple[str, Mapping[str, Any]]] = []
    for release, table in tables.items():
        where = f"{path.name} [releases.{settings.shown(release)}]"
        try:
            Version(release)
        except ValueError:  # InvalidVersion, or a part of over 4300 digits
            raise ConfigError(f"{where}: {settings.shown(release)} is not a release") from None
        if not isinstance(table, dict):
            raise ConfigError(f"{where}: not a table")
        extra = sorted(set(table) - known)
        if extra:
            raise ConfigError(f"{where}: unknown facts {', '.join(extra)}")
        if not changes:
            missing = [n for n in names() if n not in table]
            if missing:
                raise ConfigError(
                    f"{where}: the first release sets every fact; missing " + ", ".join(missing)
                )
        elif Version(release) <= Version(changes[-1][0]):
            raise ConfigError(f"{where}: releases go oldest first")
        values = {k: _value(where, k, v) for k, v in table.items()}
        before = Table(path, tuple(changes), release).at(release) if changes else None
        same = sorted(k for k, v in values.items() if before and getattr(before, k) == v)
        if same:
            # a table lists what changes: a repeated value hides where it did
            raise ConfigError(f"{where}: {', '.join(same)} as before (list only what changes)")
        changes.append((release, values))
    newest = data.get("newest")
    if not isinstance(newest, str):
        raise ConfigError(f"{path.name}: newest must be a release")
    try:
        ok = Version(newest) >= Version(changes[-1][0])
    except ValueError:  # InvalidVersion, or a part of over 4300 digits
        said = settings.shown(newest)
        raise ConfigError(f"{path.name}: newest {said} is not a release") from None
    if not ok:
        raise ConfigError(f"{path.name}: newest {newest} is older than its last table")
    return Table(path, tuple(changes), newest)
