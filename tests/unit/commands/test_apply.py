"""`vpatch fetch / apply / status / unapply` as commands: releases from the
lock, the series of a release, where the tree goes. The engine itself is
tested in test_tree.py."""

import os
import shutil
from pathlib import Path

import pytest
from support import BASE, git
from support import synthetic as S
from vpatch import cli, lock
from vpatch.commands import apply
from vpatch.errors import ConfigError, TreeError, UnsafePathError


def run(pins, release_dir, series, dest):
    return apply.apply("9.9.0", dest=dest, source=str(release_dir), series_dir=series, pins=pins)


def test_apply_makes_baseline_tag_and_one_commit_per_patch(
    pins, release_dir, good_series, tmp_path
):
    dest = tmp_path / "tree"
    result = run(pins, release_dir, good_series, dest)
    assert result.applied == ["0001-step-1.patch", "0002-step-2.patch"]
    assert result.version == "9.9.0" and result.dest == dest
    log = git(dest, "log", "--format=%s", "--reverse").splitlines()
    assert log[1:] == ["model: first change", "config: allow deepseek"]
    assert git(dest, "rev-parse", "vpatch/base-9.9.0^{commit}") == git(dest, "rev-parse", "HEAD~2")


def test_patch_escaping_the_tree_is_refused_before_writing(pins, release_dir, tmp_path):
    series = tmp_path / "evil"
    series.mkdir()
    (series / "series").write_text("0001-evil.patch\n")
    (series / "0001-evil.patch").write_text(
        "From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\n"
        "From: x <x@example.com>\nDate: Thu, 1 Jan 2026 00:00:00 +0000\nSubject: evil\n\n"
        "---\ndiff --git a/../outside.txt b/../outside.txt\nnew file mode 100644\n"
        "index 0000000..e69de29\n--- /dev/null\n+++ b/../outside.txt\n@@ -0,0 +1 @@\n+pwned\n"
    )
    with pytest.raises(UnsafePathError, match="escapes"):
        run(pins, release_dir, series, tmp_path / "tree")
    assert not (tmp_path / "outside.txt").exists()
    assert not (tmp_path / "tree").exists()


def test_status_and_unapply(pins, release_dir, good_series, tmp_path):
    dest = tmp_path / "tree"
    run(pins, release_dir, good_series, dest)
    git(dest, "reset", "-q", "--hard", "HEAD~1")
    st = apply.status(dest, good_series, pins=pins)
    assert [(p.name, p.applied) for p in st.patches] == [
        ("0001-step-1.patch", True),
        ("0002-step-2.patch", False),
    ]
    assert apply.unapply(dest, good_series, pins=pins) == apply.Unapplied(dest, "9.9.0", 1)
    assert (dest / "vllm/model.py").read_text() == BASE["vllm/model.py"]


def test_unknown_release_lists_pinned(pins, release_dir, good_series, tmp_path):
    with pytest.raises(ConfigError, match=r"unknown release '1\.2\.3'; pinned: 9\.8\.0, 9\.9\.0"):
        apply.apply("1.2.3", dest=tmp_path / "t", series_dir=good_series, pins=pins)


def test_status_of_a_plain_folder_is_a_clear_error(tmp_path):
    with pytest.raises(TreeError, match="not a vpatch tree"):
        apply.status(tmp_path, pins=lock.load())


def test_release_without_series_says_it_needs_none(pins, tmp_path):
    with pytest.raises(ConfigError, match=r"vLLM 10\.0\.0 needs no patches \(status upstream"):
        apply.apply("10.0.0", dest=tmp_path / "t", pins=pins)
    assert not (tmp_path / "t").exists()


# -- fetch (the real lock's releases, the source from a folder) ------------------------

RELEASE = lock.load().default().version  # any pinned release with a series


def test_fetch_copies_a_folder_source_into_a_new_dest(release_dir, tmp_path):
    dest = tmp_path / "new" / "dest"
    got = apply.fetch(RELEASE, source=str(release_dir), dest=dest, pins=lock.load())
    assert (got.release.version, got.where, got.what) == (RELEASE, dest, str(release_dir))
    assert got.lines() == [f"vLLM {RELEASE} from {release_dir} -> {dest}"]
    files = sorted(p.relative_to(dest).as_posix() for p in dest.rglob("*") if p.is_file())
    assert files == sorted(BASE)
    assert not (dest / ".git").exists()  # a fetch is the source alone, no tree


