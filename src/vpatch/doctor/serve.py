"""The command a pair will be served with, as vLLM reads it: `vllm serve
MODEL [flags]` or `python -m vllm.entrypoints.openai.api_server --model MODEL
[flags]`, with `VAR=value` assignments (or `env VAR=value`) before it.

Read here are the flags and variables that decide what vLLM does with an
EAGLE-3 pair (vLLM's FlexibleArgumentParser forms: `--flag value`,
`--flag=value`, underscores for dashes, `--speculative-config.KEY value` and
`--attention-config.backend value` for keys of the JSON flags):
`--speculative-config` (every key, judged against the release's
SpeculativeConfig by checks/command.py), `--spec-method`/`--spec-model`/
`--spec-tokens` (kept apart: whether and how vLLM merges them is the
release's, behaviour.speculative), `--revision`, `--tensor-parallel-size`/
`-tp`, `--pipeline-parallel-size`/`-pp`, `--data-parallel-size`/`-dp`,
`--enable-expert-parallel`/`-ep`, `--language-model-only`,
`--kv-cache-dtype`, `--max-num-batched-tokens`, `--kv-transfer-config`,
`--max-model-len` (`32k`, `32K` and `auto`), `--enforce-eager`,
`--attention-backend`/`--attention-config`, `--trust-remote-code`,
`--model`; `VLLM_USE_V2_MODEL_RUNNER`, `VLLM_ATTENTION_BACKEND`,
`VLLM_PP_LAYER_PARTITION` (from the command's assignments, else doctor's
own environment). Everything else is kept as written and listed as not
interpreted; the flags read that the printed command does not rewrite
(data parallel to KV transfer) are kept as written too. Words after a bare
`--` are positional for vLLM (`_positional`). `command()` prints it back,
with changes, pasteable into a shell.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import PurePath
from typing import Any

from .. import jsontext, settings
from ..errors import ConfigError

API_SERVER = ("vllm.entrypoints.openai.api_server", "vllm.entrypoints.cli.main")
ENV_READ = ("VLLM_USE_V2_MODEL_RUNNER", "VLLM_ATTENTION_BACKEND", "VLLM_PP_LAYER_PARTITION")
# engine/arg_utils.py EngineArgs.create_speculative_config (where Rules.spec_flags):
# each flag and the speculative-config key it sets, in the order vLLM merges them
SPEC_FLAGS = (
    ("--spec-method", "method"),
    ("--spec-model", "model"),
    ("--spec-tokens", "num_speculative_tokens"),
)
# vLLM flags that take no value (so the next word is not theirs); any other
# flag doctor does not read is taken to have a value when the next word is no flag.
SWITCHES = frozenset(
    {
        "enforce-eager",
        "trust-remote-code",
        "enable-prefix-caching",
        "enable-chunked-prefill",
        "enable-expert-parallel",
        "enable-auto-tool-choice",
        "enable-log-requests",
        "disable-log-requests",
        "disable-log-stats",
        "disable-custom-all-reduce",
        "disable-uvicorn-access-log",
        "disable-frontend-multiprocessing",
        "headless",
        "language-model-only",
    }
)
# short names vLLM's parser takes (engine/arg_utils.py add_cli_args)
SHORT = {
    "tp": "tensor-parallel-size",
    "pp": "pipeline-parallel-size",
    "dp": "data-parallel-size",
    "ep": "enable-expert-parallel",
}
ASSIGN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


@dataclass(frozen=True)
class Serve:
    program: tuple[str, ...] = ("vllm", "serve")
    model: str = ""
    model_flag: bool = False  # given as --model (the api_server form)
    revision: str | None = None  # --revision: the target's branch, tag or commit
    spec: dict[str, Any] = field(default_factory=dict)
    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    # --spec-method/--spec-model/--spec-tokens as given: (flag, key, value)
    spec_flags: tuple[tuple[str, str, Any], ...] = ()
    # read, kept as written in `other` (nothing here rewrites them)
    data_parallel_size: int = 1
    expert_parallel: bool = False
    language_model_only: bool = False
    kv_cache_dtype: str | None = None  # --kv-cache-dtype (None: vLLM's "auto")
    max_num_batched_tokens: int | None = None
    kv_transfer: dict[str, Any] = field(default_factory=dict)  # --kv-transfer-config
    max_model_len: int | None = None  # None: vLLM derives it from the target
    enforce_eager: bool = False
    attention_backend: str | None = None
    attention_from: str = ""  # the flag or variable that set it
    trust_remote_code: bool = False
    assigned: dict[str, str] = field(default_factory=dict)  # VAR=value before the program
    other: tuple[str, ...] = ()  # words not interpreted, as written
    uninterpreted: tuple[str, ...] = ()  # their flag names, and spec keys / variables
    # a setting given twice, as written: (the one vLLM ignores, the one it takes)
    repeated: tuple[tuple[str, str], ...] = ()
    given: bool = True  # false: made from --target/--drafter

    @property
    def given_spec(self) -> dict[str, Any]:
        """The speculative config as written, the --spec-* flags' keys added
        where it lacks them (which drafter is meant, whatever the release
        makes of the flags: behaviour.speculative reads it as vLLM does)."""
        return {**{k: v for _, k, v in self.spec_flags}, **self.spec}

    @property
    def drafter(self) -> str:
        m = self.given_spec.get("model")
        return m if isinstance(m, str) else ""

    @property
    def drafter_revision(self) -> str | None:
        r = self.spec.get("revision")
        return str(r) if r is not None else None

    @property
    def num_speculative_tokens(self) -> Any:
        return self.given_spec.get("num_speculative_tokens")

    def environ(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        """The environment vLLM starts with: doctor's, then the command's
        assignments."""
        return {**(os.environ if base is None else base), **self.assigned}

    def command(self, **changes: Any) -> str:
        """The command, with `changes` (field=value; spec_KEY=value for a
        speculative-config key, None to drop it; unset=(VAR, ...): variables
        vLLM must not see, dropped from the assignments, else unset by `env
        -u` where they come from the shell)."""
        unset = tuple(changes.pop("unset", ()))
        spec = dict(self.spec)
        flags = self.spec_flags
        if changes.pop("merge_spec_flags", False):
            # into the JSON, which every release reads; a key the JSON has
            # keeps the JSON's value (vLLM refuses both: mutually exclusive)
            spec = self.given_spec
            flags = ()
        for k in [k for k in changes if k.startswith("spec_")]:
            v = changes.pop(k)
            if v is None:
                spec.pop(k[5:], None)
            else:
                spec[k[5:]] = v
        s = replace(self, spec=spec, spec_flags=flags, **changes)
        env = dict(s.assigned)
        if s.attention_backend is None:
            env.pop("VLLM_ATTENTION_BACKEND", None)
        unset_words: list[str] = []
        for name in unset:
            if env.pop(name, None) is None:
                unset_words += ["env", "-u", name]
        words = list(s.program)
        words += ["--model", s.model] if s.model_flag else [s.model]
        if s.revision is not None:
            words += ["--revision", s.revision]
        words += ["--tensor-parallel-size", str(s.tensor_parallel_size)]
        if s.pipeline_parallel_size != 1:
            words += ["--pipeline-parallel-size", str(s.pipeline_parallel_size)]
        if s.max_model_len is not None:
            words += ["--max-model-len", str(s.max_model_len)]
        if s.enforce_eager:
            words.append("--enforce-eager")
        if s.attention_backend is not None and s.attention_from.startswith("--"):
            words += [s.attention_from, s.attention_backend]
        if s.trust_remote_code:
            words.append("--trust-remote-code")
        words += list(s.other)
        if spec or not flags:
            words += ["--speculative-config", json.dumps(spec)]
        for flag, _, value in flags:
            words += [flag, value if isinstance(value, str) else json.dumps(value)]
        # VAR=value as the shell reads an assignment: the value quoted, not the
        # word ('VAR=a b' would be a program named `VAR=a b`); a name is
        # [A-Za-z_][A-Za-z0-9_]* (ASSIGN), which needs no quoting
        assign = [f"{k}={shlex.quote(v)}" for k, v in env.items()]
        return " ".join([*unset_words, *assign, *(shlex.quote(w) for w in words)])


def from_options(
    target: str,
    drafter: str,
    tp: int = 1,
    pp: int = 1,
    k: int = 3,
    remote: bool = False,
    revision: str | None = None,
    drafter_revision: str | None = None,
) -> Serve:
    """The command `--target/--drafter` stand for (their @revisions are
    vLLM's --revision and the speculative config's "revision")."""
    spec: dict[str, Any] = {"method": "eagle3", "model": drafter}
    if drafter_revision is not None:
        spec["revision"] = drafter_revision
    spec["num_speculative_tokens"] = k
    return Serve(
        model=target,
        revision=revision,
        spec=spec,
        tensor_parallel_size=tp,
        pipeline_parallel_size=pp,
        trust_remote_code=remote,
        given=False,
    )


def _program(words: list[str]) -> tuple[tuple[str, ...], list[str]]:
    if not words:
        raise ConfigError("no serve command after `--`: give `vllm serve MODEL [flags]`")
    name = PurePath(words[0]).name
    if name == "vllm" and len(words) > 1 and words[1] == "serve":
        return tuple(words[:2]), words[2:]
    if re.match(r"^python[0-9.]*$", name) and len(words) > 2 and words[1] == "-m":
        if words[2] == API_SERVER[0]:
            return tuple(words[:3]), words[3:]
        if words[2] == API_SERVER[1] and len(words) > 3 and words[3] == "serve":
            return tuple(words[:4]), words[4:]
    raise ConfigError(
        f"not a vLLM serve command: {shlex.join(words[:3])} ...; give `vllm serve MODEL "
        "[flags]` or `python -m vllm.entrypoints.openai.api_server --model MODEL [flags]`"
    )


_DECIMAL = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
_BINARY = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
LENGTH = "--max-model-len (a length: 32768, 25.6k, 32K or auto)"


def max_len(value: str) -> int | None:
    """vLLM's --max-model-len, read as its human_readable_int_or_auto reads it
    (vllm/utils/argparse_utils.py; engine/arg_utils.py in 0.16.0; the same
    in 0.16.0-0.34.0): -1 or auto (derived from the model); a number with a
    decimal suffix k m g t (x1000**n, decimals allowed: int(float(number) *
    mult), 25.6k is 25600); with a binary one K M G T (x1024**n, whole
    numbers only); else int(value). The result within settings.whole's
    bound; the number's text within its width (vLLM itself fails on 309
    digits with a suffix: float() makes inf, int(inf) raises)."""
    text = value.strip()
    if text == "-1" or text.lower() == "auto":
        return None
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([kKmMgGtT])", text)
    if m is None:
        return settings.whole(text, LENGTH)
    number, suffix = m.groups()
    if len(number) > settings.WIDTH:
        return settings.whole(text, LENGTH)  # refused, as any over-long number
    if suffix in _DECIMAL:
        return settings.whole(int(float(number) * _DECIMAL[suffix]), LENGTH)
    if "." in number:
        raise ConfigError(
            f"--max-model-len {text!r}: vLLM allows no decimals with a binary suffix like "
            f"{suffix}; did you mean {number}{suffix.lower()}?"
        )
    return settings.whole(int(number) * _BINARY[suffix], LENGTH)


def _json_object(flag: str, value: str) -> dict[str, Any]:
    data = jsontext.loads(value, f"{flag} {value[:80]}")
    if not isinstance(data, dict):
        raise ConfigError(f"{flag}: not a JSON object: {value[:80]}")
    return data


def _scalar(value: str) -> Any:
    try:
        return jsontext.loads(value, value[:80])
    except ConfigError:
        return value


def parse(words: list[str]) -> Serve:
    """Read a serve command (its words, as the shell splits them; one word
    holding the whole command is split here)."""
    if len(words) == 1 and " " in words[0].strip():
        try:
            words = shlex.split(words[0])
        except ValueError as e:
            raise ConfigError(f"cannot split the serve command: {e}") from None
    words = list(words)
    if words and words[0] == "env":
        words = words[1:]
    assigned: dict[str, str] = {}
    while words and ASSIGN.match(words[0]):
        k, _, v = words.pop(0).partition("=")
        assigned[k] = v
    program, rest = _program(words)
    f: dict[str, Any] = {"spec": {}, "assigned": assigned}
    dotted_spec: dict[str, Any] = {}
    spec_flags: list[tuple[str, str, Any]] = []
    other: list[str] = []
    unread: list[str] = [f"{k} (environment)" for k in assigned if k not in ENV_READ]
    given: dict[str, str] = {}  # setting -> the words that gave it last
    repeated: list[tuple[str, str]] = []
    after: list[str] | None = None  # the words after a bare `--`
    i = 0
    while i < len(rest):
        w = rest[i]
        i += 1
        if w == "--":
            after = rest[i:]
            break
        if not w.startswith("-") or w == "-":
            if "model" not in f and not f.get("model_flag"):
                f["model"] = w
            else:
                other.append(w)
                unread.append(w)
            continue
        raw, eq, inline = w.partition("=")
        head, dot, key = raw.lstrip("-").partition(".")
        name = head.replace("_", "-")
        name = SHORT.get(name, name)
        key = key.replace("-", "_")
        takes = name not in SWITCHES and not name.startswith("no-")
        value = None
        if takes:
            if eq:
                value = inline
            elif i < len(rest) and not rest[i].startswith("--"):
                value = rest[i]
                i += 1
        flag = f"--{name}" + (f".{key}" if dot else "")
        known_value = {
            "model",
            "revision",
            "speculative-config",
            "tensor-parallel-size",
            "pipeline-parallel-size",
            "max-model-len",
            "attention-backend",
            "attention-config",
            "spec-method",
            "spec-model",
            "spec-tokens",
            "data-parallel-size",
            "kv-cache-dtype",
            "max-num-batched-tokens",
            "kv-transfer-config",
        }
        if name in known_value and value is None:
            raise ConfigError(f"{flag} needs a value")
        setting = _setting(name, key if dot else "")
        if setting:
            words_given = w if eq or value is None else f"{w} {_short(value)}"
            if setting in given:
                repeated.append((given[setting], words_given))
            given[setting] = words_given
        if name == "model" and not dot:
            f["model"], f["model_flag"] = value, True
        elif name == "revision" and not dot:
            f["revision"] = value
        elif name == "speculative-config":
            if dot:
                dotted_spec[key] = _scalar(value or "")
            else:
                f["spec"] = _json_object(flag, value or "")
        elif name == "tensor-parallel-size" and not dot:
            f["tensor_parallel_size"] = settings.whole(value or "", flag)
        elif name == "pipeline-parallel-size" and not dot:
            f["pipeline_parallel_size"] = settings.whole(value or "", flag)
        elif name == "max-model-len" and not dot:
            f["max_model_len"] = max_len(value or "")
        elif name in ("enforce-eager", "no-enforce-eager") and not dot:
            f["enforce_eager"] = name == "enforce-eager"
        elif name in ("trust-remote-code", "no-trust-remote-code") and not dot:
            f["trust_remote_code"] = name == "trust-remote-code"
        elif name == "attention-backend" and not dot:
            f["attention_backend"], f["attention_from"] = value, "--attention-backend"
        elif name == "attention-config" and dot and key == "backend":
            f["attention_backend"], f["attention_from"] = value, "--attention-config.backend"
        elif name == "attention-config" and not dot:
            cfg = _json_object(flag, value or "")
            if "backend" in cfg:
                f["attention_backend"] = str(cfg["backend"])
                f["attention_from"] = "--attention-backend"
            if set(cfg) - {"backend"}:
                unread.append(f"{flag} (keys {', '.join(sorted(set(cfg) - {'backend'}))})")
        elif name in ("spec-method", "spec-model", "spec-tokens") and not dot:
            tokens = dict(SPEC_FLAGS)[flag] == "num_speculative_tokens"
            flag_value: Any = settings.whole(value or "", flag) if tokens else value
            spec_flags = [x for x in spec_flags if x[0] != flag]
            spec_flags.append((flag, dict(SPEC_FLAGS)[flag], flag_value))
        elif name in READ_AS_WRITTEN and not (dot and name != "kv-transfer-config"):
            other.append(w)
            if value is not None and not eq:
                other.append(value)
            _read_as_written(f, name, key if dot else "", value, flag)
        else:
            other.append(w)
            if value is not None and not eq:
                other.append(value)
            unread.append(flag)
    if after is not None:
        _positional(after, f, program)
    spec = {**f["spec"], **dotted_spec}
    if not spec and not spec_flags:
        raise ConfigError(
            "the serve command has no --speculative-config (nor --spec-model): there is no "
            "drafter to check"
        )
    model = {**{k: v for _, k, v in spec_flags}, **spec}.get("model")
    if not isinstance(model, str) or not model:
        raise ConfigError(
            '--speculative-config has no "model" (nor --spec-model): which drafter is served?'
        )
    if not f.get("model"):
        raise ConfigError("the serve command names no model (vllm serve MODEL, or --model)")
    env = {**os.environ, **assigned}
    if "attention_backend" not in f and env.get("VLLM_ATTENTION_BACKEND"):
        f["attention_backend"] = env["VLLM_ATTENTION_BACKEND"]
        f["attention_from"] = "VLLM_ATTENTION_BACKEND"
    f["spec"] = spec
    f["spec_flags"] = tuple(
        sorted(spec_flags, key=lambda x: [a for a, _ in SPEC_FLAGS].index(x[0]))
    )
    return Serve(
        program=program,
        other=tuple(other),
        uninterpreted=tuple(unread),
        repeated=tuple(repeated),
        **f,
    )


# The flags read for what they do to EAGLE-3 (checks/command.py and
# checks/shapes.py say where they do something) and printed as written.
READ_AS_WRITTEN = (
    "data-parallel-size",
    "enable-expert-parallel",
    "no-enable-expert-parallel",
    "language-model-only",
    "no-language-model-only",
    "kv-cache-dtype",
    "max-num-batched-tokens",
    "kv-transfer-config",
)


def _read_as_written(f: dict[str, Any], name: str, key: str, value: str | None, flag: str) -> None:
    if name == "data-parallel-size":
        f["data_parallel_size"] = settings.whole(value or "", flag)
    elif name in ("enable-expert-parallel", "no-enable-expert-parallel"):
        f["expert_parallel"] = not name.startswith("no-")
    elif name in ("language-model-only", "no-language-model-only"):
        f["language_model_only"] = not name.startswith("no-")
    elif name == "kv-cache-dtype":
        f["kv_cache_dtype"] = value
    elif name == "max-num-batched-tokens":
        f["max_num_batched_tokens"] = settings.whole(value or "", flag)
    elif key:  # --kv-transfer-config.KEY VALUE
        f["kv_transfer"] = {**f.get("kv_transfer", {}), key: _scalar(value or "")}
    else:
        f["kv_transfer"] = {**f.get("kv_transfer", {}), **_json_object(flag, value or "")}


def _positional(words: list[str], f: dict[str, Any], program: tuple[str, ...]) -> None:
    """The words after a bare `--`. vLLM's parser (FlexibleArgumentParser
    .parse_args, vllm/utils/argparse_utils.py, the same in 0.33.0 and 0.34.0)
    rewrites names but hands `--` on to argparse, which takes every word after
    it as a positional argument, never a flag; `vllm serve` has one, the
    model, and refuses any other ("unrecognized arguments"), as the
    api_server, which has none, refuses all."""
    words = list(words)
    if words and program[-1] == "serve" and not f.get("model"):
        f["model"] = words.pop(0)
    if words:
        raise ConfigError(
            f"the serve command's words after `--` ({_short(' '.join(words), 60)}): vLLM's "
            "parser takes each as a positional argument, not a flag, and refuses it at "
            "startup (unrecognized arguments); put the flags before `--`, or drop it"
        )


def _setting(name: str, key: str) -> str:
    """The setting a flag doctor reads gives ('' for one it does not read):
    vLLM's parser keeps the last value of each."""
    if name in ("enforce-eager", "no-enforce-eager", "trust-remote-code", "no-trust-remote-code"):
        return name.removeprefix("no-")
    if name == "attention-backend" or (name == "attention-config" and key == "backend"):
        return "attention backend"
    if name == "speculative-config":
        return f"speculative-config.{key}" if key else name
    if name in ("model", "tensor-parallel-size", "pipeline-parallel-size", "max-model-len"):
        return "" if key else name
    if name in ("spec-method", "spec-model", "spec-tokens"):
        return "" if key else name
    return ""


def _short(value: str, limit: int = 40) -> str:
    return shlex.quote(value if len(value) <= limit else value[: limit - 1] + "…")
