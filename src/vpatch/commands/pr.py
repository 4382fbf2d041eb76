"""`vpatch pr --onto VERSION|PATH`: draft the vLLM pull request of what
upstream still lacks, or (`--continue`) finish a draft whose conflicts a
person resolved. pr/draft.py does the work (the candidates, the port onto
a branch, series/ and PR_BODY.md); the CLI prints the `Drafted`.
"""

from __future__ import annotations

from pathlib import Path

from .. import lock
from ..pr import draft as engine
from ..pr.draft import Drafted
from ..sources.cache import Say, quiet


def draft(
    onto: str,
    *,
    out: Path | None = None,
    signoff: str | None = None,
    source: str = "auto",
    offline: bool = False,
    only: tuple[str, ...] = (),
    results: Path | None = None,
    say: Say = quiet,
    pins: lock.Lock,
) -> Drafted:
    """The draft onto a release or a checkout (see pr/draft.py); ``only``:
    the patch slugs to send (all without it); ``results``: the tier's
    results file to quote."""
    return engine.draft(
        onto,
        pins=pins,
        out=out,
        signoff=signoff,
        source=source,
        offline=offline,
        only=only,
        results=results,
        say=say,
    )


def resume(
    onto: str,
    *,
    out: Path | None = None,
    signoff: str | None = None,
    offline: bool = False,
    results: Path | None = None,
    say: Say = quiet,
    pins: lock.Lock,
) -> Drafted:
    """Finish a draft after `git am --continue`."""
    return engine.resume(
        onto, pins=pins, out=out, signoff=signoff, offline=offline, results=results, say=say
    )
