"""vLLM's OpenAI server (``vllm serve``, a process group of its own) and
`vpatch doctor --server` reading it."""

from __future__ import annotations

from pathlib import Path

from .. import releases, runner, serving
from ..registry import VARIANTS, Check, Job, Run, Verdict, check, run
from ..results import Results
from ..runner import INNER, INNER_TIMEOUT
from .served import server_defaults


@check
class DoctorReadsAServedPair(Check):
    """`vpatch doctor --server` on vLLM's OpenAI server, started as a process
    group of its own on 127.0.0.1 with the accepting pair
    (release/test_doctor_on_a_server.py, the tier's stand-ins loaded as a
    vLLM plugin): patched, the completions are lossless, doctor's figures
    are the counters the reference predicts and it flags nothing, and a
    drafter with its vocabulary map one off is flagged at position 0;
    unpatched, the server stops before it serves, doctor says in one line
    that it cannot reach a serving engine (exit 3), and each test fails as
    it declares. In the default set it replaces served_speculative_decoding
    on its V1 release."""

    name = "doctor_reads_a_served_pair"
    summary = "`release/test_doctor_on_a_server.py`: `vllm serve` and `vpatch doctor --server`"
    tests = "test_doctor_on_a_server.py"

    def applies(self, release: str) -> bool:
        # the server's engine serves natively, on whichever runner the release has
        return releases.serves_eagle3_natively(release)

    def releases(self, selected: list[str]) -> list[str]:
        got = super().releases(selected)
        return (
            [r for r in got if r in server_defaults()]
            if releases.default_selected(selected)
            else got
        )

    def why_none(self, selected: list[str]) -> str:
        return "no selected release where vLLM's CPU runner serves EAGLE-3 by itself"

    def build(self, release: str) -> Path | None:
        """Both installs, and what the server lacks in the release's venv."""
        super().build(release)
        return serving.server_path(release)

    def runs(self, job: Job) -> list[Run]:
        # [cpu] only: the server's processes are out of the kernel-mode switch
        env = {"VPATCH_VLLM_SERVED": "eager", "VPATCH_CUDA_CONTRACT": "0"}
        if job.made is not None:
            env["VPATCH_SERVER_PATH"] = str(job.made)
        return [
            run(
                v,
                tests=(str(INNER / self.tests),),
                pytest_args=("--tb=short",),
                extra_env=env,
                timeout=INNER_TIMEOUT * 2,
            )
            for v in VARIANTS
        ]

    def verdict(self, res: Results, release: str) -> Verdict:
        u = res.run(self.name, release, "unpatched")
        p = res.run(self.name, release, "patched")
        lines, bad = runner.compare(u, p)
        head = (
            f"vLLM {release} doctor --server on vllm serve "
            f"(unpatched/patched run: {u.seconds:.0f}s/{p.seconds:.0f}s)"
        )
        return Verdict(head, lines, bad)