def test_fetch_refuses_a_folder_that_is_not_empty(release_dir, tmp_path):
    dest = tmp_path / "dest"
    dest.mkdir()
    (dest / "keep.txt").write_text("mine")
    with pytest.raises(TreeError, match="is not an empty folder"):
        apply.fetch(RELEASE, source=str(release_dir), dest=dest, pins=lock.load())
    assert [p.name for p in dest.iterdir()] == ["keep.txt"]


def test_failed_fetch_leaves_no_folder_and_empties_a_given_one(tmp_path):
    missing = str(tmp_path / "no-such-source")
    with pytest.raises(ConfigError, match="no such folder"):
        apply.fetch(RELEASE, source=missing, dest=tmp_path / "made", pins=lock.load())
    assert not (tmp_path / "made").exists()  # made by fetch: removed again
    (tmp_path / "given").mkdir()
    with pytest.raises(ConfigError, match="no such folder"):
        apply.fetch(RELEASE, source=missing, dest=tmp_path / "given", pins=lock.load())
    assert (tmp_path / "given").is_dir() and not any((tmp_path / "given").iterdir())


def test_fetch_without_dest_needs_an_archive_source(release_dir):
    with pytest.raises(ConfigError, match="has nothing to cache; give --dest DIR"):
        apply.fetch(RELEASE, source=str(release_dir), pins=lock.load())
    with pytest.raises(ConfigError, match="has nothing to cache"):
        apply.fetch(RELEASE, source="git", pins=lock.load())


# -- relative destinations (the synthetic release: an sdist in the cache) ---------------


@pytest.fixture
def synthetic(tmp_path, monkeypatch) -> S.Release:
    """support.synthetic's release as vpatch's data, its sdist and wheel in
    the download cache (so --offline needs no index)."""
    rel = S.make_release(tmp_path / "world")
    downloads = tmp_path / "cache" / "downloads"
    downloads.mkdir(parents=True)
    for f in (rel.sdist, rel.wheel):
        shutil.copy(f, downloads)
    monkeypatch.setenv("VPATCH_ROOT", str(rel.root))
    monkeypatch.setenv("VPATCH_CACHE", str(tmp_path / "cache"))
    return rel


def patched_release() -> dict[str, bytes]:
    """The synthetic release with its whole series applied."""
    files = S.source_files()
    for _, changes in S.default_steps():
        files.update(changes)
    return files


def holds_exactly(tree: Path, files: dict[str, bytes]) -> None:
    """tree (.git aside) is these files and the folders they need, nothing else."""
    found = {p.relative_to(tree).as_posix(): p for p in tree.rglob("*") if ".git" not in p.parts}
    folders = {str(Path(f).parent) for f in files} - {"."}
    folders |= {str(p) for f in folders for p in Path(f).parents if str(p) != "."}
    assert sorted(found) == sorted([*files, *folders])
    assert {f: found[f].read_bytes() for f in files} == files


@pytest.mark.parametrize(
    ("cwd", "dest", "where"),
    [
        ("", "a/b", "a/b"),  # the reported case: it left an empty a/b/a/b in the tree
        ("x/y", "../../t/a/b", "t/a/b"),  # from another folder: it wrote t/a/t/a/b, outside
        ("x", "./a/../a/b", "x/a/b"),
    ],
)
def test_apply_with_a_relative_dest_writes_the_release_and_the_series_only(
    synthetic, tmp_path, monkeypatch, cwd, dest, where
):
    box = tmp_path / "box"
    (box / cwd).mkdir(parents=True)
    (box / "x").mkdir(exist_ok=True)
    monkeypatch.chdir(box / cwd)
    assert cli.main(["apply", "9.9.0", "--dest", dest, "--offline"]) == 0
    holds_exactly(box / where, patched_release())
    assert git(box / where, "rev-list", "--count", "vpatch/base-9.9.0..HEAD").strip() == "3"
    # nothing beside the tree either: the box holds the folders made above,
    # the tree's own folders, and the tree
    tree = box / where
    found = {p for p in box.rglob("*") if p != tree and tree not in p.parents}
    made = {box / "x", box / "x" / "y"} if cwd == "x/y" else {box / "x"}
    assert found == made | {p for p in tree.parents if box in p.parents}


