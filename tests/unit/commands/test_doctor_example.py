"""`vpatch doctor` on the public Kimi-K2.6 command docs/doctor.md shows
("A published Kimi-K2.6 command"): the docs hold this run's output, so it
cannot drift from what doctor says."""

from __future__ import annotations

import shlex
from pathlib import Path

from support import pairs as F
from support.releases import having
from vpatch import lock
from vpatch.commands import doctor as D

ROOT = Path(__file__).resolve().parents[3]
# the release the example is checked against: the newest rules', with the
# facts it shows (the served length lowered, a kimi_k2 drafter not MLA to
# its config)
RELEASE = having("0.34.0", draft_caps_max_model_len={"v2"}, kimi_k2_drafter_not_mla=True)
EXAMPLE = "<!-- held by tests/unit/commands/test_doctor_example.py: the Kimi-K2.6 example -->"
EXAMPLE_END = "<!-- end of the Kimi-K2.6 example -->"


def test_the_published_kimi_k26_command_in_the_docs_is_doctors_output(tmp_path):
    """docs/doctor.md shows the public Kimi-K2.6 command (support.pairs
    KIMI_K26_COMMAND) checked by `vpatch doctor --vllm R` on the newest
    release, with lightseekorg's MLA drafter's and Kimi-K2.6's shapes read
    from folders named as their hub ids: the block must be this run's output,
    word for word, or the test prints the one to paste."""
    release = RELEASE
    t, d = F.pair(tmp_path, target="kimi_k26", fmt="lightseekorg_mla")
    command = F.KIMI_K26_COMMAND.replace(F.KIMI_K26_DRAFTER, str(d))
    command = command.replace("moonshotai/Kimi-K2.6", str(t))
    req = D.Request(command=tuple(shlex.split(command)), vllm=release)
    report = D.doctor(req, pins=lock.load())
    text = (
        report.to_text().replace(str(d), F.KIMI_K26_DRAFTER).replace(str(t), "moonshotai/Kimi-K2.6")
    )
    shown = "\n".join(
        [
            "```",
            f"$ vpatch doctor --vllm {release} -- {F.KIMI_K26_COMMAND}",
            text.rstrip(),
            "```",
        ]
    )
    doc = (ROOT / "docs" / "doctor.md").read_text()
    held = doc.split(EXAMPLE, 1)[1].split(EXAMPLE_END, 1)[0].strip()
    assert held == shown, f"docs/doctor.md's Kimi-K2.6 example is stale; it is now:\n{shown}"
    # what the example is there to show
    assert report.ok and {f.check for f in report.findings if f.severity == "warning"} >= {
        "mla_detection",
        "max_model_len",
    }
