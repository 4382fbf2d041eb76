"""port: FROM's series carried to TO by 3-way merge, on synthetic releases
given as folders."""

from pathlib import Path

import pytest
from support import BASE, change, git, named_series, publish, write_tree
from vpatch import lock, quilt
from vpatch.errors import PatchError, TreeError
from vpatch.maintain import port

MODEL = BASE["vllm/model.py"]
CONFIG = 'allow = [\n    "llama",\n]\n'
FROM = {**BASE, "vllm/config.py": CONFIG}
STEPS = [
    ("model: change five", {"vllm/model.py": change(MODEL, "line 5\n", "line five\n")}),
    ("config: allow deepseek", {"vllm/config.py": change(CONFIG, "]", '    "deepseek",\n]')}),
]
NAMES = ["0001-model-change-five.patch", "0002-config-allow-deepseek.patch"]
META = """
["model-change-five"]
eagle3 = true

["config-allow-deepseek"]
probe = [{ file = "vllm/config.py", list = "allow", includes = ["deepseek"] }]
"""


@pytest.fixture
def root(tmp_path) -> Path:
    """A repository root: VERSIONS.lock pinning 9.8.0 (with a series) and
    10.0.0 (without), the patch set (9.8.0's variants), FROM's source."""
    root = tmp_path / "root"
    (root / "patches").mkdir(parents=True)
    (root / "patches/patches.toml").write_text(META)
    publish(root, "9.8.0", named_series(tmp_path / "w", tmp_path / "s", FROM, STEPS, NAMES))
    rels = [
        lock.Release("9.8.0", "v9.8.0", "abc1234", "patched"),
        lock.Release("10.0.0", "v10.0.0", "def5678", "patched"),
    ]
    lock.save(lock.Lock({r.version: r for r in rels}, root / "VERSIONS.lock"))
    write_tree(tmp_path / "from", FROM)
    return root


def run(root: Path, to_files: dict[str, str], to_version: str = "10.0.0", **kw) -> port.Ported:
    to = write_tree(root.parent / "to", to_files)
    pins = lock.load(root / "VERSIONS.lock")
    out = port.port(
        "9.8.0",
        to_version,
        pins=pins,
        work=root.parent / "work",
        from_source=str(root.parent / "from"),
        to_source=str(to),
        meta_path=root / "patches/patches.toml",
        **kw,
    )
    holds_its_files(pins)
    return out


def holds_its_files(pins: lock.Lock) -> None:
    """The lock a port was handed is what its files say after it: the
    patch set it recorded into and TO's status (its caller reads no file again)."""
    fresh = lock.load(pins.path)
    assert pins.releases == fresh.releases and pins.patchset == fresh.patchset


def spans(root: Path) -> dict[str, list[str]]:
    ps = lock.load(root / "VERSIONS.lock").patchset
    return {s: [v.span for v in vs] for s, vs in ps.variants.items()}


def ported(root: Path, version: str = "10.0.0") -> list[quilt.Patch]:
    series = lock.load(root / "VERSIONS.lock").series(version)
    return series.patches if series else []


def test_clean_port_extends_the_spans(root):
    moved = {**FROM, "vllm/model.py": "new\n" + MODEL}  # at an offset: still clean
    r = run(root, moved)
    assert r.status == dict.fromkeys(NAMES, "clean")
    assert r.variants == dict.fromkeys(["model-change-five", "config-allow-deepseek"], "extended")
    assert r.into == root / "patches" and r.names == NAMES
    # the same change on the next release: 9.8.0's variant serves it too
    assert spans(root) == dict.fromkeys(
        ["model-change-five", "config-allow-deepseek"], ["9.8.0:10.0.0"]
    )
    pinned = lock.load(root / "VERSIONS.lock").get("10.0.0")
    assert pinned.status == "patched"
    assert not (root.parent / "work").exists()  # removed after a clean port
    # the message (DEP-3 fields, date, author) is FROM's, byte for byte
    old = ported(root, "9.8.0")
    new = ported(root)
    assert [(p.author, p.date, p.message) for p in new] == [
        (p.author, p.date, p.message) for p in old
    ]
    assert [p.changes() for p in new] == [p.changes() for p in old]


