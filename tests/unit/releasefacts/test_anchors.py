"""releasefacts/anchors.py: what a probe reads is recorded with whether the
release has it, and moved() finds where a scope or a file went (the probes
themselves: test_facts.py)."""

from __future__ import annotations

from vpatch.releasefacts import facts
from vpatch.releasefacts.anchors import Anchor, Source, moved


def source(files: dict[str, str]) -> Source:
    return Source(files, facts.FILES, facts.PROBES)


def test_every_file_and_scope_asked_is_recorded_with_whether_it_is_there():
    s = source({facts.FILES["v1"]: "class GPUModelRunner:\n    def run(self):\n        pass\n"})
    assert s.segment("v1", "GPUModelRunner.run").startswith("def run")
    assert s.segment("v1", "GPUModelRunner.gone") == ""
    assert s.text("vllm") == ""
    assert s.asked == {
        Anchor(facts.FILES["v1"]): True,
        Anchor(facts.FILES["v1"], "GPUModelRunner.run"): True,
        Anchor(facts.FILES["v1"], "GPUModelRunner.gone"): False,
        Anchor(facts.FILES["vllm"]): False,
    }


def test_either_file_is_one_anchor():
    s = source({facts.FILES["requirements"]: "transformers<5\n"})
    assert s.either("requirements", "metadata") == ("requirements", "transformers<5\n")
    assert s.asked == {Anchor(f"{facts.FILES['requirements']} | {facts.FILES['metadata']}"): True}


def test_a_gate_fact_counts_its_anchors_for_the_fact_that_asks():
    worker = facts.FILES["worker"]
    s = source({worker: f"class Worker:\n    {facts.V2_MODULE} x\n"})
    assert s.fact("runners") == {"v2"}
    assert Anchor(worker, "Worker") in s.asked


def test_a_moved_file_is_found_by_its_name():
    a = Anchor(facts.FILES["v1"])
    files = {"vllm/v1/worker/old/gpu_model_runner.py": "x = 1\n"}
    assert moved(a, files) == ["vllm/v1/worker/old/gpu_model_runner.py"]
    assert moved(Anchor(facts.FILES["v1"], "GPUModelRunner.gone"), files) == []


def test_a_moved_scope_is_found_where_it_is_defined():
    files = {"vllm/a.py": "def helper():\n    pass\n", "vllm/b.py": "helper()\n"}
    assert moved(Anchor("vllm/old.py", "Cls.helper"), files) == ["vllm/a.py defines helper"]
