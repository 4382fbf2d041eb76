"""The docs generated from serving.toml (vpatch/serving.py): the README's
list of the families vLLM serves from its own vllm/models/ packages and
docs/doctor.md's table of what each release's serving file does with them
(maintain/docs.py places both, with the rest, between their markers)."""

from __future__ import annotations

from .. import lock
from ..doctor import behaviour


# The families vLLM serves from its own vllm/models/ packages, generated from
# serving.toml: docs/doctor.md carries families_markdown(), the README
# families_list(). A row is a run of consecutive releases alike.
def _short(path: str) -> str:
    return path.removeprefix("vllm/").removeprefix("model_executor/models/")


def _code_row(pins: lock.Lock, arch: str, v: str, platform: str) -> tuple[str, ...]:
    s = pins.serving.served(arch, v, platform)
    if s is None or not s.registered:
        return ("not registered",) + ("",) * 6
    if s.code is None:
        return (f"{_short(s.path)} (DeepSeek-V3's rules)",) + ("",) * 6
    c = s.code
    return (
        _short(s.path),
        "yes" if c.eagle3 else "refused",
        {"embedding": "the embedding", "typeerror": "TypeError", "dropped": "dropped"}[c.id0],
        "yes" if c.id_n else "dropped",
        "partial sums (no SP)" if c.partial_sum else "reduced",
        "relayed" if c.pp_relay else "not relayed",
        c.aux_env or "none",
    )


def _rocm(cuda: tuple[str, ...], rocm: tuple[str, ...]) -> str:
    """The ROCm column: "same", or ROCm's file and the facts that differ."""
    if rocm == cuda:
        return "same"
    if not rocm[1]:
        return rocm[0]
    diff = [
        f"{h} {b}" for h, a, b in zip(FAMILY_HEAD[3:9], cuda[1:], rocm[1:], strict=True) if a != b
    ]
    return f"{rocm[0]}: {', '.join(diff) if diff else 'the same facts'}"


FAMILY_HEAD = (
    "family",
    "releases",
    "serving file (CUDA)",
    "SupportsEagle3",
    "id 0",
    "id n",
    "aux states at TP > 1",
    "PP",
    "variable (default)",
    "ROCm",
)


def families_rows(pins: lock.Lock, upto: str | None = None) -> list[tuple[str, ...]]:
    out: list[tuple[str, ...]] = []
    for fam in pins.serving.families.values():
        arch = fam.architectures[0]
        prev: tuple[str, ...] | None = None
        first = last = ""
        for v in behaviour.known_releases(pins, upto):
            cuda = _code_row(pins, arch, v, "cuda")
            rocm = _code_row(pins, arch, v, "rocm")
            row = (*cuda, _rocm(cuda, rocm))
            if row == prev:
                last = v
                continue
            if prev is not None and prev[0] != "not registered":
                out.append((fam.name, first if first == last else f"{first}-{last}", *prev))
            first = last = v
            prev = row
        if prev is not None and prev[0] != "not registered":
            out.append((fam.name, first if first == last else f"{first}-{last}", *prev))
    return out


def families_markdown(pins: lock.Lock, last: str | None = None) -> str:
    rows = [FAMILY_HEAD, tuple("---" for _ in FAMILY_HEAD), *families_rows(pins, last)]
    return "\n".join("| " + " | ".join(r) + " |" for r in rows)


def families_serving(pins: lock.Lock) -> list[tuple[str, tuple[str, ...], list[str]]]:
    """(name, architectures, the releases that serve it with EAGLE-3 on
    CUDA) of each family, for the README's list (docs.py families_list)."""
    out = []
    known = behaviour.known_releases(pins)
    for fam in pins.serving.families.values():
        arch = fam.architectures[0]
        serves = []
        for v in known:
            s = pins.serving.served(arch, v, "cuda")
            if (
                s is not None
                and s.registered
                and (s.code.eagle3 if s.code is not None else pins.rules.at(v).upstream_eagle3)
            ):
                serves.append(v)
        out.append((fam.name, fam.architectures, serves))
    return out