def test_apply_with_a_relative_series(synthetic, tmp_path, monkeypatch):
    box = tmp_path / "box"
    shutil.copytree(synthetic.series, box / "mine" / "series")
    monkeypatch.chdir(box)
    # git am runs in box/out/t: there mine/series/... named nothing
    args = ["--dest", "out/t", "--series", "mine/series", "--offline"]
    assert cli.main(["apply", "9.9.0", *args]) == 0
    holds_exactly(box / "out/t", patched_release())
    st = apply.status(Path("out/t"), Path("mine/series"), pins=lock.load())
    assert all(p.applied for p in st.patches) and not st.dirty and not st.extra
    assert cli.main(["unapply", "out/t"]) == 0
    holds_exactly(box / "out/t", S.source_files())


# -- fetch --dest, then apply there ---------------------------------------------------


def fetched(tmp_path: Path, source: str = "auto") -> Path:
    where = tmp_path / "fetched"
    assert cli.main(["fetch", "9.9.0", "--dest", str(where), "--source", source, "--offline"]) == 0
    return where


def test_apply_makes_the_tree_in_a_folder_fetch_filled(synthetic, tmp_path, capsys):
    """What `vpatch fetch --dest X` wrote is the release as the lock pins
    it: apply checks that and makes X the tree, with the very commits a
    fresh tree gets."""
    x = fetched(tmp_path)
    assert cli.main(["apply", "9.9.0", "--dest", str(x), "--offline"]) == 0
    assert "applied 3 patches" in capsys.readouterr().out
    holds_exactly(x, patched_release())
    fresh = tmp_path / "fresh"
    assert cli.main(["apply", "9.9.0", "--dest", str(fresh), "--offline"]) == 0
    for ref in ("vpatch/base-9.9.0", "HEAD"):
        assert git(x, "rev-parse", ref) == git(fresh, "rev-parse", ref)
    assert git(x, "status", "--porcelain") == ""
    # the wheel's files, applied with the same --source, are accepted too
    w = tmp_path / "fetched-wheel"
    assert cli.main(["fetch", "9.9.0", "--dest", str(w), "--source", "wheel", "--offline"]) == 0
    assert cli.main(["apply", "9.9.0", "--dest", str(w), "--source", "wheel", "--offline"]) == 0
    assert git(w, "rev-list", "--count", "vpatch/base-9.9.0..HEAD").strip() == "3"


def _extra(x: Path) -> str:
    (x / "vllm" / "mine.py").write_text("x = 1\n")
    return "vllm/mine.py is not in the release"


def _missing(x: Path) -> str:
    (x / "README.md").unlink()
    return "README.md is missing"


def _changed(x: Path) -> str:
    (x / "vllm" / "config.py").write_bytes(b"allow = ['llama']  \n")
    return "vllm/config.py differs (content)"


def _mode(x: Path) -> str:
    (x / "vllm" / "model.py").chmod(0o755)
    return "vllm/model.py differs (mode)"


def _empty_folder(x: Path) -> str:
    (x / "vllm" / "empty").mkdir()
    return "vllm/empty is not in the release"


def _fifo(x: Path) -> str:
    os.mkfifo(x / "vllm" / "pipe")  # reading it would block: it must not be opened
    return "vllm/pipe is not in the release"


def _symlink(x: Path) -> str:
    (x / "vllm" / "config.py").unlink()
    (x / "vllm" / "config.py").symlink_to("model.py")
    return "vllm/config.py differs (content)"


def state(top: Path) -> dict[str, tuple]:
    """Every entry under top: its mode, and its bytes or link target (a fifo
    is not read: S.snapshot would block on it)."""
    out: dict[str, tuple] = {}
    for p in sorted(top.rglob("*")):
        st = p.lstat()
        data = os.readlink(p) if p.is_symlink() else p.read_bytes() if p.is_file() else b""
        out[p.relative_to(top).as_posix()] = (st.st_mode, st.st_mtime_ns, data)
    return out


@pytest.mark.parametrize(
    "change", [_extra, _missing, _changed, _mode, _empty_folder, _fifo, _symlink]
)
def test_a_fetched_folder_that_differs_is_refused_and_left_as_it_was(
    synthetic, tmp_path, capsys, change
):
    x = fetched(tmp_path)
    why = change(x)
    before = state(x)
    capsys.readouterr()
    assert cli.main(["apply", "9.9.0", "--dest", str(x), "--offline"]) == 6  # TreeError
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("vpatch: error: ") and why in err[-1]
    assert "is not a vpatch tree, and does not hold vLLM 9.9.0" in err[-1]
    assert state(x) == before  # mtimes too: nothing was rewritten


