"""Greedy tokens of the served target without a drafter, eager, TP 1, in a
process of its own (one engine per process): the reference the served
speculative tests compare with, eager and compiled alike. Runs in a tier run's
environment (release/ on PYTHONPATH), with Dynamo off (TORCHDYNAMO_DISABLE=1,
as every eager tier run)::

    python plain_generate.py --target DIR --out tokens.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--target", required=True)
    ap.add_argument("--out", required=True, type=Path)
    args = ap.parse_args(argv)

    import cpu_workarounds
    from helpers import (
        SERVED_MAX_TOKENS,
        SERVED_PROMPTS,
        generate_tokens,
        served_kwargs,
        served_target,
    )

    cpu_workarounds.install()  # the same CPU paths as the served engine's process
    from vllm import LLM

    # at TP 1 whatever the served engine's: the reference of every run
    llm = LLM(model=args.target, **served_kwargs(compiled=False, target=served_target()))
    tokens = generate_tokens(llm, SERVED_PROMPTS, SERVED_MAX_TOKENS)
    args.out.write_text(json.dumps({"prompts": SERVED_PROMPTS, "tokens": tokens}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
