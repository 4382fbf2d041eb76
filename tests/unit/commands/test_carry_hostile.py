"""`vpatch carry` under hostile use: what it may delete, what an
interrupted port counts as, what `--write` may overwrite, and the spellings
and folders it is handed. Each case runs `vpatch.cli.main` on a scratch
checkout (the real patch set, doctor's rules.toml and the docs, copied,
with a `.git` and an uncommitted file of the user's) with the network's
parts stood in for: the index lookup of TO, the port, the release files
read for doctor's facts and probes, lint and the docs (the tier's too); the work folder, the
validation, `--continue` and `--write` are the real code."""

from __future__ import annotations

import fcntl
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from support import git, next_release
from vpatch import cli, lock
from vpatch.commands import carry
from vpatch.errors import ConfigError, NetworkError, PatchError, TreeError
from vpatch.maintain import docs, lint, pin, port, workfolder

ROOT = Path(__file__).resolve().parents[3]
DATA = carry.DATA
PINS = lock.load(ROOT / DATA / "VERSIONS.lock")
TO = next_release(PINS)
FROM = PINS.versions()[-1]
# a release spelled as vLLM does not: the minor alone, a fourth part, blanks, V;
# leading zeros, another script's digits, a trailing newline (a hostile pass: these
# downloaded TO's sdist and failed with exit 7, or exited 70)
_MAJOR, _MINOR, _PATCH = TO.split(".")
SPELLINGS = [TO.rsplit(".", 1)[0], f"{TO}.0", f" {TO}", f"V{TO}", f"{TO} "]
SPELLINGS += [f"0{TO}", f"{_MAJOR}.0{_MINOR}.{_PATCH}", f"{_MAJOR}.{_MINOR}.0{_PATCH}"]
SPELLINGS += [TO.translate(str.maketrans("0123456789", "０１２３４５６７８９")), f"{TO}\n"]


def snapshot(top: Path) -> dict[str, bytes | None]:
    """{path: bytes (None: a folder)} of everything under top."""
    out: dict[str, bytes | None] = {}
    for p in sorted(top.rglob("*")):
        rel = p.relative_to(top).as_posix()
        out[rel] = p.read_bytes() if p.is_file() else None
    return out


@pytest.fixture
def project(tmp_path, monkeypatch) -> Path:
    """A scratch checkout, the current folder, whose patch set vpatch reads."""
    proj = tmp_path / "proj"
    shutil.copytree(ROOT / DATA, proj / DATA)
    for rel in docs.paths(PINS):
        (proj / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ROOT / rel, proj / rel)
    (proj / "pyproject.toml").write_text('[project]\nname = "vpatch"\n')
    git(proj, "init", "-q")
    (proj / "mine.txt").write_text("not committed, not carry's\n")
    monkeypatch.setenv("VPATCH_ROOT", str(proj / DATA))
    monkeypatch.chdir(proj)
    return proj


class Stand:
    """What the stand-ins saw, and hooks a case sets."""

    def __init__(self) -> None:
        self.looked_up: list[str] = []
        self.during_lint: Callable[[], None] = lambda: None
        self.port: Callable[..., port.Ported] | None = None
        self.resume: Callable[..., port.Ported] | None = None
        self.files: dict[str, Path] = {}  # release -> its files (probes, facts)