def test_another_source_than_fetch_used_is_refused(synthetic, tmp_path, capsys):
    x = fetched(tmp_path, "wheel")  # the wheel has no README.md
    before = S.snapshot(x)
    assert cli.main(["apply", "9.9.0", "--dest", str(x), "--offline"]) == 6
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "as --source auto gives it (README.md is missing)" in err
    assert "accepted with the same --source" in err
    assert S.snapshot(x) == before


def test_a_series_that_fails_leaves_the_fetched_folder_as_it_was(synthetic, tmp_path, capsys):
    bad = tmp_path / "bad"
    shutil.copytree(synthetic.series, bad)
    p = next(bad.glob("0002-*.patch"))
    p.write_text(p.read_text().replace("-allow = ['llama']", "-allow = ['nobody']"))
    x = fetched(tmp_path)
    before = S.snapshot(x)
    assert cli.main(["apply", "9.9.0", "--dest", str(x), "--series", str(bad), "--offline"]) == 5
    assert "0002-config-allow-deepseek.patch does not apply" in capsys.readouterr().err
    assert S.snapshot(x) == before  # no .git, the fetched files (a patched one put back)


def test_a_foreign_folder_that_cannot_be_checked_is_still_refused(synthetic, tmp_path, capsys):
    x = tmp_path / "mine"
    x.mkdir()
    (x / "notes.txt").write_text("mine\n")
    for f in (tmp_path / "cache" / "downloads").iterdir():
        f.unlink()  # nothing to compare with, offline
    assert cli.main(["apply", "9.9.0", "--dest", str(x), "--offline"]) == 6
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "is not a vpatch tree" in err and "it could not be checked: " in err
    assert sorted(p.name for p in x.iterdir()) == ["notes.txt"]


# -- unapply keeps what is yours; status finds make's tree -------------------------------


def test_unapply_refuses_a_commit_of_yours_and_names_it(patched_tree, good_series, pins, capsys):
    """`vpatch unapply` dropped the user's own commit ("my precious work")
    and said `back to the baseline (3 commits removed)`."""
    (patched_tree / "MYWORK.txt").write_text("precious\n")
    git(patched_tree, "add", "MYWORK.txt")
    git(patched_tree, "commit", "-qm", "my precious work")
    head = git(patched_tree, "rev-parse", "HEAD")
    sha = head[:10]
    with pytest.raises(TreeError, match=rf"{sha} 'my precious work'; unapply would drop it"):
        apply.unapply(patched_tree, good_series, pins=pins)
    assert git(patched_tree, "rev-parse", "HEAD") == head
    done = apply.unapply(patched_tree, good_series, discard=True, pins=pins)
    assert (done.version, done.removed) == ("9.9.0", 3)
    assert not (patched_tree / "MYWORK.txt").exists()


def test_unapply_refuses_a_series_commit_you_amended(patched_tree, good_series, pins):
    """The edit loop amends a patch's commit, keeping its subject: until it
    is exported, the change is the user's alone."""
    (patched_tree / "vllm/config.py").write_text("allow = ['llama', 'deepseek', 'mine']\n")
    git(patched_tree, "commit", "-qa", "--amend", "--no-edit")
    with pytest.raises(TreeError, match="'config: allow deepseek', changed since it was applied"):
        apply.unapply(patched_tree, good_series, pins=pins)
    git(patched_tree, "reset", "-q", "--hard", "HEAD~1")
    (patched_tree / "vllm/model.py").write_text("reworded, same subject\n")
    git(patched_tree, "commit", "-qam", "config: allow deepseek")  # its subject, another change
    with pytest.raises(TreeError, match="changed since it was applied"):
        apply.unapply(patched_tree, good_series, pins=pins)


def test_unapply_of_the_series_alone_needs_no_flag(patched_tree, good_series, pins, capsys):
    """The series' own commits (the same change, whatever its line numbers)
    go without a word."""
    done = apply.unapply(patched_tree, good_series, pins=pins)
    assert (done.version, done.removed) == ("9.9.0", 2)


def test_unapply_on_the_command_line(patched_tree, good_series, capsys):
    (patched_tree / "MYWORK.txt").write_text("precious\n")
    git(patched_tree, "add", "MYWORK.txt")
    git(patched_tree, "commit", "-qm", "my precious work")
    args = ["unapply", str(patched_tree), "--series", str(good_series)]
    assert cli.main(args) == TreeError.exit_code
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--discard-commits" in err[0]
    assert cli.main([*args, "--discard-commits"]) == 0
    assert "(3 commits removed)" in capsys.readouterr().out


