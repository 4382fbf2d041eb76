"""`vpatch verify-wheel WHEEL [--arch sm_100] [--tree DIR]`: RECORD, the
CUDA architectures of the extensions, and the series' files against a
patched tree (DIR, or one made now in a temporary folder with `vpatch
apply`). The CLI shows the result (its lines) and exits with
`result.exit_code` (0, or WheelError's code when a check failed)."""

from __future__ import annotations

import tempfile
from pathlib import Path

from packaging.version import Version

from .. import checkout, lock, quilt
from ..errors import ConfigError, VpatchError
from ..wheel.verify import Verified, check_version, compare, scan


def verify_wheel(
    wheel_path: Path,
    arch: str | None = None,
    tree: Path | None = None,
    *,
    check_files: bool = True,
    series_dir: Path | None = None,
    series: quilt.Series | None = None,
    offline: bool = False,
    pins: lock.Lock,
) -> Verified:
    """`check_files=False` leaves out the version and file checks; the
    series is `series`, or the one in `series_dir`, or pins' for the
    wheel's release."""
    res, w = scan(Path(wheel_path), arch)
    if w is None:
        return res
    with w:
        if not check_files:
            return res
        base = Version(w.version).public
        try:
            if series is None:
                series = pins.series(base, series_dir)
                if series is None:
                    raise ConfigError(f"vLLM {base} carries no series")
        except VpatchError as e:
            res.problems.append(f"cannot load the series for {w.version}: {e}")
            return res
        shipped = check_version(res, w, series)
        if shipped is None:
            return res
        if tree is not None:
            compare(res, w, Path(tree), shipped, str(tree))
            return res
        with tempfile.TemporaryDirectory(prefix="vpatch-verify-") as tmp:
            dest = Path(tmp) / "tree"
            checkout.apply(pins.get(base), series, dest, offline=offline)
            where = f"vLLM {base} + series {series.name} (applied in a temporary folder)"
            compare(res, w, dest, shipped, where)
    return res