def test_merged_when_the_context_moved_on(root):
    to = {**FROM, "vllm/model.py": change(MODEL, "line 3\n", "line three\n")}
    r = run(root, to, keep=True)
    assert r.status[NAMES[0]] == "merged"
    text = git(root.parent / "work", "show", "HEAD~1:vllm/model.py")
    assert "line three\nline 4\nline five\n" in text
    assert git(root.parent / "work", "tag", "-l").split() == [
        "vpatch/base-10.0.0",
        "vpatch/from-9.8.0",
    ]


def test_two_appends_to_one_list_merge_ours_first(root):
    to = {**FROM, "vllm/config.py": change(CONFIG, "]", '    "qwen",\n]')}
    r = run(root, to)
    assert r.status[NAMES[1]] == "merged"
    assert r.variants == {"model-change-five": "extended", "config-allow-deepseek": "new"}
    assert spans(root)["config-allow-deepseek"] == ["9.8.0", "10.0.0"]
    new = ported(root)[1]
    assert new.changes() == [("vllm/config.py", [], ['    "deepseek",\n'])]
    assert '     "qwen",\n+    "deepseek",\n' in new.path.read_text()
    assert new.path == root / "patches/config-allow-deepseek/10.0.0.patch"


def test_dropped_when_the_release_has_it(root):
    to = {
        **FROM,
        "vllm/model.py": change(MODEL, "line 5\n", "line five\n"),  # the same change
        "vllm/config.py": 'allow = ["deepseek", "llama"]\n',  # its own way: the probe
    }
    with pytest.raises(PatchError, match="already in 10.0.0; nothing to port"):
        run(root, to)
    assert not (root.parent / "work").exists()


def test_one_dropped_one_ported(root):
    to = {**FROM, "vllm/config.py": 'allow = ["deepseek", "llama"]\n'}
    r = run(root, to)
    assert r.status == {NAMES[0]: "clean", NAMES[1]: "dropped"}
    assert [p.name for p in ported(root)] == NAMES[:1]
    assert spans(root)["config-allow-deepseek"] == ["9.8.0"]


def test_conflict_is_left_for_a_person_then_continued(root):
    to = {**FROM, "vllm/model.py": change(MODEL, "line 5\n", "line 5 upstream\n")}
    r = run(root, to)
    work = root.parent / "work"
    assert r.conflict == NAMES[0] and r.unresolved == ["vllm/model.py"]
    assert r.into is None and ported(root) == []
    text = (work / "vllm/model.py").read_text()
    assert "<<<<<<<" in text and "||||||| " in text  # diff3: the base is shown
    with pytest.raises(TreeError, match="git am is still in progress"):
        port.resume("9.8.0", "10.0.0", pins=lock.load(root / "VERSIONS.lock"), work=work)
    # a person resolves, then lets git am carry on with the queued rest
    (work / "vllm/model.py").write_text(change(MODEL, "line 5\n", "line five upstream\n"))
    git(work, "add", "vllm/model.py")
    git(work, "am", "--continue")
    pins = lock.load(root / "VERSIONS.lock")
    done = port.resume("9.8.0", "10.0.0", pins=pins, work=work)
    assert done.status == dict.fromkeys(NAMES, "ported")
    holds_its_files(pins)
    p = ported(root)[0]
    assert p.changes() == [("vllm/model.py", ["line 5 upstream\n"], ["line five upstream\n"])]
    assert not work.exists()


def test_existing_work_tree_is_refused(root):
    (root.parent / "work").mkdir()
    (root.parent / "work/file").write_text("mine\n")
    with pytest.raises(TreeError, match="exists"):
        run(root, FROM)
    assert (root.parent / "work/file").read_text() == "mine\n"


@pytest.mark.parametrize(("eagle3", "status"), [(True, "patched"), (False, "upstream-fix")])
def test_a_release_not_in_the_lock_is_pinned_as_its_series_makes_it(
    root, monkeypatch, eagle3, status
):
    """patched when its series carries part of EAGLE-3 itself (a patch with
    `eagle3 = true`), else upstream-fix (PatchSet.status)."""
    toml = root / "patches/patches.toml"
    toml.write_text(toml.read_text().replace("eagle3 = true\n", "eagle3 = true\n" * eagle3))
    new = lock.Release("10.1.0", "v10.1.0", "0a1b2c3", "unpinned")
    monkeypatch.setattr(port, "resolve", lambda pins, v, offline=False, say=None: new)
    run(root, FROM, to_version="10.1.0")
    assert [p.name for p in ported(root, "10.1.0")] == NAMES
    # 10.0.0, pinned between the two, does not carry the patches: no span crosses it
    assert spans(root)["model-change-five"] == ["9.8.0", "10.1.0"]
    pinned = lock.load(root / "VERSIONS.lock").get("10.1.0")
    assert (pinned.status, pinned.commit) == (status, "0a1b2c3")


