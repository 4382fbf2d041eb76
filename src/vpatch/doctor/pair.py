"""The pair doctor checks: the target's and the drafter's configs, how the
release's vLLM reads the drafter, its tensors' headers, the environment,
the serve command, and what follows from them (the ids vLLM feeds, the
states it keeps, the fc's width)."""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from packaging.version import Version

from .. import lock
from ..rules import Rules
from ..serving import Code, Served
from . import behaviour, configs, defects, weights
from . import served as code_of
from .defects import patched_eagle3
from .environment import Readiness, VllmEnv, pinned_release
from .serve import Serve


@dataclass
class Pair:
    """Everything the checks look at."""

    target: configs.Target
    drafter: configs.Drafter
    eff: behaviour.Effective
    tensors: weights.Weights
    rules: Rules
    env: VllmEnv
    readiness: Readiness
    serve: Serve
    environ: dict[str, str]  # the environment vLLM starts with
    pins: lock.Lock  # vpatch's releases and patch set, as the CLI loaded them
    assumed: str = ""  # why rules is not the environment's own release
    too_old: bool = False  # the environment's vLLM predates every rule here

    @functools.cached_property
    def speculative(self) -> behaviour.Speculative:
        """The speculative config as the release builds it from the command
        (--speculative-config and the --spec-* flags: behaviour.speculative)."""
        since = self.pins.rules.first_where(lambda r: r.spec_dashed)
        return behaviour.speculative(self.serve.spec, self.serve.spec_flags, self.rules, since)

    @property
    def spec(self) -> dict[str, Any]:
        return self.speculative.config

    @property
    def ready(self) -> bool | None:
        return self.readiness.ready

    @property
    def n(self) -> int:
        return self.target.num_layers

    @property
    def cfg(self) -> dict[str, Any]:
        return self.eff.cfg

    @property
    def release(self) -> str:
        return self.rules.release

    @property
    def series_release(self) -> str:
        """The release whose series `vpatch install` installs there (and
        `vpatch check` names patches by): the environment's own when the
        lock pins it, even past doctor's rules; else the rules' release."""
        return pinned_release(self.env, self.pins) or self.release

    @property
    def series(self) -> bool:
        """Rules of a release whose series carries EAGLE-3 itself (status
        patched in VERSIONS.lock): with vpatch's series (the only way EAGLE-3
        runs there for these targets)."""
        return self.release in patched_eagle3(self.pins)

    @property
    def eagle_config(self) -> dict[str, Any]:
        ec = self.cfg.get("eagle_config")
        return ec if isinstance(ec, dict) else {}

    @property
    def use_aux(self) -> bool:
        # EagleProposer._get_eagle3_use_aux_hidden_state_from_config; MTP reads
        # none (speculator_config.py uses_aux_hidden_states)
        if self.method == "mtp":
            return False
        return bool(self.eagle_config.get("use_aux_hidden_state", True))

    @property
    def top_ids(self) -> list[Any] | None:
        ids = self.cfg.get("eagle_aux_hidden_state_layer_ids")
        return list(ids) if ids and isinstance(ids, (list, tuple)) else None

    @property
    def top_ids_unread(self) -> Any:
        """The top-level ids when they are set to what vLLM reads no ids from
        (a string "2,30,58", a number), else None. Every release's model
        runner, V1 and V2, takes ids from a list or a tuple only, and one set
        to anything keeps it from reading eagle_config's (gpu_model_runner:
        `if not layer_ids:` reads the others, then `if layer_ids and
        isinstance(layer_ids, (list, tuple))`; read in every release whose
        rules.toml has upstream_eagle3 and the "v1" runner)."""
        v = self.cfg.get("eagle_aux_hidden_state_layer_ids")
        return v if v and not isinstance(v, (list, tuple)) else None

    @property
    def nested_ids(self) -> list[Any] | None:
        ids = self.eagle_config.get("eagle_aux_hidden_state_layer_ids")
        return list(ids) if ids and isinstance(ids, (list, tuple)) else None

    @property
    def method(self) -> str:
        """The speculative method (eagle3 when the config names none: what
        check_speculative_config asks for)."""
        m = self.serve.spec.get("method")
        return m if isinstance(m, str) else "eagle3"

    @property
    def platform(self) -> tuple[str, str]:
        """(the platform vLLM serves on, what says so): doctor/served.py."""
        return code_of.platform_of(self.env.dist, self.env.version, self.env.platform)

    @property
    def served(self) -> Served | None:
        """The file and class that serve the target on this release and
        platform, and their facts (serving.toml); None outside its families."""
        return code_of.resolve(self.pins, self.target.architecture, self.release, self.platform[0])

    @property
    def code(self) -> Code | None:
        """What the serving file does with aux ids, with the fixes `vpatch
        check` reports installed; None for a target deepseek_v2.py serves
        (rules.toml's facts) or none serves."""
        s = self.served
        if s is None or s.code is None:
            return None
        keys = set(s.family.fixes.values())
        return code_of.effective(s, {k for k in keys if self.fix(k)[1] == "installed"})

    @property
    def runner(self) -> str:
        return behaviour.runner(
            self.rules,
            self.target.architecture,
            self.serve.pipeline_parallel_size,
            env=self.environ,
        )

    @property
    def remote_code(self) -> list[str]:
        """What of the target this release does not load as the repo means it
        without --trust-remote-code, and what it does instead
        (behaviour.TRANSFORMERS_CONFIGS says why)."""
        t, r = self.target, self.rules
        out = []
        own = r.own_configs | behaviour.TRANSFORMERS_CONFIGS
        if t.config_class and t.model_type not in own:
            since = self.pins.rules.first_where(lambda x: t.model_type in x.own_configs)
            later = since is not None and Version(since) > Version(r.release)
            mine = f"; vLLM has a class of its own from {since}" if later else ""
            out.append(
                f"its config (model_type {t.model_type!r}, auto_map {t.config_class}: neither "
                f"vLLM {r.release} nor transformers has a class for it{mine}): refused at startup"
            )
        if t.tokenizer_auto_map and t.tokenizer_class not in behaviour.TRANSFORMERS_TOKENIZERS:
            does = "refused at startup"
            if 5 in r.transformers:
                does += (
                    ", or, under a transformers 5 that maps the model type to a tokenizer "
                    "(5.19 does, 5.24 does not), made into transformers' generic "
                    "TokenizersBackend instead of the repo's class: its split pattern and "
                    "special tokens are not the model's, and nothing says so"
                )
            out.append(
                f"its tokenizer (tokenizer_config.json: {t.tokenizer_class or 'no class'}, "
                f"auto_map {t.tokenizer_auto_map}): {does}"
            )
        return out

    def ids(self) -> tuple[list[Any], str]:
        """The ids vLLM asks the target for, and where they come from."""
        s = self.served
        if self.method in ("dflash", "dspark") and s is not None:
            ids, source = code_of.method_ids(
                self.drafter.raw, self.method, s.facts, self.rules.v2_nested_key
            )
            if ids is not None:
                return ids, source
            return list(behaviour.default_ids(self.n)), (
                f"the target's default (2, n // 2, n - 3), n = {self.n}: {source}"
            )
        if self.top_ids:
            return self.top_ids, "eagle_aux_hidden_state_layer_ids"
        if self.top_ids_unread is not None:
            return list(behaviour.default_ids(self.n)), (
                f"the target's default (2, n // 2, n - 3), n = {self.n}: "
                "eagle_aux_hidden_state_layer_ids is set, and is no list"
            )
        v2_key = self.rules.v2_nested_key
        if self.runner == "v1" and self.rules.v1_reads_nested_ids and self.nested_ids:
            return self.nested_ids, "eagle_config.eagle_aux_hidden_state_layer_ids"
        if self.runner == "v2" and v2_key and self.eagle_config.get(v2_key):
            return list(self.eagle_config[v2_key]), f"eagle_config.{v2_key}"
        return list(
            behaviour.default_ids(self.n)
        ), f"the target's default (2, n // 2, n - 3), n = {self.n}"

    def fix(self, key: str) -> tuple[str | None, str]:
        """The patch that fixes defect `key` (its slug; None: the patch set
        has none) and whether the environment has it, as `vpatch check`
        reports it under its name in this release's series (Readiness.fix)."""
        slug = defects.fix(self.pins, key)
        if slug is None:
            return None, "none"
        names = self.pins.patchset.named(self.series_release)
        name = next((n.removesuffix(".patch") for n, v in names if v.slug == slug), None)
        return slug, self.readiness.fix(name)

    def fixed_in(self, key: str) -> tuple[str | None, str]:
        """(the first release that fixes defect `key` itself, its pull
        request as ` (vLLM PR #N)`), from the DEP-3 of the patch that fixes
        it; None and "" where the patch set does not say."""
        slug = defects.fix(self.pins, key)
        up = self.pins.patchset.upstream(slug) if slug else None
        pr = up.link.rsplit("/pull/", 1) if up else []
        pr_said = f" (vLLM PR #{pr[1]})" if len(pr) == 2 and pr[1].isdigit() else ""
        return (up.release if up else None), pr_said

    @property
    def final_norm_id(self) -> bool:
        """Does the target yield id n (the final norm's input): the release
        does (rules.toml's final_norm_id), or `vpatch check` reports the
        series' fix installed."""
        if self.code is not None:
            return self.code.id_n
        return self.rules.final_norm_id or self.fix("final_norm_id")[1] == "installed"

    def states(self) -> tuple[list[int], list[Any], list[Any]]:
        """(the layers that yield a state, in the order vLLM concatenates
        them; ids vLLM drops; ids vLLM refuses)."""
        ids, _ = self.ids()
        bad = [i for i in ids if isinstance(i, bool) or not isinstance(i, int)]
        ints = [i for i in ids if i not in bad]
        if self.series:
            # the EAGLE-3 series' deepseek-v2-add-eagle-3-aux-hidden-state-hooks:
            # _validate_aux_hidden_state_layers refuses what it cannot serve
            refused = bad + [i for i in ints if not 0 <= i <= self.n]
            return sorted({i for i in ints if 0 <= i <= self.n}), [], refused
        top = self.n if self.final_norm_id else self.n - 1
        low = 1 if self.code is not None and self.code.id0 == "dropped" else 0
        kept = sorted({i for i in ints if low <= i <= top})
        dropped = bad + [i for i in ints if not low <= i <= top]
        return kept, dropped, []

    def target_hidden(self) -> tuple[object, str]:
        """The fc's per-state width the drafter is built with: its
        target_hidden_size when the key is present, else its hidden_size."""
        if "target_hidden_size" in self.cfg:
            return self.cfg["target_hidden_size"], "target_hidden_size"
        return self.cfg.get("hidden_size"), "hidden_size (no target_hidden_size)"

    def fc_states(self) -> tuple[int, str]:
        """How many aux states the drafter's fc is built for."""
        if self.rules.fc_width == "three":
            return 3, "3 on this release"
        m = self.cfg.get("num_aux_hidden_states")
        if isinstance(m, int) and not isinstance(m, bool):
            return m, "num_aux_hidden_states"
        if self.nested_ids:
            return len(self.nested_ids), "len(eagle_config.eagle_aux_hidden_state_layer_ids)"
        return 3, "3 (no num_aux_hidden_states)"


def show_ids(ids: Iterable[object]) -> str:
    """`[a, b, c]`, as the messages write a list of ids."""
    return "[" + ", ".join(str(i) for i in ids) + "]"
