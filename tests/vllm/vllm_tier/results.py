"""The tier's results file: what a tier program run ran, one JSON file
(``tier.py run --out DIR`` writes ``DIR/results.json``), read by the outer
tests (test_releases.py, through verdicts.py) and by ``vpatch pr --results``.

    {"format": 1, "when": "<iso>", "selected": [...], "plan": {release: [check]},
     "releases": {release: {"unpatched": {"passed": [...], "failed": [...]},
                            "patched": {...}}},      # for vpatch pr (quoted)
     "runs": [{"check", "release", "key", "variant", "returncode", "seconds",
               "timeout", "junit", "log", "cases": [{"id", "outcome", "message",
               "props"}]}],
     "errors": [{"check", "release", "error"}]}      # what could not be built

``releases`` is the shape ``vpatch pr`` reads (src/vpatch/pr/body.py), from
the runs of the check whose runs are each release's main runs (``quoted``,
registry.Check.quoted); a patch-effect test that failed unpatched as it
declares counts as failed. (Files written before 2026-12-03 also hold
``upstream_roots``, which nothing reads now.)"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from . import TierError
from .runner import Case, InnerRun

FORMAT = 1
FAILED = ("failed", "error", "xfailed")


@dataclass
class Results:
    selected: list[str]
    plan: dict[str, list[str]]
    runs: dict[tuple[str, str, str], InnerRun] = field(default_factory=dict)
    errors: dict[tuple[str, str], str] = field(default_factory=dict)
    when: str = ""
    quoted: str = ""  # the check whose runs "releases" quotes

    def run(self, check: str, release: str, key: str) -> InnerRun:
        """The run ``key`` of ``check`` on ``release``; TierError when it could
        not be built (the error) or did not run."""
        if (check, release) in self.errors:
            raise TierError(self.errors[check, release])
        try:
            return self.runs[check, release, key]
        except KeyError:
            raise TierError(f"no {key} run of {check} on {release} in the results") from None

    def releases(self) -> dict[str, dict]:
        """Per release, the ``quoted`` check's runs' tests that passed and
        failed."""
        out: dict[str, dict] = {}
        for (check, release, key), run in sorted(self.runs.items()):
            if check == self.quoted:
                cases = run.cases.values()
                out.setdefault(release, {})[key] = {
                    "passed": sorted(c.id for c in cases if c.outcome == "passed"),
                    "failed": sorted(c.id for c in cases if c.outcome in FAILED),
                }
        return out

    def save(self, path: Path) -> None:
        data = {
            "format": FORMAT,
            "when": self.when,
            "selected": self.selected,
            "plan": self.plan,
            "releases": self.releases(),
            "runs": [
                {
                    "check": check,
                    "release": release,
                    "key": key,
                    "variant": run.variant,
                    "returncode": run.returncode,
                    "seconds": round(run.seconds, 1),
                    "timeout": run.timeout,
                    "junit": str(run.junit),
                    "log": str(run.log),
                    "cases": [asdict(c) for c in run.cases.values()],
                }
                for (check, release, key), run in self.runs.items()
            ],
            "errors": [
                {"check": check, "release": release, "error": error}
                for (check, release), error in self.errors.items()
            ],
        }
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(data, indent=1) + "\n")
        tmp.rename(path)

    @classmethod
    def load(cls, path: Path) -> Results:
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError) as e:
            raise TierError(f"cannot read the tier's results {path}: {e}") from None
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise TierError(f"{path} is not a tier results file of format {FORMAT}")
        runs = {}
        for r in data["runs"]:
            cases = {c["id"]: Case(**c) for c in r["cases"]}
            runs[r["check"], r["release"], r["key"]] = InnerRun(
                r["release"],
                r["variant"],
                r["returncode"],
                r["seconds"],
                Path(r["junit"]),
                Path(r["log"]),
                cases,
                r["timeout"],
            )
        return cls(
            data["selected"],
            data["plan"],
            runs,
            {(e["check"], e["release"]): e["error"] for e in data["errors"]},
            data["when"],
        )
