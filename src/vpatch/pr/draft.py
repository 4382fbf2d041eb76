"""Drafting the vLLM pull request of what upstream still lacks: what
`vpatch pr --onto VERSION|PATH` calls (cli/pr.py).

Candidates (pr/candidates.py): the patches of the newest patched series
(the lock's default) and of the newest upstream release that carries a
series (the fixes upstream lacks), once per patch slug, each taken from the
newest series that has it. On the target tree (a pinned release fetched into build/pr-<release>,
or <out>/vllm-<release> with --out; or a clean local git checkout of vLLM),
a candidate whose probe (patches.toml) holds is upstream and left out; the
matrix machinery over the cached release files says since which release. A
candidate without a probe is never left out. The rest are ported as
`vpatch port` does (threeway.carry: `git am --3way`) onto a new branch
vpatch/eagle3-<release, or the checkout's short commit>, then made again
with vLLM's titles (`pr_prefix` + `pr_title` in patches.toml, else derived
from the files and the subject) and a Signed-off-by trailer (vLLM requires
the DCO), authored and committed by whoever signs off.

Written into --out (default pr/): PR_BODY.md (pr/body.py renders it) and
series/, the commits as `git format-patch` files. Nothing is pushed: the
draft lists the commands to run. On a conflict the `git am`
session is left on the branch for a person; `vpatch pr ... --continue`
then finishes.
"""

from __future__ import annotations

import re
import shlex
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from .. import checkout, gitutil, lock, patchset, probes, quilt, sources, threeway
from ..errors import ConfigError, TreeError, VpatchError, disk_error
from ..paths import empty
from ..shown import Shown
from ..sources.cache import Say, quiet
from ..sources.files import release_files
from ..sources.refresh import resolve
from .body import Results, body, load_results, message, pr_title, tested_results
from .candidates import Candidate, candidates

PR_REPO = "vllm-project/vllm"
BRANCH = "vpatch/eagle3-{}"
SENT = ("clean", "merged", "ported")
_SIGNOFF = re.compile(r"^\s*([^<>]*?)\s*<([^<>\s]+@[^<>\s]+)>\s*$")


@dataclass
class Drafted(Shown):
    onto: str
    target: str  # "vLLM X.Y.Z" or "<path> (<short commit>)"
    tree: Path
    candidates: list[Candidate]
    branch: str = ""
    base: str = ""
    from_archive: bool = False  # the tree's history is a release archive, not vLLM's
    unresolved: list[str] = field(default_factory=list)
    out: Path = Path("pr")
    title: str = ""
    release: str = ""  # whose regression tier tests the change
    commands: list[str] = field(default_factory=list)

    @property
    def sent(self) -> list[Candidate]:
        return [c for c in self.candidates if c.status in SENT]

    @property
    def conflict(self) -> Candidate | None:
        return next((c for c in self.candidates if c.status == "conflict"), None)

    def lines(self) -> list[str]:
        """One line per candidate: its status and what it became; then, unless
        it stopped at a conflict, the branch, the body and the commands that
        open the pull request (or that there is nothing to send)."""
        out = []
        for c in self.candidates:
            what = f"{c.patch.name} ({c.release})"
            if c.status == "upstream":
                note = f"upstream since {c.since}" if c.since else "upstream (the target has it)"
            elif c.status == "included":
                note = "the patches before it bring it"
            elif c.status in SENT:
                note = c.title
            else:
                note = ""
            out.append(f"  {c.status:8}  {what}{': ' + note if note else ''}")
        if self.conflict:
            return out
        if not self.sent:
            return [
                *out,
                f"nothing to send: {self.target} has every patch already; no branch was made",
            ]
        n = len(self.sent)
        out.append(
            f"{self.tree}: branch {self.branch}, {n} commit{'s' * (n != 1)} on {self.target}"
        )
        out.append(f"{self.out / 'PR_BODY.md'}, {self.out / 'series'}/: {self.title}")
        out.append("nothing was pushed; to open the pull request:")
        return out + [f"  {c}" for c in self.commands]


def signer(signoff: str | None, repo: gitutil.Repo | None = None) -> tuple[str, str]:
    """(name, email) for Signed-off-by: --signoff, else git's user.name/email."""
    if signoff:
        m = _SIGNOFF.match(signoff)
        if not m or not m.group(1):
            raise ConfigError(f"--signoff {signoff!r}: write it as 'Your Name <you@example.com>'")
        return m.group(1), m.group(2)
    who = gitutil.identity(repo)
    if who is None or who == gitutil.IDENTITY or not all(who):
        raise ConfigError(
            "vLLM requires a DCO sign-off: give --signoff 'Your Name <you@example.com>' "
            "(or set git's user.name and user.email)"
        )
    return who