def test_into_writes_a_plain_series_folder(root):
    r = run(root, FROM, into=root.parent / "out")
    assert r.into == root.parent / "out"
    assert (r.into / "series").read_text() == "".join(n + "\n" for n in NAMES)
    assert spans(root) == dict.fromkeys(["model-change-five", "config-allow-deepseek"], ["9.8.0"])


def test_relative_work_and_into_are_the_callers(root, tmp_path, monkeypatch):
    """--work and --into relative to the caller's folder: the work tree is
    made where the caller said (git was handed the relative path while
    running inside it), and a series folder outside the checkout is pinned
    absolute (it was pinned relative to the caller's folder, which the lock
    reads relative to its own; --into now writes a plain folder, pinned nowhere)."""
    (tmp_path / "here").mkdir()
    monkeypatch.chdir(tmp_path / "here")
    write_tree(tmp_path / "to", {**FROM, "vllm/model.py": "new\n" + MODEL})
    r = port.port(
        "9.8.0",
        "10.0.0",
        pins=lock.load(root / "VERSIONS.lock"),
        work=Path("w/t"),
        into=Path("out/s"),
        from_source=str(tmp_path / "from"),
        to_source=str(tmp_path / "to"),
        meta_path=root / "patches/patches.toml",
        keep=True,
    )
    assert r.status == dict.fromkeys(NAMES, "clean")
    work = tmp_path / "here/w/t"
    assert sorted(p.name for p in work.iterdir()) == [".git", "README.md", "vllm"]  # no w/t/w
    assert [p.name for p in quilt.load(tmp_path / "here/out/s").patches] == NAMES
    assert not (tmp_path / "here/out/s/out").exists()


def test_an_interrupted_port_is_not_a_resolved_one(root):
    """SIGKILL after the first patch (an interrupted port): the second patch has no
    commit, and TO lacks it (its probe fails there); resume counted it
    `dropped`, and with every patch so counted, TO needed no series."""
    out = root.parent / "out"  # a plain folder: the patch set stays as it was
    r = run(root, FROM, keep=True, into=out)
    assert r.status == dict.fromkeys(NAMES, "clean")
    work = root.parent / "work"
    pins = lock.load(root / "VERSIONS.lock")
    git(work, "reset", "-q", "--hard", "HEAD~1")  # killed before the second patch
    with pytest.raises(TreeError, match=f"{NAMES[1]} has no commit .* interrupted"):
        port.resume("9.8.0", "10.0.0", pins=pins, work=work)
    git(work, "reset", "-q", "--hard", "vpatch/base-10.0.0")  # killed before either
    with pytest.raises(TreeError, match=f"{NAMES[0]} has no commit .* interrupted"):
        port.resume("9.8.0", "10.0.0", pins=pins, work=work)
    assert work.is_dir()  # kept, for a person to look at


def test_a_patch_without_a_commit_is_dropped_when_its_probe_holds_on_to(root):
    to = {**FROM, "vllm/config.py": 'allow = ["deepseek", "llama"]\n'}
    r = run(root, to, keep=True, into=root.parent / "out")
    assert r.status == {NAMES[0]: "clean", NAMES[1]: "dropped"}
    done = port.resume(
        "9.8.0", "10.0.0", pins=lock.load(root / "VERSIONS.lock"), work=root.parent / "work"
    )
    assert done.status == {NAMES[0]: "ported", NAMES[1]: "dropped"}


def test_a_port_killed_before_the_baseline_cannot_be_resumed(root):
    work = root.parent / "work"
    work.mkdir()
    git(work, "init", "-q")  # killed while TO's baseline was being committed
    with pytest.raises(TreeError, match="interrupted before .*baseline"):
        port.resume("9.8.0", "10.0.0", pins=lock.load(root / "VERSIONS.lock"), work=work)
