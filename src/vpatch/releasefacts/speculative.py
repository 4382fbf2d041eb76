"""doctor's facts of the serve command's speculative config, and of who
reads a draft model config's use_mla: the probes of the Rules
fields from spec_fields to draft_mla_connectors, which facts.py adds to its
PROBES (and these files to its FILES: a probe reads a file by its key).

The speculative config: SpeculativeConfig's fields and what the release does
with another key, the --spec-* flags and dashed keys (engine/arg_utils.py),
the keys each runner builds the EAGLE drafter with, the attention backend
names and the sampling methods the release takes. The readers of a draft's
use_mla are searched in every file of READER_TREES, where a draft model
config is held (a folder a release lacks holds none), and named by the KV
connectors whose module holds one (kv_connector/factory.py)."""

from __future__ import annotations

import ast
import re
import textwrap
from collections.abc import Callable
from typing import Any

from .. import probes
from ..rules import DRAFT_KEYS
from .anchors import Anchor, Source, parse

FILES = {
    "arg_utils": "vllm/engine/arg_utils.py",
    "config_utils": "vllm/config/utils.py",
    "backends": "vllm/v1/attention/backends/registry.py",
    "kv_factory": "vllm/distributed/kv_transfer/kv_connector/factory.py",
}
# Where a draft model config is held, searched whole for readers of its
# use_mla (Rules.draft_mla_readers): every Python file of these folders, to
# this depth (the deepest, kv_connector/v1/mooncake/store/, is 4 below).
READER_TREES = {"vllm/distributed/kv_transfer": 5, "vllm/v1/worker": 5, "vllm/v1/spec_decode": 2}
READER_GLOBS = tuple(
    f"{root}/{'*/' * depth}*.py" for root, most in READER_TREES.items() for depth in range(most)
)


def _class_fields(s: Source) -> dict[str, ast.AnnAssign]:
    """config/speculative.py SpeculativeConfig's init fields: {name: its
    annotated assignment} (ClassVar and field(init=False) aside)."""
    code = s.segment("speculative", "SpeculativeConfig")
    node = parse(textwrap.dedent(code)) if code else None
    cls = next((n for n in getattr(node, "body", ()) if isinstance(n, ast.ClassDef)), None)
    out = {}
    for b in cls.body if cls else ():
        if not isinstance(b, ast.AnnAssign) or not isinstance(b.target, ast.Name):
            continue
        if "ClassVar" in ast.unparse(b.annotation):
            continue
        if b.value is not None and "init=False" in ast.unparse(b.value).replace(" ", ""):
            continue
        out[b.target.id] = b
    return out


def _spec_fields(s: Source) -> frozenset[str]:
    return frozenset(_class_fields(s))


def _spec_extra(s: Source) -> str:
    """What SpeculativeConfig does with a key it lacks: the `extra` of the
    ConfigDict config/utils.py's config() gives every config class, else of
    the class's own decorators, else pydantic's default for a dataclass,
    "ignore"."""
    s.segment("speculative", "SpeculativeConfig")
    for text in (s.text("config_utils"), s.text("speculative")):
        m = re.search(r'ConfigDict\(\s*extra\s*=\s*"(\w+)"', text)
        if m:
            return m.group(1)
    return "ignore"


def _spec_flags(s: Source) -> bool:
    return '"--spec-method"' in s.segment("arg_utils", "EngineArgs.add_cli_args")


def _spec_dashed(s: Source) -> bool:
    merge = s.segment("arg_utils", "EngineArgs.create_speculative_config")
    return 'k.replace("-", "_")' in merge


_SPEC_READ = re.compile(r"\b(?:spec_cfg|speculative_config)\.(\w+)\b")