# -- the target ----------------------------------------------------------------


def default_tree(version: str, out: Path | None = None) -> Path:
    return Path(out) / f"vllm-{version}" if out else Path("build") / f"pr-{version}"


def _target(onto: str, pins: lock.Lock, offline: bool) -> tuple[lock.Release | None, Path | None]:
    path = Path(onto).expanduser()
    if onto.removeprefix("v") in pins.releases and "/" not in onto:
        return pins.get(onto), None
    if _is_dir(path):
        return None, path
    if "/" in onto or onto.startswith("."):
        raise ConfigError(f"--onto {onto}: no such folder (give a vLLM checkout or a release)")
    return resolve(pins, onto, offline), None


def _is_dir(path: Path) -> bool:
    """Whether --onto names a folder; a name the file system refuses (too
    long) names none, and is then looked at as a release (lock.release_name)."""
    try:
        return path.is_dir()
    except OSError:
        return False


def _fetch(release: lock.Release, tree: Path, source: str, offline: bool, say: Say) -> None:
    """The release's source in tree: a baseline commit tagged vpatch/base-<release>."""
    if tree.exists() and any(tree.iterdir()):
        raise TreeError(f"{tree} exists; remove it, or finish the draft there with --continue")
    nothing = quilt.Series([], release.version)  # the baseline alone
    checkout.apply(release, nothing, tree, source, offline, say=say)


def _checkout(path: Path) -> gitutil.Repo:
    repo = gitutil.open_repo(path)
    if repo is None:
        raise TreeError(f"{path} is not the top folder of a git checkout of vLLM")
    checkout.refuse_am(repo)
    checkout.refuse_dirty(repo, "commit or stash them first")
    if gitutil.head(repo) is None:
        raise TreeError(f"{path} has no commit to branch from")
    return repo


# -- upstream since ------------------------------------------------------------


def upstream_since(
    pins: lock.Lock, checks: probes.Probes, keys: list[str], offline: bool = False, say: Say = quiet
) -> dict[str, str]:
    """{patch slug: the first pinned release whose own source passes its probe}."""
    left = {k: checks[k] for k in keys if checks.get(k)}
    globs = probes.patterns(checks)
    found: dict[str, str] = {}
    for v in pins.versions():
        if not left:
            break
        try:
            folder = release_files(pins.releases[v], globs, offline)
        except VpatchError as e:
            say(f"upstream since: {v} not checked ({e})")
            continue
        files = probes.folder_files(folder, globs)
        for s in [s for s, c in left.items() if probes.holds(c, files)]:
            found[s] = v
            del left[s]
    return found


# -- porting -------------------------------------------------------------------


def _preimages(
    repo: gitutil.Repo, pins: lock.Lock, to_send: list[Candidate], offline: bool
) -> None:
    """Store in repo each source series' files as they are before each of its
    patches: the blobs their index lines name, which `git am --3way` needs
    to merge where the target's text moved on."""
    wanted: dict[str, set[str]] = {}
    for c in to_send:
        # the index lines are those of the release the variant was exported from
        made = pins.patchset.variant(c.slug, c.release)
        wanted.setdefault(made.first if made else c.release, set()).add(c.slug)
    for v, keys in wanted.items():
        rel = pins.releases[v]
        s = pins.series(rel)
        if s is None:
            continue
        files = release_files(rel, set(s.files), offline)
        with tempfile.TemporaryDirectory(prefix="vpatch-pr-") as tmp:
            tree = Path(tmp) / "tree"
            shutil.copytree(files, tree)
            for p in s.patches:
                gitutil.store_blobs(repo, [tree / f for f in p.files if (tree / f).is_file()])
                keys.discard(p.slug)
                if not keys or not gitutil.apply_folder(tree, p.path)[0]:
                    break


def _port(d: Drafted, repo: gitutil.Repo, to_send: list[Candidate], checks: probes.Probes) -> None:
    for i, c in enumerate(to_send):
        mine = checks.get(c.slug, [])
        if probes.holds(mine, probes.folder_files(d.tree, probes.patterns({c.slug: mine}))):
            c.status = "included"  # an earlier patch brought it (a patched series' 0001 does)
            continue
        status = threeway.carry(repo, c.patch, [x.patch for x in to_send[i + 1 :]])
        c.status = "included" if status == "dropped" else status
        if status == "conflict":
            d.unresolved = gitutil.conflicted(repo)
            for x in to_send[i + 1 :]:
                x.status = "queued"
            return


