"""The aux ids' two conventions: a list whose first id is 1 is read as the
output of layer k (SGLang/SpecForge), shifted by one into vLLM's terms;
anything else, and every speculators list, as vLLM's input of layer k."""

from __future__ import annotations

import pytest
from vpatch.doctor.conventions import ints, read_convention


def test_first_id_one_is_the_output_convention():
    w = read_convention("eagle_config.eagle_aux_hidden_state_layer_ids", [1, 29, 57], False)
    assert w.convention == "output" and not w.certain
    assert w.layers == [2, 30, 58]  # SpecForge's DeepSeek-V3 drafter, in vLLM's terms


@pytest.mark.parametrize("ids", [[2, 30, 58], [0, 4, 7], [3, 1]])
def test_any_other_list_is_taken_as_written(ids):
    w = read_convention("eagle_aux_hidden_state_layer_ids", ids, False)
    assert w.convention == "vllm" and w.layers == ids


def test_speculators_lists_are_vllms_and_certain():
    w = read_convention("eagle_aux_hidden_state_layer_ids", [1, 29, 57], True)
    assert w.convention == "vllm" and w.certain and w.layers == [1, 29, 57]


def test_non_integers_are_kept_as_they_are():
    w = read_convention("k", [1, "x", True], False)
    assert w.layers == [2, "x", True]
    assert ints(w.layers) == [2]