def _spec_applied(s: Source) -> frozenset[str]:
    """runner:key for each of DRAFT_KEYS the runner builds the EAGLE drafter
    with: V1, what the proposer (and, for enforce_eager, the V1 runner)
    reads of the speculative config; V2, what load_eagle_model reads of it,
    or applies through apply_draft_overrides (_DRAFT_VLLM_CONFIG_OVERRIDES),
    and enforce_eager where any file of the V2 runner reads it."""
    out = set()
    if not s.gated or "v1" in s.fact("runners"):
        texts = list(s.defines("proposer", "SpecDecodeBaseProposer").values())
        texts += list(s.defines("proposer", "EagleProposer").values())
        texts.append(s.text("v1"))
        read = {k for text in texts for k in _SPEC_READ.findall(text)}
        out |= {f"v1:{k}" for k in DRAFT_KEYS if k in read}
    loader = s.segment("v2_loader", "load_eagle_model")
    read = set(_SPEC_READ.findall(loader))
    if "apply_draft_overrides(" in loader:
        m = re.search(
            r"^_DRAFT_VLLM_CONFIG_OVERRIDES\s*=\s*\((.*?)^\)", s.text("speculative"), re.S | re.M
        )
        s._mark(Anchor(s.paths["speculative"], "_DRAFT_VLLM_CONFIG_OVERRIDES"), m is not None)
        read |= set(re.findall(r'^\s*\(\s*"(\w+)"', m.group(1), re.M)) if m else set()
    v2_files = {p: x for p, x in _reader_files(s).items() if p.startswith("vllm/v1/worker/gpu/")}
    if any("speculative_config.enforce_eager" in x for x in v2_files.values()):
        read.add("enforce_eager")
    out |= {f"v2:{k}" for k in DRAFT_KEYS if k in read}
    return frozenset(out)


def _attention_backends(s: Source) -> frozenset[str]:
    """registry.py AttentionBackendEnum's members."""
    code = s.segment("backends", "AttentionBackendEnum")
    node = parse(textwrap.dedent(code)) if code else None
    cls = next((n for n in getattr(node, "body", ()) if isinstance(n, ast.ClassDef)), None)
    return frozenset(
        t.id
        for b in (cls.body if cls else ())
        if isinstance(b, ast.Assign)
        for t in b.targets
        if isinstance(t, ast.Name) and t.id.isupper()
    )


def _literal(s: Source, name: str) -> frozenset[str]:
    """The strings of field `name`'s Literal type: written in the field, or
    in the module-level alias the field names (none: no such field)."""
    f = _class_fields(s).get(name)
    if f is None:
        return frozenset()
    ann = f.annotation
    if isinstance(ann, ast.Name):
        alias = next(
            (
                n.value
                for n in parse(s.text("speculative")).body  # type: ignore[attr-defined]
                if isinstance(n, ast.Assign)
                and any(isinstance(x, ast.Name) and x.id == ann.id for x in n.targets)
            ),
            None,
        )
        ann = alias if alias is not None else ann
    return frozenset(
        c.value for c in ast.walk(ann) if isinstance(c, ast.Constant) and isinstance(c.value, str)
    )


def _reader_files(s: Source) -> dict[str, str]:
    """The release's files of READER_TREES (no anchor: a folder a release
    lacks holds no reader)."""
    return {p: x for p, x in s.files.items() if any(probes.matches(p, g) for g in READER_GLOBS)}


_DRAFT_USE_MLA = re.compile(r"^[^#\n]*\b\w*draft\w*\.use_mla\b", re.M)


def _draft_mla_readers(s: Source) -> frozenset[str]:
    """The files (under vllm/) that read a draft model config's use_mla; the
    GPU worker (always there) anchors the search."""
    s.text("worker")
    found = {p for p, x in _reader_files(s).items() if _DRAFT_USE_MLA.search(x)}
    return frozenset(p.removeprefix("vllm/") for p in found)


def _draft_mla_connectors(s: Source) -> frozenset[str]:
    """kv_connector/factory.py: the connectors registered with a module that
    is, or holds, a reader of the draft's use_mla."""
    modules = {
        "vllm." + r.removesuffix(".py").replace("/", ".") for r in s.fact("draft_mla_readers")
    }
    reg = re.findall(r'register_connector\(\s*"(\w+)",\s*"([\w.]+)"', s.text("kv_factory"))
    return frozenset(
        name for name, mod in reg if any(m == mod or m.startswith(mod + ".") for m in modules)
    )


PROBES: dict[str, Callable[[Source], Any]] = {
    "spec_fields": _spec_fields,
    "spec_extra": _spec_extra,
    "spec_flags": _spec_flags,
    "spec_dashed": _spec_dashed,
    "spec_applied": _spec_applied,
    "attention_backends": _attention_backends,
    "rejection_sample_methods": lambda s: _literal(s, "rejection_sample_method"),
    "draft_sample_methods": lambda s: _literal(s, "draft_sample_method"),
    "draft_mla_readers": _draft_mla_readers,
    "draft_mla_connectors": _draft_mla_connectors,
}
