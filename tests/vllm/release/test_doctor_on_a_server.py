"""`vpatch doctor --server` against a real `vllm serve`: vLLM's OpenAI server
(``python -m vllm.entrypoints.openai.api_server``, the server `vllm serve`
runs) started by the test on 127.0.0.1, on a free port, with the tier's CPU
workarounds and stand-ins loaded in its processes through vLLM's plugin
mechanism (release/ on PYTHONPATH: its ``vpatch_tier-0.dist-info`` declares
the general plugin ``cpu_workarounds:vllm_plugin``), and stopped by the
test with every process it started, whatever happens (a run the tier kills
takes it along: it stays in the run's process group).

The accepting pair (fixtures.py: deepseek_v3_accept and eagle3_accept, the
in-process served test's), greedy, the served prompts as one batch through
``/v1/completions``, REQUESTS times (enough drafts for doctor to judge:
judge.SAMPLE). Then `vpatch doctor --server URL --format json`, the
CLI a user runs:

* the right pair: the completions are the plain engine's tokens (lossless),
  doctor's figures (drafts, draft tokens, accepted, per position, the
  acceptance rate and length) are exactly the counters the float64
  reference predicts (acceptance.py, from the plain engine's tokens and
  hooked aux states, as test_served_spec_decode.py predicts them), and
  doctor flags nothing (every finding info);
* a pair broken the way a silent defect breaks it: the same drafter with its
  draft-to-target vocabulary map one id off (``d2t`` + 1: a drafter whose
  vocabulary map is another target's). It serves losslessly, at the
  acceptance the reference predicts for that drafter, which differs from
  the right pair's, and doctor flags position 0 far below a working pair,
  with its reason. (Layer ids one off do not break this pair: its target's
  residual stream barely moves, fixtures.py, so every layer's input is
  nearly the embedding the drafter reads; measured on 0.26.0, the same
  counters as the right pair.)

Unpatched, the server stops before it serves, or at its first request
(its engine meets layer 0's missing residual: the upstream TypeError, in
its log; 0.26.0 in the engine's profile run, 0.34.0 at the first request,
whose engine then dies and takes the server with it); doctor, asked then,
must say in one line that it cannot reach a serving engine, exit 3
(vpatch.errors.NetworkError), before the test fails with the server's
error, as declared (unpatched.LAYER0_PLUS_NONE_SERVER).

Runs only in a process of its own (VPATCH_VLLM_SERVED, the tier's
doctor_reads_a_served_pair check), [cpu] only: the server's processes are
out of the kernel-mode switch's reach. On a release run over another's
ops (0.34.0) the server needs VPATCH_SERVER_PATH, which the check sets
(vllm_tier.serving.server_path; by hand, print that function's answer).
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import psutil
import pytest
import unpatched
from helpers import (
    MAX_MODEL_LEN,
    NUM_SPECULATIVE_TOKENS,
    SERVED_DRAFTER,
    SERVED_FIXTURES,
    SERVED_MAX_SEQS,
    SERVED_MAX_TOKENS,
    SERVED_PROMPTS,
)
from support.cli import vpatch
from tier_builders import acceptance, plain_generate
from tier_builders.doctor_pairs import vpatch_python
from tier_builders.eagle3_reference import Eagle3Reference
from vpatch.errors import NetworkError
from vpatch.postflight import judge

TARGET = SERVED_FIXTURES["deepseek_v3"]


def doctor(*args: str):
    """`vpatch doctor ARGS` as a user runs it, under the project's python
    (this venv has not vpatch's dependencies), inheriting this environment."""
    return vpatch("doctor", *args, python=vpatch_python(), timeout=600)


FAILS = unpatched.LAYER0_PLUS_NONE_SERVER
# one kernel mode ([cpu]): the server's processes are out of the switch's reach
pytestmark = [
    pytest.mark.patch_effect(FAILS),
    pytest.mark.layer0_fix,
    pytest.mark.served,
    pytest.mark.one_mode,
]

# The served prompts' batch (SERVED_PROMPTS: 50 drafts on this pair) sent
# this many times, one after the other, so that doctor judges the figures:
# judge.SAMPLE drafts or more
REQUESTS = 2
# How long the server may take to serve (engine start, profile run; a V2
# run interprets every kernel), and a request
START = 900
REQUEST = 600
# linux/prctl.h
PR_SET_PDEATHSIG = 1
# doctor's exit code for a server it cannot reach (docs/doctor.md)
UNREACHABLE = NetworkError.exit_code


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _die_with_parent() -> None:
    """In the server's process before it runs: SIGKILL when this process
    ends, however it ends. The server stays in this run's process group,
    which the tier kills whole when a run overruns (vllm_tier.log), its
    engine core included."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG)")


class ServerStopped(RuntimeError):
    """The server's process ended before it served, or while it served."""


class Server:
    """vLLM's OpenAI server on 127.0.0.1 (the API server and the engine core
    it starts), its log in ``log``."""

    def __init__(self, drafter: Path, log: Path) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log
        spec = {"method": "eagle3", "model": str(drafter)}
        spec["num_speculative_tokens"] = NUM_SPECULATIVE_TOKENS
        # the in-process served engine's arguments (helpers.served_kwargs),
        # as a user gives them to `vllm serve`
        cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server"]
        cmd += ["--host", "127.0.0.1", "--port", str(self.port), "--model", self.model]
        cmd += ["--dtype", "float32", "--enforce-eager", "--seed", "0"]
        cmd += ["--max-model-len", str(MAX_MODEL_LEN), "--max-num-seqs", str(SERVED_MAX_SEQS)]
        cmd += ["--max-num-batched-tokens", str(MAX_MODEL_LEN), "--no-enable-prefix-caching"]
        cmd += ["--speculative-config", json.dumps(spec)]
        # this run's environment: release/ on PYTHONPATH (the plugin), the
        # tier's settings (vllm_tier.runenv), in a V2 run what cpu_v2_runner
        # put on PYTHONPATH when this process imported it, and first what
        # the server lacks in the release's venv (vllm_tier.serving)
        env = dict(os.environ)
        extra = env.get("VPATCH_SERVER_PATH")
        if extra:
            env["PYTHONPATH"] = os.pathsep.join([extra, env.get("PYTHONPATH", "")])
        with log.open("wb") as out:
            self.proc = subprocess.Popen(
                cmd,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                preexec_fn=_die_with_parent,
            )

    @property
    def model(self) -> str:
        return str(Path(os.environ["VPATCH_VLLM_FIXTURES"]) / TARGET)

    def wait(self) -> None:
        """Until the server answers /v1/models; ServerStopped when it ends first."""
        end = time.monotonic() + START
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise self._stopped("before it served")
            try:
                with urllib.request.urlopen(f"{self.url}/v1/models", timeout=5) as r:
                    if r.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(2)
        raise TimeoutError(f"the server did not serve in {START}s; its log: {self.log}")

    def error(self) -> str:
        """The errors its log says (each ``...Error: ...`` line once, in
        order: the engine's own, then the server's "initialization failed"),
        and the log's tail."""
        text = self.log.read_text(errors="replace")
        errors = dict.fromkeys(re.findall(r"^.*?(\w+(?:Error|Exception): .*)$", text, re.M))
        tail = "\n".join(text.splitlines()[-40:])
        return f"{' | '.join(errors) or 'no error in its log'}\n{tail}"

    def complete(self) -> list[list[int]]:
        """The served prompts as one greedy batch: each one's token ids."""
        body = {
            "model": self.model,
            "prompt": SERVED_PROMPTS,
            "max_tokens": SERVED_MAX_TOKENS,
            "temperature": 0.0,
            "ignore_eos": True,
            "return_token_ids": True,
        }
        req = urllib.request.Request(
            f"{self.url}/v1/completions",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(req, timeout=REQUEST) as r:
                out = json.loads(r.read())
        except (urllib.error.URLError, OSError) as e:
            try:  # a dead engine stops the server
                self.proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                raise AssertionError(f"the request failed ({e}), the server runs on") from None
            raise self._stopped("while it served", f" (the request: {e})") from None
        choices = sorted(out["choices"], key=lambda c: c["index"])
        return [c["token_ids"] for c in choices]

    def _stopped(self, when: str, more: str = "") -> ServerStopped:
        """The server's process ended: doctor, asked now, must say in one line
        that it cannot reach a serving engine (exit 3); then the error to
        raise, kept for the next test."""
        _unreachable(self.url)
        got = ServerStopped(f"the server stopped {when}: {self.error()}{more}")
        _STOPPED.append(got)
        return got

    def stop(self) -> None:
        """The server and every process it started (its engine core):
        SIGTERM (vLLM shuts its engine down), SIGKILL to what is left 30 s
        later."""
        try:
            tree = [psutil.Process(self.proc.pid)]
            tree += tree[0].children(recursive=True)
        except psutil.NoSuchProcess:
            return
        for p in tree:
            with contextlib.suppress(psutil.NoSuchProcess):
                p.terminate()
        _, alive = psutil.wait_procs(tree, timeout=30)
        for p in alive:
            with contextlib.suppress(psutil.NoSuchProcess):
                p.kill()
        psutil.wait_procs(alive, timeout=30)
        self.proc.wait()


# The first server of this process that stopped before it served (unpatched):
# every later one would stop the same way, so the next test fails with its error.
_STOPPED: list[ServerStopped] = []


@pytest.fixture
def serve(tmp_path):
    """Start a server of the target with ``drafter``, wait until it serves;
    stopped when the test ends."""
    started: list[Server] = []

    def start(drafter: Path) -> Server:
        if _STOPPED:
            raise _STOPPED[0]
        server = Server(drafter, tmp_path / f"server-{len(started)}.log")
        started.append(server)
        server.wait()
        return server

    yield start
    for server in started:
        server.stop()


def _unreachable(url: str) -> None:
    """doctor on a server that is not there: exit 3, one line that says so."""
    proc = doctor("--server", url)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == UNREACHABLE and len(lines) == 1, (
        f"doctor on {url}, whose server stopped: exit {proc.returncode}, {proc.stderr!r}"
    )
    assert f"cannot reach a serving engine at {url}" in lines[0], lines[0]


def _doctor(url: str) -> dict:
    """`vpatch doctor --server URL --format json`, with this process's python
    (the server's: its vLLM, patched or not, is what `vpatch check` reads)."""
    proc = doctor("--server", url, "--python", sys.executable, "--format", "json")
    assert proc.returncode in (0, 1), f"doctor exit {proc.returncode}: {proc.stderr}"
    return json.loads(proc.stdout)


@pytest.fixture(scope="module")
def plain(tmp_path_factory, manifest):
    """The plain engine's greedy tokens and hooked aux states
    (plain_generate.py, a process of its own, as test_served_spec_decode.py
    runs it)."""
    made: list[dict] = []

    def run() -> dict:
        if not made:
            out = tmp_path_factory.mktemp("plain") / "tokens.json"
            target = str(Path(os.environ["VPATCH_VLLM_FIXTURES"]) / TARGET)
            made.append(plain_generate.in_child(target, out, manifest["eagle3_layer0_ids"]))
        return made[0]

    return run


def _predicted(plain: dict, drafter: Path) -> dict[str, float]:
    """The counters the reference predicts for REQUESTS batches of the served
    prompts served with ``drafter``."""
    ref = Eagle3Reference(drafter, Path(os.environ["VPATCH_VLLM_FIXTURES"]) / TARGET)
    steps = acceptance.predict_all(ref, plain, NUM_SPECULATIVE_TOKENS, SERVED_MAX_TOKENS)
    return {k: REQUESTS * v for k, v in acceptance.counters(steps, NUM_SPECULATIVE_TOKENS).items()}


def _figures(want: dict[str, float]) -> dict:
    """doctor's figures (judge.Figures.to_json's keys) of these counters."""
    per = [int(want[f"{acceptance.PER_POS}[{i}]"]) for i in range(NUM_SPECULATIVE_TOKENS)]
    drafts = int(want["vllm:spec_decode_num_drafts"])
    tokens = int(want["vllm:spec_decode_num_draft_tokens"])
    accepted = int(want["vllm:spec_decode_num_accepted_tokens"])
    return {
        "drafts": drafts,
        "draft_tokens": tokens,
        "accepted": accepted,
        "accepted_per_position": per,
        "acceptance_rate": accepted / tokens,
        "mean_acceptance_length": 1 + accepted / drafts,
        "acceptance_per_position": [a / drafts for a in per],
    }


def _served(server: Server, plain: dict) -> dict:
    """REQUESTS batches, each lossless; then doctor's report of the server."""
    lossless = [t[:SERVED_MAX_TOKENS] for t in plain["tokens"]]
    for _ in range(REQUESTS):
        assert server.complete() == lossless, "EAGLE-3 changed the greedy output"
    # its text report too, in the run's log (docs/doctor.md shows one)
    print(doctor("--server", server.url, "--python", sys.executable).stdout)
    return _doctor(server.url)


def _since_start(report: dict) -> dict:
    [server] = report["servers"]
    [model] = server["figures"]
    return {k: model["since_start"][k] for k in _FIGURES}


_FIGURES = (
    "drafts",
    "draft_tokens",
    "accepted",
    "accepted_per_position",
    "acceptance_rate",
    "mean_acceptance_length",
    "acceptance_per_position",
)


def _broken_drafter(paths: dict, into: Path) -> Path:
    """The accepting drafter with its draft-to-target map one id off (each
    draft id's target id + 1)."""
    from safetensors.torch import load_file, save_file

    out = into / "eagle3_d2t_one_off"
    shutil.copytree(paths[SERVED_DRAFTER], out)
    weights = load_file(str(out / "model.safetensors"))
    weights["d2t"] = weights["d2t"] + 1
    save_file(weights, str(out / "model.safetensors"), metadata={"format": "pt"})
    return out


def test_doctor_gives_the_counters_the_reference_predicts(serve, plain, paths, record_property):
    """The right pair: lossless, doctor's figures are the reference's
    counters, and it flags nothing."""
    server = serve(Path(paths[SERVED_DRAFTER]))
    report = _served(server, plain())
    want = _predicted(plain(), Path(paths[SERVED_DRAFTER]))
    assert want["vllm:spec_decode_num_drafts"] >= judge.SAMPLE, want
    got = _since_start(report)
    assert got == _figures(want), f"doctor's figures {got}, the reference's {_figures(want)}"
    flagged = [f for f in report["findings"] if f["severity"] != "info"]
    assert report["ok"] and not flagged, f"doctor flags the right pair: {flagged}"
    record_property("doctor", json.dumps(got))


def test_doctor_flags_a_drafter_with_its_vocabulary_map_one_off(
    serve, plain, paths, tmp_path, record_property
):
    """The broken pair: lossless, at the acceptance the reference predicts
    for it (not the right pair's), and doctor flags position 0 with its
    reason."""
    broken = _broken_drafter(paths, tmp_path)
    server = serve(broken)
    report = _served(server, plain())
    want = _predicted(plain(), broken)
    right = _figures(_predicted(plain(), Path(paths[SERVED_DRAFTER])))
    got = _since_start(report)
    assert got == _figures(want), f"doctor's figures {got}, the reference's {_figures(want)}"
    assert got["acceptance_per_position"][0] < right["acceptance_per_position"][0], (got, right)
    found = {f["check"]: f for f in report["findings"]}
    p0 = found.get("position0", {})
    assert p0.get("severity") == "warning" and "far below a working pair" in p0["message"], (
        f"doctor does not flag position 0 of the broken pair: {report['findings']}"
    )
    record_property("doctor", json.dumps(got))
