"""One run of the inner suite (tests/vllm/release) for a release and an
install, in its own process in the release's venv, and its junit report read
back; comparing an unpatched and a patched run."""

from __future__ import annotations

import os
import subprocess
import threading
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

from . import TIER, targets, venvs
from .log import say, spawn, wait
from .releases import inner_select
from .runenv import runtime_env

INNER = TIER / "release"
INNER_TIMEOUT = int(os.environ.get("VPATCH_VLLM_INNER_TIMEOUT", "900"))

# Inner processes at once: one per core. An inner run is mostly one busy thread
# (vLLM on CPU with one torch thread, and its imports), so two fill this 2-core
# machine. Each holds a slot while it runs; so does the command the tier
# program runs beside its own (tier.py run -- CMD), while it runs.
JOBS = int(os.environ.get("VPATCH_VLLM_JOBS", "2"))
SLOTS = threading.BoundedSemaphore(JOBS)


@dataclass
class Case:
    id: str
    outcome: str  # passed | failed | error | skipped | xfailed
    message: str = ""
    props: dict = field(default_factory=dict)

    @property
    def patch_effect(self) -> bool:
        return self.props.get("patch_effect") == "1"

    @property
    def gpu(self) -> bool:
        return self.props.get("gpu") == "1"

    @property
    def compiled(self) -> bool:
        """A served test of a compiled engine: it runs in [cpu] only (vLLM calls
        the compiled graph without Dynamo's guards: the CUDA contract cannot be
        switched per call)."""
        return self.props.get("compiled") == "1"

    @property
    def one_mode(self) -> bool:
        """A test that runs in [cpu] only: a compiled engine's, or one marked
        one_mode (its check does not depend on the CUDA contract)."""
        return self.compiled or self.props.get("one_mode") == "1"

    @property
    def one_install(self) -> bool:
        """A test of what no patch touches: run on the patched install only."""
        return self.props.get("one_install") == "1"

    @property
    def kernels(self) -> str | None:
        """ "cpu" or "cuda" (the CUDA contract) for a test run in both modes."""
        return self.props.get("kernels")


@dataclass
class InnerRun:
    release: str
    variant: str
    returncode: int | None
    seconds: float
    junit: Path
    log: Path
    cases: dict[str, Case]
    timeout: int = INNER_TIMEOUT

    def tail(self, n: int = 60) -> str:
        try:
            lines = self.log.read_text(errors="replace").splitlines()
        except OSError:
            return "(no log)"
        return "\n".join(lines[-n:])

    @property
    def crashed(self) -> str | None:
        """Why the run as a whole is unusable, or None."""
        if self.returncode is None:
            return f"timed out after {self.timeout}s"
        if self.returncode not in (0, 1):
            return f"pytest exited {self.returncode} (not a test failure)"
        if not self.cases:
            return "no test results in the junit report"
        return None


def parse_junit(path: Path) -> dict[str, Case]:
    cases: dict[str, Case] = {}
    if not path.is_file():
        return cases
    root = ET.parse(path).getroot()
    for tc in root.iter("testcase"):
        classname = tc.get("classname", "")
        mod = classname.rsplit(".", 1)[-1] if classname else ""
        cid = f"{mod}::{tc.get('name')}" if mod else tc.get("name", "?")
        outcome, message = "passed", ""
        for tag in ("failure", "error", "skipped"):
            el = tc.find(tag)
            if el is not None:
                outcome = {"failure": "failed"}.get(tag, tag)
                if tag == "skipped" and el.get("type") == "pytest.xfail":
                    outcome = "xfailed"  # failed as its marker declares
                message = (el.get("message") or "").strip().splitlines()[0:1]
                message = message[0][:200] if message else ""
                break
        props = {p.get("name"): p.get("value") for p in tc.iter("property")}
        cases[cid] = Case(cid, outcome, message, props)
    return cases


