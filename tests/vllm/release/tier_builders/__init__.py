"""What the inner suite's tests build and compare against (the tests
themselves are the ``test_*.py`` beside this folder, their shared helpers
helpers.py, their declared unpatched failures unpatched.py):

    doctor_pairs      EAGLE-3 drafter variants for `vpatch doctor`'s tier
                      tests, and doctor's verdicts on them
    mla_drafters      MLA EAGLE-3 drafters for the tiny DeepSeek-V3 target
    eagle3_reference  a float64 reference of vLLM's Llama EAGLE-3 drafter
    acceptance        what served speculative decoding must accept
    plain_generate    the served target without a drafter, in a process of
                      its own (``python -m tier_builders.plain_generate``)
    remote_code       what vLLM does with untrusted remote code, in a process
                      of its own (``python -m tier_builders.remote_code``)
    deepseek_v32_ranks
                      DeepSeek-V3.2's own decoder run by one tensor-parallel
                      rank, in a process of its own
                      (``python -m tier_builders.deepseek_v32_ranks``)

They run in the tier's venv, the inner suite's folder on the path.
"""