def draft(
    onto: str,
    *,
    out: Path | None = None,
    signoff: str | None = None,
    pins: lock.Lock,
    meta_path: Path | None = None,
    source: str = "auto",
    offline: bool = False,
    only: tuple[str, ...] = (),
    results: Path | None = None,
    say: Say = quiet,
) -> Drafted:
    """Draft the pull request onto a release or a checkout; ``only`` (patch
    keys: `--patch`) sends those candidates alone (vLLM takes a pull request
    per change); ``results``: the tier's results file, quoted in PR_BODY.md.
    On a conflict the draft names it and the tree is left for a person; with
    nothing to send, no branch is left behind."""
    res = load_results(results) if results is not None else None
    checks = probes.load(meta_path or pins.patchset)
    cands = select(candidates(pins, meta_path), only)
    release, path = _target(onto, pins, offline)
    own = _own_draft(path or default_tree(release.version if release else "", out))
    if own is not None:
        say(f"{own}: this is vpatch's own draft; finishing it again")
        return resume(
            onto,
            out=out,
            signoff=signoff,
            pins=pins,
            meta_path=meta_path,
            offline=offline,
            results=results,
            say=say,
        )
    if release is not None:
        who = signer(signoff)
        tree = default_tree(release.version, out)
        existed = tree.exists()
        _fetch(release, tree, source, offline, say)
        created = True
        repo, _ = checkout.open_tree(tree)
        base = gitutil.tag_sha(repo, checkout.BASE_TAG.format(release.version))
        assert base is not None
        d = Drafted(onto, f"vLLM {release.version}", tree, cands, BRANCH.format(release.version))
        d.from_archive = sources.resolve(release, source) != "git"
        start = None
    else:
        assert path is not None
        repo = _checkout(path)
        who = signer(signoff, repo)
        base = gitutil.head(repo)
        assert base is not None
        created, existed, tree = False, True, path
        d = Drafted(onto, f"{path} ({base[:10]})", path, cands, BRANCH.format(base[:10]))
        start = gitutil.branch(repo) or base
        if gitutil.has_branch(repo, d.branch):
            raise TreeError(
                f"{path} already has branch {d.branch}; finish it with --continue, "
                f"or delete it (git branch -D {d.branch})"
            )
    d.base, d.out = base, Path(out or "pr")
    try:
        pristine = probes.folder_files(tree, probes.patterns(checks))
        for c in cands:
            if probes.holds(checks.get(c.slug, []), pristine):
                c.status = "upstream"
        since = upstream_since(pins, checks, [c.slug for c in cands if c.status], offline, say)
        for c in cands:
            c.since = since.get(c.slug, "") if c.status == "upstream" else ""
            # a backport of a fix upstream merged after the last release
            # (DEP-3 Applied-Upstream: the merged PR's URL; a release number
            # is the probe's to confirm) is never sent again
            merged = patchset.Upstream.of(c.patch.fields).merged
            if not c.status and merged:
                c.status, c.since = "upstream", merged
        to_send = [c for c in cands if not c.status]
        if to_send:
            gitutil.switch(repo, d.branch, base)
            _preimages(repo, pins, to_send, offline)
            _port(d, repo, to_send, checks)
    except BaseException:
        _undo(d, repo, created, existed, start)
        raise
    if d.conflict:
        return d
    if not d.sent:
        _undo(d, repo, created, existed, start)
        d.branch = ""
        return d
    return _finish(d, repo, who, pins, res)


def select(cands: list[Candidate], only: tuple[str, ...]) -> list[Candidate]:
    """The candidates named in ``only`` (all of them without it), in series order."""
    if not only:
        return cands
    keys = [c.slug for c in cands]
    unknown = [k for k in only if k not in keys]
    if unknown:
        raise ConfigError(
            f"--patch {unknown[0]}: not a patch of the pull request; its patches: {', '.join(keys)}"
        )
    return [c for c in cands if c.slug in only]


def _own_draft(tree: Path) -> str | None:
    """`<tree> (branch vpatch/eagle3-...)` when tree is a git checkout on one
    of vpatch's draft branches: a second `vpatch pr` there finishes that
    draft again instead of seeing its own commits as upstream's."""
    repo = gitutil.open_repo(tree) if tree.is_dir() else None
    name = gitutil.branch(repo) if repo is not None else None
    if repo is None or not name or not name.startswith(BRANCH.format("")):
        return None
    return f"{tree} (branch {name})"


def _undo(d: Drafted, repo: gitutil.Repo, created: bool, existed: bool, start: str | None) -> None:
    """Leave no trace: remove a tree this run fetched (a folder that existed,
    empty, stays), or put a checkout back on its branch and drop ours."""
    if created:
        if existed:
            empty(d.tree)
        else:
            shutil.rmtree(d.tree, ignore_errors=True)
    elif gitutil.branch(repo) == d.branch:
        gitutil.reset_hard(repo, d.base)  # ends a `git am` session too
        gitutil.checkout(repo, start or d.base)
        gitutil.delete_branch(repo, d.branch)


