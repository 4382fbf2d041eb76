"""The pull request's candidates: the patches of the newest patched series
and of the newest upstream release that carries a series, once per patch,
each as the newest release that carries it has it (the patch set's newest
variant); and the title each gets in vLLM (`pr_prefix` + `pr_title` in
patches.toml, else vLLM's prefixes derived from its files and its subject)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from .. import lock, probes, quilt

# Title prefixes vLLM asks for, by the files a patch touches (first match).
PREFIXES = (
    ("vllm/model_executor/models/", "[Model]"),
    ("vllm/models/", "[Model]"),  # the per-model packages (deepseek_v32/, deepseek_v4/, ...)
    ("vllm/v1/spec_decode/", "[Spec Decode]"),
    ("vllm/config/speculative.py", "[Spec Decode]"),
    ("vllm/entrypoints/", "[Frontend]"),
    ("csrc/", "[Kernel]"),
    ("docs/", "[Doc]"),
    (".buildkite/", "[CI/Build]"),
)


@dataclass
class Candidate:
    patch: quilt.Patch
    release: str  # the release whose series it is taken from
    title: str  # the commit title for vLLM
    status: str = ""  # upstream, included, clean, merged, ported, conflict, queued
    since: str = ""  # upstream: the first pinned release where its probe holds

    @property
    def slug(self) -> str:
        return self.patch.slug


def candidates(pins: lock.Lock, meta_path: Path | None = None) -> list[Candidate]:
    titles = probes.pr_titles(meta_path or pins.patchset)
    ps = pins.patchset  # read from the patch set: no release's series is rendered
    newest = {var.slug: (v, name, var) for v, name, var in ps.newest(pins.versions())}
    picked = [pins.default().version]
    upstream = [
        v for v in pins.with_series() if pins.releases[v].status in ("upstream", "upstream-fix")
    ]
    picked += upstream[-1:]
    out: dict[str, Candidate] = {}
    for v in picked:
        for _, var in ps.named(v):
            if var.slug not in out:
                rel, name, newer = newest[var.slug]
                src = ps.patch(newer, name)
                out[var.slug] = Candidate(src, rel, title(src, titles.get(var.slug, {})))
    return list(out.values())


def title(patch: quilt.Patch, meta: dict[str, str]) -> str:
    """vLLM's prefixes, then a readable title (patches.toml's, else the subject)."""
    prefix = meta.get("pr_prefix") or derive_prefix(patch)
    return f"{prefix} {meta.get('pr_title') or patch.subject}"


def derive_prefix(patch: quilt.Patch) -> str:
    tags = ["[Bugfix]"] if re.search(r"\bfix", patch.subject, re.IGNORECASE) else []
    for path in patch.files:
        tag = next((t for start, t in PREFIXES if path.startswith(start)), "")
        if tag and tag not in tags:
            tags.append(tag)
    return "".join(tags) or "[Misc]"
