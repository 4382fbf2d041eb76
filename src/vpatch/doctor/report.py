"""doctor's report: one finding per check (its severity and message, the
serve-command changes that fix it), the corrected serve command, as text or
as a JSON-ready dict.

Severities: `error` = vLLM will crash (at config time, at weight load, or at
the first request) or run with silently broken drafts; `warning` = likely
wrong, or not checkable; `info` = what vLLM will do. `ok` is false exactly
when there is an error.

`report_lines()` is the one text form of doctor's reports (the
preflight's Report, the post-flight's Postflight), each a Shown: a line
may hold what a hub or a server sent (a file name of a listing, a
/version, a model name), which the CLI shows escaped (cli.options.show).
The JSON form keeps every value as read."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..shown import Shown

SEVERITIES = ("error", "warning", "info")


@dataclass(frozen=True)
class Finding:
    check: str
    severity: str
    message: str
    # changes to the serve command that fix it (Serve.command's keywords)
    fix: dict[str, Any] = field(default_factory=dict, compare=False)


@dataclass
class Report(Shown):
    findings: list[Finding]
    serve: str  # the serve command, with the fixes of the findings
    header: list[str] = field(default_factory=list)
    uninterpreted: list[str] = field(default_factory=list)  # of the serve command
    # what was read of the target and the drafter, and from where (hub.Model.to_json)
    read: list[dict[str, Any]] = field(default_factory=list)
    # the vLLM judged against and the release whose rules were applied
    vllm: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not any(f.severity == "error" for f in self.findings)

    def to_json(self) -> dict[str, Any]:
        findings = [
            {"check": f.check, "severity": f.severity, "message": f.message} for f in self.findings
        ]
        return {
            "ok": self.ok,
            "findings": findings,
            "serve": self.serve,
            "uninterpreted": list(self.uninterpreted),
            "read": list(self.read),
            "vllm": dict(self.vllm),
        }

    def lines(self) -> list[str]:
        return report_lines(self.header, self.findings, [self.serve])


def report_lines(
    head: Sequence[str], findings: Sequence[Finding], tail: Sequence[str] = ()
) -> list[str]:
    """A report's lines: `head`, the findings, the verdict, then `tail`
    (the serve command), a blank line between them."""
    width = max((len(f.check) for f in findings), default=0)
    n = {s: sum(f.severity == s for f in findings) for s in SEVERITIES}
    verdict = "ok" if not n["error"] else "NOT ok"
    out = [*head, ""]
    out += [f"  {f.severity:8} {f.check:{width}}  {f.message}" for f in findings]
    out += ["", f"{verdict}: {_count(n['error'], 'error')}, {_count(n['warning'], 'warning')}"]
    for t in tail:
        out += ["", t]
    return out


def _count(n: int, what: str) -> str:
    return f"{n} {what}{'s' * (n != 1)}"