def run_inner(
    release: str,
    variant: str,
    out_dir: Path,
    *,
    fixtures: Path,
    target: Path | None = None,
    extra_env: dict | None = None,
    compiled: bool = False,
    pytest_args: tuple[str, ...] = (),
    tests: tuple[str, ...] = (str(INNER),),
    rootdir: Path = INNER,
    inifile: Path | None = INNER / "pytest.ini",
    confcutdir: Path | None = INNER,
    name: str | None = None,
    timeout: int = INNER_TIMEOUT,
    select: tuple[str, ...] | None = None,
) -> InnerRun:
    """One pytest process in the release's venv with its install first on
    PYTHONPATH: ``variant`` (unpatched | patched) names it, ``target`` (default:
    the release's unpatched or patched install) is what runs; ``select`` the
    tests of the whole inner suite (default: inner_select)."""
    if target is None:
        target = targets.target(release, variant == "patched")
    py = venvs.ensure(release)
    name = name or variant
    out_dir.mkdir(parents=True, exist_ok=True)
    junit = out_dir / f"{name}.xml"
    log = out_dir / f"{name}.log"
    junit.unlink(missing_ok=True)
    env = runtime_env(target, fixtures, release, compiled=compiled)
    env["VPATCH_VLLM_VARIANT"] = variant
    env["VPATCH_VLLM_RELEASE"] = release
    env.update(extra_env or {})
    cmd = [
        str(py),
        "-m",
        "pytest",
        "--rootdir",
        str(rootdir),
        f"--junitxml={junit}",
        "-o",
        "junit_family=legacy",
        "-o",
        "faulthandler_timeout=300",
    ]
    if inifile is not None:
        cmd += ["-c", str(inifile)]
    if confcutdir is not None:
        cmd += ["--confcutdir", str(confcutdir)]
    if tests == (str(INNER),):
        cmd += inner_select(release) if select is None else select
    cmd += [*pytest_args, *tests]
    with SLOTS, open(log, "w") as fh:
        t0 = time.monotonic()
        say(f"run {release} {out_dir.name}/{name} started")
        fh.write("$ " + " ".join(cmd) + "\n")
        fh.flush()
        proc = spawn(cmd, env=env, cwd=str(rootdir), stdout=fh, stderr=subprocess.STDOUT)
        rc = wait(proc, timeout)
    seconds = time.monotonic() - t0
    # with the start line, the program's log is the timeline of its runs
    say(f"run {release} {out_dir.name}/{name} exit {rc} in {seconds:.0f}s")
    return InnerRun(release, variant, rc, seconds, junit, log, parse_junit(junit), timeout)


def _without_mode(case: Case) -> str:
    """The test id without its kernel mode: `t[far-cuda]` -> `t[far]`."""
    name, _, params = case.id.partition("[")
    if not params:
        return name
    rest = [p for p in params.removesuffix("]").split("-") if p != case.kernels]
    return f"{name}[{'-'.join(rest)}]" if rest else name


def compare(unpatched: InnerRun, patched: InnerRun) -> tuple[list[str], list[str]]:
    """(table lines, violations) for a release's two runs.

    Unpatched, every patch_effect test is xfailed: the inner conftest made it
    a strict xfail of the failure its marker declares (release/unpatched.py),
    so it failed exactly so; patched, it passed. Every other test passed on
    both (gpu tests may be skipped), but a one_install test: skipped
    unpatched, passed patched. Each patch_effect test ran in both
    kernel modes (a compiled engine's, or a one_mode test's: once)."""
    lines, bad = [], []
    for run in (unpatched, patched):
        why = run.crashed
        if why:
            bad.append(
                f"{run.variant} run unusable: {why}\n--- {run.log} (tail) ---\n" + run.tail()
            )
        modes: dict[str, set[str]] = {}
        for c in run.cases.values():
            if c.patch_effect and not c.one_mode:
                modes.setdefault(_without_mode(c), set()).add(c.kernels or "none")
        for base, seen in sorted(modes.items()):
            if seen != {"cpu", "cuda"}:
                bad.append(f"{run.variant}: {base} ran in modes {sorted(seen)}, not cpu and cuda")
    for cid in sorted(set(unpatched.cases) | set(patched.cases)):
        u, p = unpatched.cases.get(cid), patched.cases.get(cid)
        uo = u.outcome if u else "missing"
        po = p.outcome if p else "missing"
        if (u and u.patch_effect) or (p and p.patch_effect):
            kind, want = "patch-effect", (("xfailed",), ("passed",))
        elif (u and u.one_install) or (p and p.one_install):
            kind, want = "one-install", (("skipped",), ("passed",))
        elif (u and u.gpu) or (p and p.gpu):
            kind, want = "gpu", (("passed", "skipped"), ("passed", "skipped"))
        else:
            kind, want = "both", (("passed",), ("passed",))
        ok = uo in want[0] and po in want[1]
        mark = "ok " if ok else "BAD"
        lines.append(f"  {mark} {kind:12s} unpatched={uo:7s} patched={po:7s} {cid}")
        if not ok:
            expect = f"{'|'.join(want[0])} -> {'|'.join(want[1])}"
            bad.append(
                f"{cid}: expected {expect}, got unpatched={uo} patched={po}"
                + _said(u, "unpatched")
                + _said(p, "patched")
            )
    return lines, bad


def _said(case: Case | None, variant: str) -> str:
    """What a case that did not pass said; unpatched, also the failure its
    marker declares."""
    if case is None or case.outcome in ("passed", "xfailed"):
        return ""
    out = f"; {variant}: {case.message}" if case.message else ""
    declared = case.props.get("unpatched")
    return out + (f" (declared: {declared})" if declared else "")
