"""What this vLLM does with a target's remote code when it is not trusted,
in a process of its own (the inner suite's process has loaded Kimi-K2 with
trust_remote_code=True, and transformers remembers classes it registered).
Runs in a tier run's environment (release/ on PYTHONPATH)::

    python -m tier_builders.remote_code DIR [DIR ...]     # prints JSON

For each model folder, with trust_remote_code=False: its config
(transformers_utils.config.get_config, then the ModelConfig the engine makes
from EngineArgs) and its tokenizer (vllm.tokenizers.get_tokenizer, what the
engine loads it with). Each is null when vLLM loads it, else the error's type
and first line; `classes` names the classes of the tokenizer vLLM made.
"""

from __future__ import annotations

import json
import sys


def _error(e: BaseException) -> str:
    first = str(e).strip().splitlines()[0] if str(e).strip() else ""
    return f"{type(e).__name__}: {first}"


def probe(folder: str) -> dict[str, object]:
    from helpers import engine_args
    from vllm.tokenizers import get_tokenizer
    from vllm.transformers_utils.config import get_config

    out: dict[str, object] = {"config": None, "model_config": None, "tokenizer": None}
    try:
        get_config(folder, trust_remote_code=False)
    except Exception as e:
        out["config"] = _error(e)
    try:  # the engine's ModelConfig: the config again, and a multimodal
        # model's processors
        engine_args(folder, trust_remote_code=False, load_format="dummy").create_model_config()
    except Exception as e:
        out["model_config"] = _error(e)
    try:
        tok = get_tokenizer(folder, trust_remote_code=False)
        out["classes"] = [c.__name__ for c in type(tok).__mro__]
    except Exception as e:
        out["tokenizer"] = _error(e)
    return out


def main(argv: list[str]) -> int:
    from tier_plugins import cpu_workarounds

    cpu_workarounds.install()  # the CPU paths of every tier process
    print(json.dumps({folder: probe(folder) for folder in argv}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
