"""The inner suite: runs INSIDE the tier's venv with one vLLM release (patched or
not) first on PYTHONPATH, one process per release x variant (the tier
program, tests/vllm/tier.py, runs it; vllm_tier.verdicts compares the two).

Run by hand::

    eval "$(python tests/vllm/tier.py prepare --release 0.16.0 --patched --print-env)"
    vpy -m pytest -c tests/vllm/release/pytest.ini tests/vllm/release

With ``VPATCH_CUDA_CONTRACT=1`` it runs under the CUDA contract
(cuda_contract.py).

Every test marked ``patch_effect`` must FAIL on the unpatched release, with
the failure its marker names (unpatched.py), and PASS on the patched one;
every other test must pass on both. On the unpatched install
(``VPATCH_VLLM_VARIANT=unpatched``) each patch-effect test is a strict xfail
of that failure, so the run passes only if each fails as declared. The marker
is copied into the junit report (property ``patch_effect``) for the outer
runner.

One LLM (the tiny DeepSeek-V3) and one Kimi-K2.5 model are made per process
and shared by all tests (session fixtures).
"""

from __future__ import annotations

import json
import os
import sys
from contextlib import contextmanager
from pathlib import Path
from unittest import mock

import pytest
import unpatched
from helpers import FIXTURES, Capture, engine_args, engine_kwargs, in_process, vllm_release

# The CUDA contract (cuda_contract.py): vLLM's CPU ops write into their inputs
# where the CUDA kernels do. VPATCH_CUDA_CONTRACT=1: the whole session under it;
# =0: not installed at all; unset (the tier): installed switched off, and every
# aux and patch-effect test runs once per mode, [cpu] then [cuda]. Either way
# vLLM is patched in pytest_configure, before the session's model is built.
CONTRACT = os.environ.get("VPATCH_CUDA_CONTRACT", "")
# CPU-only vLLM bugs, worked around (cpu_workarounds.py): the rotary kernel
# mixes up tokens and heads for DeepSeek's 3-D q_pe view (cpu_rotary.py),
# 0.20.0-0.24.0 and 0.27.x stop the tiny target's MoE (cpu_moe.py), and
# 0.31.0+ stop an engine that has numba imported (cpu_kernel_scan.py). And
# what vLLM's CPU runner lacks to serve EAGLE-3, stood in for
# (cpu_spec_decode.py) on the releases stand_ins.py names.
pytest_plugins = ["tier_plugins.inspect_in_process", "tier_plugins.cpu_workarounds"] + (
    ["tier_plugins.cuda_contract"] if CONTRACT == "1" else []
)
MODES = ("cpu", "cuda") if CONTRACT not in ("0", "1") else ()

# The served tests make engines of their own: they run only in a process of
# their own (VPATCH_VLLM_SERVED, see test_served_spec_decode.py); a torn-down
# engine takes vLLM's parallel groups with it, which the session's llm needs.
SERVED = [
    "test_served_spec_decode.py",
    "test_doctor_served_layers.py",
    "test_served_mla_drafters.py",
    "test_doctor_on_a_server.py",
    "test_served_deepseek_v4.py",
]
collect_ignore = [] if os.environ.get("VPATCH_VLLM_SERVED") else SERVED
# A series cut short: a process of its own per cut, on that cut's install
# (VPATCH_VLLM_CUT, see test_series_cut_short.py).
if not os.environ.get("VPATCH_VLLM_CUT"):
    collect_ignore.append("test_series_cut_short.py")
# DeepSeek-V3.2's decoder at TP 2 makes the run's process a rank and starts
# another: a check of its own runs it (VPATCH_VLLM_RANKS, see
# test_deepseek_v32_aux_tp.py).
if not os.environ.get("VPATCH_VLLM_RANKS"):
    collect_ignore.append("test_deepseek_v32_aux_tp.py")


def patch_markers() -> dict[str, str]:
    """{marker: its description} of every marker patches.toml gives a patch's
    tests (vpatch from src/, pytest.ini's pythonpath: the tier's venvs do not
    install it)."""
    from vpatch import lock

    pins = lock.load()
    ps, versions = pins.patchset, pins.versions()
    out = {}
    for marker, slugs in ps.markers().items():
        served = []
        for slug in slugs:
            got = ps.serving(slug, versions)
            served.append(f"{slug} ({got[0]}-{got[-1]})" if got else slug)
        out[marker] = "patch-effect tests of " + ", ".join(served)
    return out


def pytest_configure(config):
    for marker, about in patch_markers().items():
        config.addinivalue_line("markers", f"{marker}: {about}")
    if not os.environ.get("VPATCH_VLLM_FIXTURES"):
        pytest.exit(
            "VPATCH_VLLM_FIXTURES is not set: run this suite through tests/vllm/tier.py "
            'or `eval "$(python tests/vllm/tier.py prepare --release X --print-env)"`',
            returncode=4,
        )
    if MODES:
        from tier_plugins import cuda_contract

        cuda_contract.install(on=False)


def pytest_generate_tests(metafunc):
    """Aux and patch-effect tests run once per kernel mode (see MODES), but
    a test marked one_mode."""
    node = metafunc.definition
    if node.get_closest_marker("one_mode"):
        return
    if MODES and (node.get_closest_marker("patch_effect") or node.get_closest_marker("kernels")):
        metafunc.parametrize("kernels", MODES, indirect=True)


