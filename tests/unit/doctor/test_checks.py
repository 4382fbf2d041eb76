"""doctor's checks as a whole (vpatch.doctor.checks: diagnose, the rules it
picks, CHECKS): correct real-shaped pairs (tests/support/pairs.py: Kimi-K2.5,
Kimi-K2, DeepSeek-V3 targets; vLLM-format, speculators and MLA drafters with
header-only safetensors) are ok on every release, with the serve command
doctor prints. Each family of checks: tests/unit/doctor/checks/. The tier
(tests/vllm/release/test_doctor_verdicts.py) shows the same verdicts on real
vLLM."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import pairs as F
from support.doctor import PINS, check, errors, find, sev
from support.releases import first_where, newest, newest_patched, oldest, v2_by_default
from vpatch.doctor import checks as doctor
from vpatch.doctor import hub, serve
from vpatch.doctor.environment import Readiness, VllmEnv
from vpatch.errors import NewerRelease

# a release of each kind: the oldest; the series' EAGLE-3; upstream's; the V2 runner the
# default for DeepseekV2ForCausalLM, then for every target; the newest
KINDS = [
    oldest(),
    newest_patched(),
    first_where(lambda r: r.upstream_eagle3),
    first_where(lambda r: "DeepseekV2ForCausalLM" in r.v2_default),
    first_where(v2_by_default),
    newest(),
]


@pytest.mark.parametrize("version", KINDS)
@pytest.mark.parametrize(
    "target,fmt",
    [
        ("kimi_k25", "vllm"),
        ("kimi_k25", "speculators"),
        ("kimi_k2", "vllm"),
        ("deepseek_v3", "vllm"),
    ],
)
def test_correct_pair_is_ok_and_served_with_eagle3(tmp_path, target, fmt, version):
    r = check(tmp_path, version, target=target, fmt=fmt)
    assert r.ok, r.to_text()
    assert all(f.severity == "info" for f in r.findings), r.to_text()
    names = [f.check for f in r.findings]
    assert len(names) == len(set(names)) == len(doctor.CHECKS)  # one finding per check
    assert '"method": "eagle3"' in r.serve and "--tensor-parallel-size 8" in r.serve
    assert "--trust-remote-code" in r.serve and r.serve.startswith("vllm serve ")
    spec = json.loads(r.serve.split("--speculative-config ")[1].strip("'"))
    assert spec == {
        "method": "eagle3",
        "model": str(tmp_path / f"drafter-{fmt}"),
        "num_speculative_tokens": 3,
    }


def test_too_old_newer_and_unpinned_releases(tmp_path):
    too_old = check(tmp_path / "a", "0.14.1", False)
    assert errors(too_old) >= {"vllm"} and "is older than" in find(too_old, "vllm").message
    newest, last = PINS.rules.newest, PINS.versions()[-1]
    newer = ".".join([*last.split(".")[:2], str(int(last.split(".")[2]) + 1)])
    with pytest.raises(NewerRelease, match=rf"newer than vpatch knows \(it pins up to {last}\)"):
        check(tmp_path / "b", newer, None)
    # a post release the lock lacks: its release's code plus fixes, judged as it and said so
    r = check(tmp_path / "e", f"{newest}.post1", None)
    said = find(r, "vllm").message
    assert sev(r, "vllm") == "warning" and f"a post release of {newest}" in said, said
    # an unpinned release inside the covered span: the release below it
    between = next(
        c
        for v in PINS.versions()[:-1]
        if (c := f"{v.rsplit('.', 1)[0]}.{int(v.rsplit('.', 1)[1]) + 5}") not in PINS.releases
    )
    r = check(tmp_path / "d", between, None)
    assert sev(r, "vllm") == "warning" and "is not a pinned release" in find(r, "vllm").message
    r = check(tmp_path / "c", f"{newest_patched()}+cu129", True)
    assert r.ok and sev(r, "vllm") == "info"


def test_target_drafter_options_add_trust_remote_code_only_when_needed(tmp_path):
    env = VllmEnv("python3", "vllm", newest(), "/x")
    for target, needed in (("kimi_k25", True), ("deepseek_v3", False)):
        t, d = F.pair(tmp_path / target, target=target)
        s = serve.from_options(str(t), str(d), 8)
        r = doctor.diagnose(
            hub.resolve(str(t)), hub.resolve(str(d)), env, Readiness(True), s, {}, pins=PINS
        )
        assert ("--trust-remote-code" in r.serve) == needed and r.ok, r.to_text()


def test_every_check_is_in_the_docs_table(tmp_path):
    """docs/doctor.md's Checks table has one row per check of CHECKS, in the
    report's order (adding a check: CONTRIBUTING.md)."""
    doc = Path(__file__).resolve().parents[3] / "docs" / "doctor.md"
    table = doc.read_text().split("## Checks\n", 1)[1].split("\n## ", 1)[0]
    rows = [ln.split("`")[1] for ln in table.splitlines() if ln.startswith("| `")]
    assert rows == [f.check for f in check(tmp_path).findings]
