"""A series applied to copies of some of the files it changes: each patch
`git apply`d in order, in a temporary folder laid out as the repository,
then the files read back. What `vpatch wheel`'s overlay (wheel/patch.py)
and `vpatch install` (env/install.py) do to the files they replace; each
chooses which files (those the wheel ships, those the environment has
installed) and says what the result means for it."""

from __future__ import annotations

from pathlib import Path

from . import gitutil
from .errors import PatchError, disk_error
from .paths import scratch
from .quilt import Series

PREFIX = "vpatch-patch-"  # the temporary folders' (paths.SCRATCH)


def apply(
    series: Series, files: dict[str, bytes], only: list[str], target: str
) -> dict[str, bytes]:
    """The files of `only` (series paths) with the series applied: {path:
    bytes} of each that exists afterwards. `files` holds those that exist
    before, by path; one of `only` it lacks is one the series creates. Each
    patch changes the files of `only` alone (`git apply --include`: the
    others it touches, tests and docs, are not there), with full context and
    no fuzz; a patch that touches none of them is passed over. PatchError
    names the patch that does not apply to `target` and git's reason."""
    try:
        with scratch(PREFIX) as tmp:
            root = Path(tmp) / "tree"
            root.mkdir()
            for f, data in files.items():
                (root / f).parent.mkdir(parents=True, exist_ok=True)
                (root / f).write_bytes(data)
            for patch in series.patches:
                mine = [f for f in patch.files if f in only]
                if not mine:
                    continue
                ok, report = gitutil.apply_folder(root, patch.path, 3, mine)
                if not ok:
                    why = gitutil.apply_reason(report)
                    raise PatchError(f"{patch.name} does not apply to {target}: {why}")
            return {f: (root / f).read_bytes() for f in only if (root / f).is_file()}
    except OSError as e:
        raise disk_error(
            e, f"cannot patch copies of {target}'s files in a temporary folder"
        ) from None