def resume(
    onto: str,
    *,
    out: Path | None = None,
    signoff: str | None = None,
    pins: lock.Lock,
    meta_path: Path | None = None,
    offline: bool = False,
    results: Path | None = None,
    say: Say = quiet,
) -> Drafted:
    """Finish a draft whose conflicts a person resolved (`git am --continue`)."""
    res = load_results(results) if results is not None else None
    release, path = _target(onto, pins, offline)
    tree = path or default_tree(release.version if release else "", out)
    repo = gitutil.open_repo(tree)
    if repo is None:
        raise TreeError(f"{tree} holds no draft; run `vpatch pr --onto {onto}`")
    checkout.refuse_am(repo)
    checkout.refuse_dirty(repo)
    name = gitutil.branch(repo) or ""
    if not name.startswith(BRANCH.format("")):
        raise TreeError(f"{tree}: check out the {BRANCH.format('*')} branch of the draft first")
    ref = checkout.BASE_TAG.format(release.version) if release else name.rsplit("-", 1)[-1]
    base = gitutil.tag_sha(repo, ref)
    if base is None:
        raise TreeError(f"{tree}: the draft's base {ref} is gone; start again without --continue")
    target = f"vLLM {release.version}" if release else f"{path} ({base[:10]})"
    d = Drafted(onto, target, tree, candidates(pins, meta_path), name, base)
    d.from_archive = release is not None and not gitutil.remotes(repo)
    d.out = Path(out or "pr")
    subjects = {c.subject for c in gitutil.commits(repo, base) or []}
    for c in d.candidates:
        c.status = "ported" if subjects & {c.patch.subject, c.title} else "left out"
    return _finish(d, repo, signer(signoff, repo if path else None), pins, res)


# -- the branch, the series, the body --------------------------------------------


def _finish(
    d: Drafted, repo: gitutil.Repo, who: tuple[str, str], pins: lock.Lock, res: Results | None
) -> Drafted:
    """Title and sign off the branch's commits, write series/ and PR_BODY.md."""
    done = checkout.on_base(repo, d.base)
    by_subject = {s: c for c in d.candidates for s in (c.patch.subject, c.title)}
    messages = []
    for commit in done:
        c = by_subject.get(commit.subject)
        if c is None:
            raise TreeError(
                f"{d.tree}: commit {commit.sha[:10]} {commit.subject!r} is none of the patches; "
                "drop it (git rebase -i) and run again with --continue"
            )
        messages.append(message(c, who))
    gitutil.reword(repo, d.base, messages, who, [c.author_date for c in done])
    sent = d.sent
    d.release = max((c.release for c in sent), key=lambda v: pins.releases[v].key)
    d.title = pr_title([c.title for c in sent])
    out = d.out
    quilt.write(out / "series", checkout.render(repo, d.base))
    tested, quoted = tested_results(sent, pins, res)
    added = sorted(
        {f for c in sent for f in c.patch.files if f.startswith("tests/") and "/test_" in f}
    )
    try:
        (out / "PR_BODY.md").write_text(body(sent, tested, quoted, added))
    except OSError as e:
        raise disk_error(e, "cannot write PR_BODY.md") from None
    d.commands = commands(d, repo)
    return d


def commands(d: Drafted, repo: gitutil.Repo) -> list[str]:
    """What to run to open the pull request (vpatch never pushes)."""
    fork, user = "YOUR_FORK", "YOUR_USER"
    for name, url in gitutil.remotes(repo).items():
        m = re.search(r"github\.com[:/]([^/]+)/[^/]+?(\.git)?$", url)
        if m and m.group(1) != PR_REPO.split("/")[0]:
            fork, user = name, m.group(1)
            break
    q = shlex.quote
    push = [f"git -C {q(str(d.tree))} push -u {fork} {d.branch}"]
    if d.from_archive:
        # the tree's one commit is the release archive, not vLLM's history: a
        # branch pushed from it shares no commit with vLLM's main
        series = q(str(d.out.absolute() / "series"))
        push = [
            f"# {d.tree} holds vLLM's release archive, not its git history: push from a "
            f"clone of {PR_REPO} (VLLM below; `vpatch pr --onto VLLM` drafts there itself)",
            f"git -C VLLM switch -c {d.branch} origin/main",
            f"git -C VLLM am --3way {series}/*.patch",
            f"git -C VLLM push -u {fork} {d.branch}",
        ]
    return [
        *push,
        f"gh pr create --repo {PR_REPO} --base main --head {user}:{d.branch} "
        f"--title {q(d.title)} --body-file {q(str(d.out / 'PR_BODY.md'))}",
    ]