def test_status_without_a_folder_takes_the_tree_make_apply_made(
    pins, release_dir, good_series, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match=r"no tree given, and there is no build/vllm-9.9.0 here"):
        apply.status(None, good_series, pins=pins)
    dest = Path("build/vllm-9.9.0")
    apply.apply("9.9.0", dest=dest, source=str(release_dir), series_dir=good_series, pins=pins)
    st = apply.status(None, good_series, pins=pins)
    assert st.dest == dest and all(p.applied for p in st.patches)


def test_a_folder_holding_one_note_is_refused_for_the_note(synthetic, tmp_path, capsys):
    """It was refused for `README.md is missing`, the first name in sorted
    order, which says nothing of what the folder is."""
    x = tmp_path / "mine"
    x.mkdir()
    (x / "note.txt").write_text("mine\n")
    assert cli.main(["apply", "9.9.0", "--dest", str(x), "--offline"]) == 6
    assert "(note.txt is not in the release)" in capsys.readouterr().err
    assert sorted(p.name for p in x.iterdir()) == ["note.txt"]


# -- the apply path: one pipeline, each file read once -------------------------------------

FLOW = ("commands", "checkout", "sources", "gitutil")  # the layers above the core's leaves


def trace(run) -> tuple[list[str], list[str]]:
    """run() under a profiler: the vpatch modules control passes through, in
    order (a module once per stay; a package's modules, sources' and
    gitutil's, as one), those of FLOW alone; and the vpatch functions
    called, by module.name."""
    import sys

    import vpatch

    pkg = str(Path(vpatch.__file__).parent)

    def module(frame) -> str | None:
        while frame is not None and not frame.f_code.co_filename.startswith(pkg):
            frame = frame.f_back
        if frame is None:
            return None
        name = Path(frame.f_code.co_filename).relative_to(pkg).with_suffix("").as_posix()
        name = name.replace("/", ".").removesuffix(".__init__")
        head = name.split(".")[0]
        return head if head in ("sources", "gitutil") else name

    seq: list[str] = []
    calls: list[str] = []

    def profile(frame, event, _):
        if event not in ("call", "return"):
            return
        m = module(frame if event == "call" else frame.f_back)
        if event == "call" and m and frame.f_code.co_filename.startswith(pkg):
            calls.append(f"{m}.{frame.f_code.co_name}")
        if m and m.split(".")[0] in FLOW and (not seq or seq[-1] != m):
            seq.append(m)

    sys.setprofile(profile)
    try:
        run()
    finally:
        sys.setprofile(None)
    return seq, calls


def returns(seq: list[str]) -> int:
    """How often control comes back to a module it had left."""
    return sum(m in seq[:i] for i, m in enumerate(seq))


def test_a_new_tree_is_one_pipeline(synthetic, tmp_path):
    """`vpatch apply` into a new folder: resolve the source, materialize it,
    commit the baseline, apply the series, each stage one call, and each
    patch file read once (no reread for its date: git am gets Patch.date).
    A review measured this trace before: 27 returns to a module of FLOW it
    had left (checkout and gitutil taking turns per step, sources.resolve
    three times); the straight pipeline makes 9. The bound is half."""
    import builtins
    import io

    pins = lock.load()
    said: list[str] = []
    opened: list[str] = []
    real = io.open

    def counting(file, *a, **kw):
        if isinstance(file, (str, Path)) and str(file).endswith(".patch"):
            opened.append(Path(file).name)
        return real(file, *a, **kw)

    def run():
        apply.apply("9.9.0", dest=tmp_path / "t", offline=True, say=said.append, pins=pins)

    with pytest.MonkeyPatch.context() as m:
        m.setattr(io, "open", counting)
        m.setattr(builtins, "open", counting)
        seq, calls = trace(run)
    assert returns(seq) <= 27 // 2, " > ".join(seq)
    for stage in ("resolve", "materialize", "baseline", "am_each"):
        assert sum(c.endswith(f".{stage}") for c in calls) == 1, stage
    series = pins.series("9.9.0")
    assert series is not None and said[-len(series.patches) :] == [
        f"applying {p.name}" for p in series.patches
    ]
    assert sorted(opened) == sorted(p.path.name for p in series.patches)  # each once
