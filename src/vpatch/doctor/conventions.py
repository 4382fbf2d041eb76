"""The aux layer ids' two conventions.

vLLM's id k is the input of decoder layer k (0 = the embeddings, n = the
final norm's input). SGLang- and SpecForge-trained drafters often write the
output of layer k instead and mark it by starting at 1; SGLang tells them
apart by the first id (sgl-project/sglang PR #25454: an explicit list whose
first id is 1 is shifted by one, otherwise taken as written). doctor reads
them the same way, and says so."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from .pair import Pair

IDS_KEY = "eagle_aux_hidden_state_layer_ids"


@dataclass(frozen=True)
class Written:
    """One list of aux layer ids the drafter config writes."""

    key: str  # where: "eagle_aux_hidden_state_layer_ids" or "eagle_config.<key>"
    ids: list[Any]
    convention: str  # "vllm" (input of layer k) or "output" (output of layer k)
    why: str
    certain: bool

    @property
    def layers(self) -> list[Any]:
        """The ids in vLLM's terms (input of layer k)."""
        if self.convention == "output":
            return [
                i + 1 if isinstance(i, int) and not isinstance(i, bool) else i for i in self.ids
            ]
        return list(self.ids)


def read_convention(key: str, ids: list[Any], speculators: bool) -> Written:
    if speculators:
        return Written(
            key,
            ids,
            "vllm",
            "speculators format: trained for vLLM, id k = the input of layer k",
            True,
        )
    if ids and ids[0] == 1:
        return Written(
            key,
            ids,
            "output",
            "its first id is 1: SGLang and SpecForge mark ids of the output of layer k so, "
            "and SGLang shifts such a list by one, sgl-project/sglang#25454",
            False,
        )
    return Written(
        key,
        ids,
        "vllm",
        "its first id is not 1: vLLM and SGLang both take it as written, id k = the input "
        "of layer k",
        False,
    )


def written_ids(p: Pair) -> list[Written]:
    out = []
    if p.top_ids:
        out.append(read_convention(IDS_KEY, p.top_ids, p.drafter.speculators))
    if p.nested_ids:
        out.append(read_convention(f"eagle_config.{IDS_KEY}", p.nested_ids, False))
    v2 = p.eagle_config.get("layer_ids")
    if isinstance(v2, (list, tuple)) and v2:
        out.append(read_convention("eagle_config.layer_ids", list(v2), False))
    return out


def ints(ids: Iterable[Any]) -> list[int]:
    return sorted({i for i in ids if isinstance(i, int) and not isinstance(i, bool)})