@pytest.fixture
def stand(project, tmp_path, monkeypatch) -> Stand:
    s = Stand()

    def resolve(pins, v, offline=False, say=None):
        s.looked_up.append(v)
        arts = {k: lock.Artifact(k, f"{k}-{v}", "0" * 64, 1) for k in ("sdist", "wheel")}
        return lock.Release(v, f"v{v}", "0123abc", "unpinned", arts)

    def ported(frm, to, *, pins, work, **kw):
        if s.port:
            return s.port(frm, to, pins=pins, work=work, **kw)
        series = pins.series(frm)
        return port.Ported(frm, to, work, status={p.name: "clean" for p in series.patches})

    def resumed(frm, to, *, pins, work, **kw):
        assert s.resume, "resume was not expected"
        return s.resume(frm, to, pins=pins, work=work, **kw)

    def linted(pins, say=None, **kw):
        s.during_lint()
        return lint.Linted()

    empty = tmp_path / "no-files"
    empty.mkdir()
    monkeypatch.setattr(carry.pin, "resolve", resolve)
    monkeypatch.setattr(carry.pin, "with_record", lambda a, old=None, say=None: a)
    monkeypatch.setattr(carry.port, "port", ported)
    monkeypatch.setattr(carry.port, "resume", resumed)
    monkeypatch.setattr(
        carry.reading, "release_files", lambda rel, globs, **kw: s.files.get(rel.version, empty)
    )
    monkeypatch.setattr(carry.lint, "lint", linted)
    monkeypatch.setattr(carry.docs, "write", lambda *a, **kw: None)
    monkeypatch.setattr(carry.docs, "tier_paths", lambda root: [])  # a checkout without tests/
    monkeypatch.setattr(carry.docs, "write_tier", lambda root, copy: None)
    monkeypatch.setattr(
        carry.pin, "tier_view", lambda rel: pin.TierView(rel.version, None, None, None)
    )
    return s


