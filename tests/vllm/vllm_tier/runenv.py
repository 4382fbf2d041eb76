"""The environment of one inner run."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from . import TIER, cache, releases, venvs

# A run of a release without the V1 runner (cpu_v2_runner reads the first)
ONLY_V2_ENV = {"VPATCH_VLLM_ONLY_V2": "1", "TRITON_INTERPRET": "1"}


def runtime_env(
    target: Path,
    fixtures: Path | None = None,
    release: str | None = None,
    threads: int | None = None,
    compiled: bool = False,
) -> dict[str, str]:
    """The install ``target`` first on PYTHONPATH (then the dependency overlay
    of ``release``, then the inner suite's folder, so that ``-p tier_plugins.cuda_contract``
    loads anywhere), the libraries ``release`` must have preloaded, and the
    settings the tiny model needs on CPU."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env.pop("PYTHONPATH", None)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    overlay = venvs.overlay(release) if release else None
    path = [str(target), *([str(overlay)] if overlay else []), str(TIER / "release")]
    preload = venvs.preload(release) if release else []
    if preload:
        env["LD_PRELOAD"] = os.pathsep.join([*preload, *filter(None, [env.get("LD_PRELOAD")])])
    env.update(
        PYTHONPATH=os.pathsep.join(path),
        VPATCH_VLLM_TARGET=str(target),
        VLLM_TARGET_DEVICE="cpu",
        VLLM_MLA_DISABLE="1",
        VLLM_CPU_KVCACHE_SPACE="1",
        VLLM_ENABLE_V1_MULTIPROCESSING="0",
        VLLM_NO_USAGE_STATS="1",
        DO_NOT_TRACK="1",
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        TOKENIZERS_PARALLELISM="false",
        # An eager run runs eager all through: vLLM torch.compiles a few
        # helpers even under enforce_eager (the sampler's logprob ranks,
        # top-k/top-p), and compiling them cost 25 s (0.17.0) to 55 s (0.26.0,
        # in the engine's warmup) a process, warm inductor cache or not.
        # A compiled run (``compiled``) keeps Dynamo.
        TORCHDYNAMO_DISABLE="0" if compiled else "1",
        # Bytecode of whatever a run imports goes to one tree of our own,
        # written once and read by every later run: nothing is written into
        # the venvs, the installs or the repository, and nothing is compiled
        # that no run imports (a cold venv or install is not byte-compiled).
        PYTHONPYCACHEPREFIX=str(cache.root() / "pycache"),
        VPATCH_INNER="1",
        # the project's python (vpatch and its dependencies): inner tests that
        # drive the vpatch CLI as a user would (doctor, check) run it
        VPATCH_PYTHON=sys.executable,
        # gloo binds to this address: keep every socket on the loopback.
        VLLM_HOST_IP="127.0.0.1",
        # vLLM's and Hugging Face's caches inside ours (model-info cache, the
        # Kimi fixture's remote-code processor module).
        VLLM_CACHE_ROOT=str(cache.root() / "vllm-cache"),
        HF_HOME=str(cache.root() / "hf-home"),
    )
    if release and not releases.has_v1_runner(release):
        # no V1 runner (0.34.0): every engine of the run, the plain one
        # included, is the V2 runner's, which vLLM's CPU platform starts on
        # x86 only with Triton: the run is a V2 run (release/tier_plugins/cpu_v2_runner.py:
        # the stand-in Triton backend, every kernel of the runner by
        # Triton's interpreter), with VLLM_USE_V2_MODEL_RUNNER left as its
        # users leave it, unset
        env.update(ONLY_V2_ENV)
    if release and releases.triton_interpreted(release):
        # the spec-decode Triton kernels run by Triton's interpreter
        # (release/tier_plugins/cpu_spec_decode.py); vLLM still sees no GPU driver and
        # leaves Triton off everywhere else
        env["TRITON_INTERPRET"] = "1"
    if threads:
        env.update(OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    if fixtures is not None:
        env["VPATCH_VLLM_FIXTURES"] = str(fixtures)
    return env
