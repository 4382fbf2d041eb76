"""Build (or reuse) the environment of the patched-vLLM tier: the venv, the
installs and the fixtures of some releases (the work is vllm_tier's).

    python tests/vllm/env.py                         # the default releases
    python tests/vllm/env.py --release 0.16.0 --patched
    python tests/vllm/env.py --release 0.16.0 --patched --print-env   # `export` lines

Run it with the project's python (``.venv/bin/python``: it imports vpatch).
"""

from __future__ import annotations

import argparse
import sys
import time

from vllm_tier import TierError, models, releases, targets, venvs
from vllm_tier.log import say
from vllm_tier.runenv import runtime_env
from vpatch.errors import VpatchError

SHOWN = (
    "VLLM",
    "VPATCH",
    "HF_",
    "TRANSFORMERS",
    "PYTHONPATH",
    "TOKENIZERS",
    "TORCHDYNAMO",
    "LD_PRELOAD",
)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--release", action="append", help="release(s) to prepare (default: $VLLM, else the tier's)"
    )
    ap.add_argument("--patched", action="store_true", help="also make the patched install")
    ap.add_argument("--no-fixtures", action="store_true")
    ap.add_argument(
        "--print-env", action="store_true", help="print `export` lines for the first release's run"
    )
    args = ap.parse_args(argv)
    t0 = time.monotonic()
    try:
        wanted = releases.selected(" ".join(args.release) if args.release else None)
        fixtures = None if args.no_fixtures else models.ensure(wanted[0])
        made = {}
        for release in wanted:
            made[release] = targets.target(release, False)
            if args.patched:
                made[release] = targets.target(release, True)
    except (TierError, VpatchError) as e:
        print(f"vllm-env: error: {e}", file=sys.stderr)
        return 2
    say(f"environment ready in {time.monotonic() - t0:.0f}s")
    if args.print_env:
        first = wanted[0]
        env = runtime_env(made[first], fixtures, first)
        # unpatched, the inner conftest makes each patch-effect test a strict xfail
        env["VPATCH_VLLM_VARIANT"] = "patched" if args.patched else "unpatched"
        for k in sorted(env):
            if k.startswith(SHOWN):
                print(f"export {k}={env[k]!s}")
        print(f"alias vpy={venvs.python(first)}")
    else:
        for release, path in made.items():
            print(f"{release}\t{venvs.python(release)}\t{path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