@pytest.fixture(autouse=True)
def kernels(request):
    """The kernel mode of this test: "cuda" runs it under the CUDA contract.
    Autouse, so that a parametrized mode is always set up around the test."""
    from tier_plugins import cuda_contract

    mode = getattr(request, "param", None)
    if mode is None:  # not parametrized: the session's mode
        yield "cuda" if cuda_contract.enabled() else "cpu"
        return
    with cuda_contract.emulating(mode == "cuda"):
        yield mode


def pytest_collection_modifyitems(config, items):
    """Copy the markers the outer runner needs into the junit report (as
    properties of each testcase, also when a test errors in setup); on the
    unpatched install, make each patch-effect test the strict xfail of the
    failure its marker names (unpatched.py), and skip each one_install test
    (what it checks is the same on both installs: one run is enough)."""
    release = vllm_release()
    unpatched_run = os.environ.get("VPATCH_VLLM_VARIANT") == "unpatched"
    for item in items:
        for name in ("patch_effect", "gpu", "served", "compiled", "one_mode", "one_install"):
            if item.get_closest_marker(name) is not None:
                item.user_properties.append((name, "1"))
        if unpatched_run and item.get_closest_marker("one_install") is not None:
            item.add_marker(pytest.mark.skip(reason="one_install: runs on the patched install"))
        callspec = getattr(item, "callspec", None)
        if callspec is not None and "kernels" in callspec.params:
            item.user_properties.append(("kernels", callspec.params["kernels"]))
        effect = item.get_closest_marker("patch_effect")
        if effect is not None and unpatched_run:
            xfail = unpatched.xfail(effect.args[0] if effect.args else (), release)
            if xfail is None:
                item.add_marker(pytest.mark.usefixtures("_undeclared_unpatched_failure"))
            else:
                item.add_marker(xfail)
                item.user_properties.append(("unpatched", xfail.kwargs["reason"]))


@pytest.fixture
def _undeclared_unpatched_failure():
    release = vllm_release()
    pytest.fail(
        f"this patch-effect test names no unpatched failure for vLLM {release}: "
        "give its marker one from unpatched.py whose span covers the release",
        pytrace=False,
    )


@pytest.fixture(scope="session")
def manifest() -> dict:
    return json.loads((FIXTURES / "manifest.json").read_text())


@pytest.fixture(scope="session")
def paths() -> dict:
    names = (
        "deepseek_v2",
        "deepseek_v3",
        "deepseek_v3_accept",
        "kimi_k2",
        "kimi_k25",
        "eagle3",
        "eagle3_layer0",
        "eagle3_accept",
        "deepseek_v4",
        "eagle3_v4",
    )
    return {name: str(FIXTURES / name) for name in names}


@pytest.fixture(scope="session")
def patched() -> bool:
    """Only informative (the tests do not branch on it)."""
    return os.environ.get("VPATCH_VLLM_VARIANT") == "patched"


# ------------------------------------------------------------------ the target model


@pytest.fixture(scope="session")
def llm(paths):
    """The tiny DeepSeek-V3 under vllm.LLM, in this process
    (VLLM_ENABLE_V1_MULTIPROCESSING=0), so apply_model returns the model."""
    in_process()
    from vllm import LLM

    return LLM(model=paths["deepseek_v3"], **engine_kwargs())


@pytest.fixture(scope="session")
def model(llm):
    m = llm.apply_model(lambda m: m)[0]
    assert type(m).__name__ == "DeepseekV3ForCausalLM", type(m)
    return m


@pytest.fixture(scope="session")
def vllm_config(llm):
    return llm.llm_engine.vllm_config


@pytest.fixture
def aux_reset(model):
    """Leave the shared model with no aux layers after a test that sets some."""
    yield
    if hasattr(model, "set_aux_hidden_state_layers"):
        model.set_aux_hidden_state_layers(())


@pytest.fixture
def capture(model):
    return Capture(model)


# ------------------------------------------------------------------ Kimi-K2.5


@pytest.fixture(scope="session")
def kimi_config(llm, paths):
    """A VllmConfig for the tiny Kimi-K2.5 (dummy weights).  Depends on `llm`
    so that vLLM's distributed state exists before any model is built."""
    return engine_args(paths["kimi_k25"], load_format="dummy").create_engine_config()


@contextmanager
def _cpu_current_device():
    """vLLM 0.15.x's Kimi-K2.5 places its vision tower on
    torch.cuda.current_device() unconditionally; without CUDA, answer "cpu"
    while the model is built (later releases ask the platform)."""
    import torch

    if torch.cuda.is_available():
        yield
        return
    with mock.patch.object(torch.cuda, "current_device", lambda: torch.device("cpu")):
        yield


@pytest.fixture(scope="session")
def kimi_model(kimi_config):
    from vllm.config import set_current_vllm_config
    from vllm.model_executor.model_loader import get_model

    with set_current_vllm_config(kimi_config), _cpu_current_device():
        m = get_model(vllm_config=kimi_config)
    assert type(m).__name__ == "KimiK25ForConditionalGeneration", type(m)
    return m


def pytest_report_header(config):
    try:
        import vllm

        where = Path(vllm.__file__).parent.parent
        return [
            f"vllm {vllm.__version__} from {where} "
            f"({os.environ.get('VPATCH_VLLM_VARIANT', '?')}), python {sys.version.split()[0]}"
        ]
    except Exception as e:  # pragma: no cover - shown in the header only
        return [f"vllm: import failed: {e!r}"]
