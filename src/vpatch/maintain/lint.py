"""`vpatch lint`: the patch set is consistent, well-formed and up to date.

- patches.toml reads (spans of pinned releases, no two variants of a patch
  overlapping), every variant has its file patches/<slug>/<first>.patch and
  every file under patches/ is a variant;
- a patch's subject gives its slug (quilt.slug_of), and its DEP-3 fields are
  present and well-formed, and its variants agree on where upstream stands
  (Origin, Forwarded, Applied-Upstream: patchset.upstream() reads them);
- every release's series is up to date: applied to the release's files (from
  the cache, downloaded when missing) the way `vpatch apply` applies it (git
  am: full context, no fuzz; a variant's hunks may sit at other lines in the
  later releases of its span) and exported again, it gives each variant's
  bytes on the release the variant was exported from (its first) and the
  same change on the others;
- every patch of the newest patched series has an upstream probe;
- every release's status in VERSIONS.lock is the one its series makes it
  (PatchSet.status: patched, upstream-fix or upstream).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from .. import checkout, lock, patchset, probes, quilt
from ..errors import NetworkError, PreflightError, VpatchError
from ..paths import scratch
from ..shown import Shown
from ..sources.cache import Say, quiet
from ..sources.files import release_files


@dataclass(frozen=True)
class Problem:
    where: str
    what: str

    def __str__(self) -> str:
        return f"{self.where}: {self.what}"


Add = Callable[[Problem], None]


@dataclass
class Linted(Shown):
    problems: list[Problem] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # said as progress: not the result

    def lines(self) -> list[str]:
        return [str(p) for p in self.problems] or [
            "lint: every series is consistent and up to date"
        ]


def lint(
    pins: lock.Lock,
    meta_path: Path | None = None,
    offline: bool = False,
    sources: bool = True,
    say: Say = quiet,
) -> Linted:
    """Lint the patch set beside pins' lock (patches/patches.toml and the
    variant files). `sources=False` leaves out the checks that read the
    releases' files; with `offline`, releases not in the cache are skipped.
    `meta_path`: another patches.toml than pins' (its variants beside it)."""
    root = pins.root
    meta_path = meta_path or pins.patches_toml
    out = Linted()
    add = out.problems.append
    try:
        # read as it is, not as Lock.patchset (which refuses a span naming a
        # release the lock does not pin): lint names every such span below
        ps = patchset.load(meta_path)
    except VpatchError as e:
        add(Problem(meta_path.name, str(e)))
        return out
    pinned = set(pins.versions())
    claimed = set()
    for slug, variants in ps.variants.items():
        where = f"{_rel(meta_path, root)} [{slug}]"
        if not variants:
            add(Problem(where, "releases lists no variant"))
        upstream: dict[patchset.Upstream, str] = {}
        for var in variants:
            for end in {var.first, var.last} - pinned:
                add(Problem(where, f"variant {var.span}: {end} is not a pinned release"))
            claimed.add(var.path.resolve())
            if not var.path.is_file():
                add(Problem(where, f"variant {var.span} has no file {_rel(var.path, root)}"))
                continue
            try:
                p = quilt.parse(var.path, name=f"{slug}.patch")
            except VpatchError as e:
                add(Problem(_rel(var.path, root), str(e)))
                continue
            _patch(p, slug, _rel(var.path, root), add)
            upstream.setdefault(patchset.Upstream.of(p.fields), var.first)
        if len(upstream) > 1:  # patchset.upstream() reads the newest: all must agree
            firsts = ", ".join(upstream.values())
            what = "differ in DEP-3 Origin/Forwarded/Applied-Upstream"
            add(Problem(where, f"variants {firsts} {what}"))
    for f in sorted(ps.dir.rglob("*")) if ps.dir.is_dir() else []:
        if f.is_file() and f != meta_path and f.resolve() not in claimed:
            add(Problem(_rel(f, root), "no variant in patches.toml is this file"))
    loaded: dict[str, quilt.Series] = {}
    for version in pins.versions():
        try:
            s = ps.series(version)
        except VpatchError as e:
            add(Problem(pins.path.name, f"{version}: {e}"))
            continue
        if s is not None:
            loaded[version] = s
    _meta(pins, loaded, ps, add)
    if sources:
        for version, s in loaded.items():
            say(f"lint: {version}: apply and export")
            _up_to_date(pins, ps, version, s, offline, out)
    return out


def _rel(path: Path, root: Path) -> str:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return str(path)


def _patch(p: quilt.Patch, slug: str, where: str, add: Add) -> None:
    if quilt.slug_of(p.subject) != slug:
        add(
            Problem(
                where,
                f"subject {p.subject!r} gives the slug {quilt.slug_of(p.subject)!r}: rename the "
                f"patch's table and folder, or its subject",
            )
        )
    for problem in quilt.dep3_problems(p.fields):
        add(Problem(where, problem))


def _meta(
    pins: lock.Lock, loaded: dict[str, quilt.Series], ps: patchset.PatchSet, add: Add
) -> None:
    """Every release's status is its series' (PatchSet.status); every patch
    of the newest series has a probe (the matrix tells `upstream` by it),
    and the probes are well-formed."""
    path = ps.toml
    try:
        checks = probes.load(ps)
    except VpatchError as e:
        add(Problem(path.name, str(e)))
        return
    for v in pins.versions():
        derived, written = ps.status(v), pins.releases[v].status
        if derived != written:
            add(
                Problem(
                    f"{pins.path.name} [{v}]",
                    f"status {written!r}, but its series makes it {derived!r} "
                    "(patches.toml: the spans, and `eagle3` of the patches that are "
                    "EAGLE-3 itself)",
                )
            )
    newest = pins.default().version
    for p in loaded[newest].patches if newest in loaded else []:
        if not checks.get(p.slug):
            add(Problem(path.name, f"no probe for {p.slug} (the matrix cannot tell `upstream`)"))


def _up_to_date(
    pins: lock.Lock,
    ps: patchset.PatchSet,
    version: str,
    s: quilt.Series,
    offline: bool,
    out: Linted,
) -> None:
    """The release's series applies as `vpatch apply` applies it (git am: full
    context, no fuzz) and exported again gives each variant's change: its
    bytes on the release it was exported from (its first), the same change
    elsewhere (hunk positions and blob ids aside)."""
    try:
        files = release_files(pins.releases[version], set(s.files), offline)
    except NetworkError as e:
        if not offline:
            raise
        out.skipped.append(f"{version}: not checked against its release: {e}")
        return
    with scratch("vpatch-lint-") as tmp:
        dest = Path(tmp) / "tree"
        try:
            checkout.apply(pins.releases[version], s, dest, source=str(files))
        except PreflightError:
            raise  # no git here: the machine's lack, not the series'
        except VpatchError as e:
            out.problems.append(Problem(version, f"its series does not apply: {e}"))
            return
        repo, _ = checkout.open_tree(dest)
        fresh = checkout.render(repo, checkout.BASE_TAG.format(version))
    for p in s.patches:
        v = ps.variant(p.slug, version)
        assert v is not None  # s is ps's series of version
        data, made = fresh.get(p.name, b""), p.path.read_bytes()
        exact = version == v.first
        if (data != made) if exact else not patchset.same_change(data, made):
            what = "its bytes" if exact else "its change"
            out.problems.append(
                Problem(
                    f"{_rel(p.path, pins.root)} ({version})",
                    f"apply + export of vLLM {version} does not give {what}; run `vpatch "
                    f"apply {version}` and `vpatch export build/vllm-{version}`",
                )
            )