def run(capsys, *argv: str) -> tuple[int, str, str]:
    try:
        code = cli.main(["carry", *argv])
    except SystemExit as e:  # argparse's refusals
        code = int(e.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def one_line(err: str) -> str:
    lines = [x for x in err.splitlines() if x.startswith("vpatch: error:")]
    assert len(lines) == 1 and err.rstrip().endswith(lines[0]), err
    return lines[0]


# -- --work is carry's own folder, or refused before anything is touched -----


@pytest.mark.parametrize(
    "work",
    [".", "..", ".git", "src", "src/vpatch/data", "build", "../elsewhere"],
)
def test_w1_a_work_folder_carry_did_not_make_is_refused_untouched(project, stand, capsys, work):
    (project / f"build/vllm-{FROM}").mkdir(parents=True)
    (project / f"build/vllm-{FROM}/applied.py").write_text("a tree of yours\n")
    (project.parent / "elsewhere").mkdir()
    (project.parent / "elsewhere/notes.txt").write_text("yours\n")
    before = snapshot(project.parent)
    code, _, err = run(capsys, TO, "--work", work)
    assert code == TreeError.exit_code, err
    line = one_line(err)
    assert "carry" in line and "nothing was touched" in line
    assert snapshot(project.parent) == before
    assert stand.looked_up == []  # refused before the index was asked


def test_w1_an_empty_folder_becomes_carrys_own_and_a_marked_one_is_reused(project, stand, capsys):
    given = project / "w"
    given.mkdir()
    code, _, err = run(capsys, TO, "--work", "w")
    assert code == 0, err
    assert (given / workfolder.MARKER).is_file() and (given / "report.md").is_file()
    code, _, err = run(capsys, TO, "--work", "w")  # marked: carry's own, taken again
    assert code == 0, err


# -- TO is a release, refused before it becomes a path ------------------


def test_w2_a_to_that_is_a_path_is_refused_before_any_folder_is_made(project, stand, capsys):
    victim = project.parent / "victim"  # build/carry-../../../../victim lands here
    victim.mkdir()
    (victim / "precious.txt").write_text("not carry's\n")
    before = snapshot(project.parent)
    for _ in range(2):  # the second run deleted what the first wrote there
        code, _, err = run(capsys, "../../../../victim")
        assert code == ConfigError.exit_code, err
        assert "is not a release" in one_line(err)
        assert snapshot(project.parent) == before
    assert stand.looked_up == []


@pytest.mark.parametrize("spelling", SPELLINGS)
def test_w10_a_release_spelled_otherwise_is_refused_naming_the_spelling(
    project, stand, capsys, spelling
):
    before = snapshot(project)
    code, _, err = run(capsys, spelling)
    assert code == ConfigError.exit_code, err
    assert f"did you mean {TO}?" in one_line(err)
    assert snapshot(project) == before and stand.looked_up == []


@pytest.mark.parametrize(
    "spelling", [f"0{FROM}", "{}.{}.0{}".format(*FROM.split(".")), f"{FROM}\n"]
)
def test_a_pinned_release_spelled_otherwise_is_refused_at_once(project, stand, capsys, spelling):
    """In a checkout pinning FROM, a spelling of FROM with leading
    zeros slipped past "pinned already" to the index; refused before it."""
    before = snapshot(project)
    code, _, err = run(capsys, spelling)
    assert code == ConfigError.exit_code, err
    assert f"did you mean {FROM}?" in one_line(err)
    assert snapshot(project) == before and stand.looked_up == []


def test_w10_the_release_and_its_tag_are_taken(project, stand, capsys):
    code, out, err = run(capsys, f"v{TO}")
    assert code == 0, err
    assert out.startswith(f"# vpatch carry {FROM} -> {TO}\n")
    assert (project / f"build/carry-{TO}/report.md").is_file()


@pytest.mark.parametrize(
    "argv",
    [
        ["x" * 5000],  # exit 11 (file name too long) once it became a folder
        [TO, "--from", ""],  # the default FROM, silently
        [TO, "--source", ""],  # the current folder as vLLM's tree
        [TO, "--source", "some/folder"],  # one folder as both FROM's and TO's tree
        [TO, "--from", "0.33"],
    ],
)
def test_bad_input_is_one_line_exit_2_and_touches_nothing(project, stand, capsys, argv):
    (project / "some/folder").mkdir(parents=True)
    before = snapshot(project)
    code, _, err = run(capsys, *argv)
    assert code == ConfigError.exit_code, err
    one_line(err)
    assert snapshot(project) == before and stand.looked_up == []


def test_pr_onto_a_5000_character_release_is_bad_input(project, capsys):
    before = snapshot(project)
    code = cli.main(["pr", "--onto", "9" * 5000, "--offline"])
    assert code == ConfigError.exit_code, capsys.readouterr().err
    assert snapshot(project) == before


# -- a rerun never deletes the last proposal ----------------------------------


def test_w7_a_rerun_of_a_pinned_release_keeps_the_last_proposal(project, stand, capsys):
    code, _, err = run(capsys, TO, "--write")
    assert code == 0, err
    work = project / f"build/carry-{TO}"
    before = snapshot(work)
    assert {"report.md", "proposed.diff"} <= set(before)
    code, _, err = run(capsys, TO)
    assert code == ConfigError.exit_code, err
    assert f"vLLM {TO} is pinned already" in one_line(err)
    assert snapshot(work) == before


def test_w7_a_rerun_moves_the_last_proposal_aside(project, stand, capsys):
    assert run(capsys, TO)[0] == 0
    work = project / f"build/carry-{TO}"
    first = {n: (work / n).read_bytes() for n in ("report.md", "proposed.diff")}
    (work / "report.md").write_bytes(b"# the first proposal, as reviewed\n")
    code, out, err = run(capsys, TO)
    assert code == 0, err
    assert (work / "previous/report.md").read_bytes() == b"# the first proposal, as reviewed\n"
    assert (work / "previous/proposed.diff").read_bytes() == first["proposed.diff"]
    assert f"- the last proposal, moved aside: {work / 'previous'}\n" in out
    assert (work / "report.md").read_text() == out


# -- one carry at a time; a failed one removes what it made ------------------------


def test_a_second_carry_while_one_runs_is_refused(project, stand, capsys):
    assert run(capsys, TO)[0] == 0
    work = project / f"build/carry-{TO}"
    before = snapshot(work)
    with open(work / workfolder.MARKER) as held:  # the first carry, still running
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        code, _, err = run(capsys, TO)
    assert code == TreeError.exit_code, err
    assert "another vpatch carry" in one_line(err)
    assert snapshot(work) == before


def test_a_failed_carry_removes_the_folder_it_made(project, stand, capsys):
    def offline(*a, **kw):
        raise NetworkError("the package index cannot be reached")

    stand.port = offline
    code, _, err = run(capsys, TO)
    assert code == NetworkError.exit_code, err
    assert not (project / "build").exists()


def test_a_release_not_on_the_index_is_found_out_before_anything_is_removed(
    project, stand, capsys, monkeypatch
):
    """With a `.vpatch-carry` mark forged into a folder (or one a
    killed carry left), `carry TO` removed its proposed/, port/ and
    proposed.diff before it found TO is not on the index. TO is looked up
    first, and the folder is left as it was."""
    work = project / f"build/carry-{TO}"
    for rel, text in {
        workfolder.MARKER: "forged\n",
        "proposed.diff": "a diff of mine\n",
        "proposed/notes.txt": "mine\n",
        "port/tree.txt": "mine too\n",
    }.items():
        (work / rel).parent.mkdir(parents=True, exist_ok=True)
        (work / rel).write_text(text)
    before = snapshot(work)

    def nowhere(pins, v, offline=False, say=None):
        stand.looked_up.append(v)
        raise ConfigError(f"the package index has no sdist or x86_64 wheel of vLLM {v}")

    monkeypatch.setattr(carry.pin, "resolve", nowhere)
    code, _, err = run(capsys, TO)
    assert code == ConfigError.exit_code, err
    assert "has no sdist" in one_line(err) and stand.looked_up == [TO]
    assert snapshot(work) == before


def test_a_failed_rerun_keeps_the_last_proposal(project, stand, capsys):
    assert run(capsys, TO)[0] == 0
    work = project / f"build/carry-{TO}"
    last = {n: (work / n).read_bytes() for n in ("report.md", "proposed.diff")}

    def offline(*a, **kw):
        raise NetworkError("the package index cannot be reached")

    stand.port = offline
    assert run(capsys, TO)[0] == NetworkError.exit_code
    assert {n: (work / "previous" / n).read_bytes() for n in last} == last
    assert sorted(p.name for p in work.iterdir()) == [workfolder.MARKER, "previous"]


# -- --continue only from a conflict the carry stopped at ---------------------


def conflict_then(stand: Stand, project: Path) -> None:
    """The port stops on a conflict, as port.port leaves it (a repository in
    port/ with an am session)."""

    def stops(frm, to, *, pins, work, **kw):
        work.mkdir(parents=True)
        git(work, "init", "-q")
        (work / "f").write_text("base\n")
        git(work, "add", "f")
        git(work, "-c", "user.name=t", "-c", "user.email=t@e", "commit", "-qm", "base")
        git(work, "tag", f"vpatch/base-{to}")
        names = [p.name for p in pins.series(frm).patches]
        r = port.Ported(frm, to, work, status=dict.fromkeys(names[:1], "clean"))
        r.status[names[1]] = "conflict"
        r.unresolved = ["f"]
        return r

    stand.port = stops


def test_w3_continue_after_a_killed_carry_is_refused(project, stand, capsys):
    """SIGKILL during the port: the work folder holds a copy and a port tree,
    but no conflict the carry stopped at. `--continue --write` wrote TO
    as `upstream`, every patch dropped (port.resume's NothingToPort)."""
    assert run(capsys, TO)[0] == 0
    work = project / f"build/carry-{TO}"
    (work / "port").mkdir()
    (work / "port/half-made").write_text("a killed port's tree\n")

    def all_dropped(*a, **kw):
        raise port.NothingToPort(f"every patch of {FROM} is already in {TO}; nothing to port")

    stand.resume = all_dropped
    lock_before = (project / DATA / "VERSIONS.lock").read_bytes()
    code, _, err = run(capsys, TO, "--continue", "--write")
    assert code == TreeError.exit_code, err
    line = one_line(err)
    assert "stopped at no conflict" in line and f"`vpatch carry {TO}`" in line
    assert "vpatch port" not in line
    assert (project / DATA / "VERSIONS.lock").read_bytes() == lock_before


def test_w3_continue_with_nothing_there_names_the_carry(project, stand, capsys):
    code, _, err = run(capsys, TO, "--continue")
    assert code == TreeError.exit_code, err
    line = one_line(err)
    assert f"`vpatch carry {TO}`" in line and "vpatch port" not in line
    assert not (project / "build").exists()


def test_a_conflict_is_kept_for_the_person_and_continue_goes_on_from_it(project, stand, capsys):
    conflict_then(stand, project)
    code, out, err = run(capsys, TO, "--work", "w")
    assert code == PatchError.exit_code, err
    work = project / "w"
    assert (work / "port/f").is_file() and (work / workfolder.STATE).is_file()
    assert out.endswith(f". vpatch carry {TO} --work w --continue\n")  # "Next" names --work
    # a fresh run does not throw the person's conflict away
    code, _, err = run(capsys, TO, "--work", "w")
    assert code == TreeError.exit_code and "--continue" in one_line(err)
    seen = []

    def resumed(frm, to, *, pins, work, **kw):
        seen.append((frm, to, work))
        series = pins.series(frm)
        return port.Ported(frm, to, work, status={p.name: "ported" for p in series.patches})

    stand.resume = resumed
    code, _, err = run(capsys, TO, "--work", "w", "--continue")
    assert code == 0, err
    assert seen == [(FROM, TO, Path("w/port"))]
    assert not (work / workfolder.STATE).exists() and not (work / "port").exists()


def test_continue_refuses_a_port_tree_that_is_not_the_one_it_stopped_at(project, stand, capsys):
    conflict_then(stand, project)
    assert run(capsys, TO)[0] == PatchError.exit_code
    tree = project / f"build/carry-{TO}/port"
    git(tree, "tag", "-f", f"vpatch/base-{TO}", "HEAD~0")  # same commit: still its own
    (tree / "f").write_text("other\n")
    git(tree, "-c", "user.name=t", "-c", "user.email=t@e", "commit", "-qam", "other")
    git(tree, "tag", "-f", f"vpatch/base-{TO}")  # a baseline the carry did not make
    stand.resume = lambda *a, **kw: pytest.fail("resumed a port the carry did not stop at")
    code, _, err = run(capsys, TO, "--continue")
    assert code == TreeError.exit_code, err


# -- --write writes only what it proposed, on the checkout it copied -----------


def add_a_variant(project: Path) -> None:
    (project / DATA / "patches/mla-detect-kimi-k2-eagle-drafters/9.9.9.patch").write_text("x\n")


def remove_a_variant(project: Path) -> None:
    first = sorted((project / DATA / "patches/mla-detect-kimi-k2-eagle-drafters").iterdir())[0]
    first.unlink()


@pytest.mark.parametrize(
    ("edit", "named"),
    [
        (lambda p: (p / "README.md").write_text("edited during the run\n"), "README.md"),
        (
            lambda p: (p / carry.RULES_TOML).open("a").write("# mine\n"),
            carry.RULES_TOML,
        ),
        (add_a_variant, "mla-detect-kimi-k2-eagle-drafters/9.9.9.patch"),
        (remove_a_variant, "mla-detect-kimi-k2-eagle-drafters/"),
    ],
)
def test_w4_write_refuses_when_the_checkout_changed_while_it_ran(
    project, stand, capsys, edit, named
):
    stand.during_lint = lambda: edit(project)
    lock_before = (project / DATA / "VERSIONS.lock").read_bytes()
    code, _, err = run(capsys, TO, "--write")
    edited = snapshot(project)
    assert code == TreeError.exit_code, err
    line = one_line(err)
    assert named in line and "nothing was written" in line
    assert (project / DATA / "VERSIONS.lock").read_bytes() == lock_before
    # the edit is kept as the person made it
    assert snapshot(project) == edited
    report = (project / f"build/carry-{TO}/report.md").read_text()
    assert "Written into" not in report and f"then `vpatch carry {TO} --write`" not in report


def test_w4_the_report_names_the_checkout_it_wrote(project, stand, capsys):
    variant = f"{DATA}/patches/mla-detect-kimi-k2-eagle-drafters/{TO}.patch"

    def with_a_variant(frm, to, *, pins, work, **kw):
        (pins.root.parent.parent.parent / variant).write_text("TO's own\n")
        return port.Ported(frm, to, work, status={"0001-x.patch": "merged"})

    stand.port = with_a_variant
    code, out, err = run(capsys, TO, "--write")
    assert code == 0, err
    assert f"## Written into the checkout {project}\n" in out
    assert f"- {DATA}/VERSIONS.lock\n" in out and f"- {variant}\n" in out
    assert (project / variant).read_text() == "TO's own\n"


def test_write_brings_the_tiers_tables_the_carry_wrote_on_its_copy(
    project, stand, capsys, monkeypatch
):
    """The tier's docs are copied with the rest, the checkout's tier program
    writes their tables on the copy (from the copy's lock), and --write
    brings them back with the rest: nothing is left for `make docs`."""
    doc = "docs/tier-table.md"
    (project / doc).write_text("| releases |\n| 0.1.0 |\n")
    ran = []

    def write_tier(root, copy):
        ran.append((root, copy.resolve()))
        pinned = lock.load(copy / DATA / "VERSIONS.lock").versions()
        (copy / doc).write_text("| releases |\n" + "".join(f"| {v} |\n" for v in pinned))

    monkeypatch.setattr(carry.docs, "tier_paths", lambda root: [doc])
    monkeypatch.setattr(carry.docs, "write_tier", write_tier)
    code, out, err = run(capsys, TO, "--write")
    assert code == 0, err
    assert ran == [(project, project / f"build/carry-{TO}/proposed")]
    assert f"| {TO} |\n" in (project / doc).read_text()  # the copy's lock: TO pinned
    assert f"- {doc}\n" in out.split("## Written into the checkout")[1]


def test_a_carry_from_another_checkout_is_refused(project, stand, capsys, tmp_path, monkeypatch):
    other = tmp_path / "other-clone"
    shutil.copytree(project / "src", other / "src")
    shutil.copyfile(project / "pyproject.toml", other / "pyproject.toml")
    monkeypatch.chdir(other)
    before = snapshot(project)
    code, _, err = run(capsys, TO, "--write")
    assert code == ConfigError.exit_code, err
    line = one_line(err)
    assert str(project) in line and str(other) in line
    assert snapshot(project) == before and not (other / "build").exists()


# -- the probes, every patch's --------------------------------------------------------


def test_every_patchs_probe_is_rerun_on_to_ported_or_not(project, stand, capsys, tmp_path):
    """eagle-alias-... serves only older releases than FROM: FROM's series
    does not port it, and its probe's files going away in TO is still reported."""
    slug = "eagle-alias-kimi-k2-5-media-placeholder-token-id"
    frm = tmp_path / "from-files"
    (frm / "vllm/v1/spec_decode").mkdir(parents=True)
    (frm / "vllm/v1/spec_decode/eagle.py").write_text("x = 1\n")
    stand.files = {FROM: frm}
    code, out, err = run(capsys, TO)
    assert code == 0, err
    assert f"- {slug}: lacks it in {FROM}, code gone in {TO}\n" in out


def test_a_missing_variant_file_is_the_same_patch_error_as_everywhere(project, stand, capsys):
    """A variant file patches.toml names, missing, gave exit 11
    (cannot read a patch) from carry and exit 5 (PatchError, "has no
    file") from every other command. One answer: 5, the same line."""
    slug = PINS.patchset.slugs[-1]
    var = PINS.patchset.variants[slug][-1]
    (project / DATA / "patches" / slug / f"{var.first}.patch").unlink()
    before = snapshot(project)
    code, _, err = run(capsys, TO)
    assert code == PatchError.exit_code, err
    line = one_line(err)
    assert f"[{slug}]: variant {var.span} has no file {slug}/{var.first}.patch" in line, line
    assert snapshot(project) == before and stand.looked_up == []
    assert cli.main(["series", var.last, "--out", str(project / "s")]) == PatchError.exit_code
    assert one_line(capsys.readouterr().err).endswith(line.split("error: ", 1)[1])


def _variant(which: str):
    """A variant of FROM's series, or one that serves only older releases."""
    ps = PINS.patchset
    found = [v for s in ps.slugs for v in ps.variants[s]]
    if which == "from":
        return next(v for v in reversed(found) if v.covers(FROM))
    return next(v for v in found if not v.covers(FROM))


@pytest.mark.parametrize("which", ["from", "older"])
def test_a_missing_variant_file_is_refused_before_the_index_is_asked(
    project, monkeypatch, capsys, which
):
    """Nothing stood in but the index: a variant file patches.toml names,
    missing, let the carry pin TO (its sdist and wheel downloaded) and fail
    later, exit 2 from the tier's docs. The checkout's patch set is read
    first: exit 5, the line every other command gives, no request made."""
    from support.simple import configured

    var = _variant(which)
    (project / DATA / "patches" / var.slug / f"{var.first}.patch").unlink()
    before = snapshot(project)
    with configured(monkeypatch) as index:
        code, _, err = run(capsys, TO)
    assert code == PatchError.exit_code, err
    line = one_line(err)
    assert f"[{var.slug}]: variant {var.span} has no file {var.slug}/{var.first}.patch" in line
    assert index.requests == [] and snapshot(project) == before
