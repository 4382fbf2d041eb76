"""maintain/workfolder.py: a carry's work folder is its own (marked, locked),
keeps the last proposal, records the conflict it stopped at and the
checkout as it copied it. The carry's cases end to end:
tests/unit/commands/test_carry_hostile.py."""

from __future__ import annotations

import fcntl
from pathlib import Path

import pytest
from vpatch.errors import ConfigError, TreeError
from vpatch.maintain import workfolder as wf

DATA = "src/vpatch/data"


@pytest.fixture
def checkout(tmp_path) -> Path:
    root = tmp_path / "co"
    (root / DATA / "patches/a").mkdir(parents=True)
    (root / DATA / "VERSIONS.lock").write_text("lock\n")
    (root / DATA / "patches/a/1.patch").write_text("one\n")
    (root / "README.md").write_text("readme\n")
    (root / ".git").mkdir()
    (root / "pyproject.toml").write_text("")
    return root


def tree(top: Path) -> dict[str, str | None]:
    return {
        p.relative_to(top).as_posix(): p.read_text() if p.is_file() else None
        for p in sorted(top.rglob("*"))
    }


@pytest.mark.parametrize(
    ("where", "why"),
    [
        (".", "is the checkout"),
        ("..", "is the checkout, or holds it"),
        (".git/w", "inside a git repository's .git"),
        ("src/w", "inside the checkout's src/"),
        ("README.md", "not a folder"),
        ("mine", "holds files a carry did not make (x)"),
    ],
)
def test_a_folder_carry_may_not_use_is_refused_untouched(checkout, where, why):
    (checkout / "mine").mkdir()
    (checkout / "mine/x").write_text("yours\n")
    before = tree(checkout.parent)
    with (
        pytest.raises(TreeError, match="nothing was touched") as e,
        wf.claim(checkout / where, checkout),
    ):
        pass
    assert why in str(e.value)
    assert tree(checkout.parent) == before


def test_a_folder_it_made_is_marked_locked_and_gone_when_a_run_leaves_nothing(checkout):
    work = checkout / "build/a/w"
    with pytest.raises(RuntimeError), wf.claim(work, checkout) as f:
        assert f.made == checkout / "build" and (work / wf.MARKER).is_file()
        with (
            pytest.raises(TreeError, match="another vpatch carry is working in"),
            wf.claim(work, checkout),
        ):
            pass
        raise RuntimeError
    assert not (checkout / "build").exists()  # every folder it made, and only those
    given = checkout / "empty"
    given.mkdir()
    with pytest.raises(RuntimeError), wf.claim(given, checkout):
        raise RuntimeError
    assert given.is_dir() and list(given.iterdir()) == []  # given empty, left empty


def test_a_killed_carrys_lock_does_not_block(checkout):
    """flock dies with its process: a held lock is a running carry, and the
    mark alone (a killed one's) is not."""
    work = checkout / "w"
    with wf.claim(work, checkout):
        pass
    with wf.claim(work, checkout):  # marked, unlocked: taken
        pass
    with open(work / wf.MARKER) as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        with pytest.raises(TreeError), wf.claim(work, checkout):
            pass


def test_a_new_run_moves_the_last_proposal_aside_and_drops_a_killed_runs_leftovers(checkout):
    work = checkout / "w"
    with wf.claim(work, checkout) as f:
        assert not f.begin("1.0.0", "")  # nothing to move
        (work / "proposed").mkdir()
        (work / "report.md").write_text("first\n")
        (work / "proposed.diff").write_text("diff 1\n")
        assert f.begin("1.0.0", "")
        assert tree(work / "previous") == {
            "proposed": None,
            "proposed.diff": "diff 1\n",
            "report.md": "first\n",
        }
        # a killed run: a half-made proposal and port, no report
        (work / "proposed").mkdir()
        (work / "port").mkdir()
        (work / "port/x").write_text("half\n")
        assert not f.begin("1.0.0", "")
        assert sorted(p.name for p in work.iterdir()) == [wf.MARKER, "previous"]
        assert (work / "previous/report.md").read_text() == "first\n"


def test_a_recorded_conflict_is_what_continue_goes_on_from(checkout):
    work = checkout / "w"
    with wf.claim(work, checkout) as f:
        assert f.stopped() is None
        stop = wf.Stop("1.0.0", "0.9.0", "0002-b.patch", "c0ffee")
        f.record_stop(stop)
        assert f.stopped() == stop
        with pytest.raises(TreeError, match=r"`vpatch carry 1.0.0 --work w --continue`"):
            f.begin("1.0.0", " --work w")
        (work / wf.STATE).write_text('{"to_version": "1.0.0"}')  # not the carry's record
        assert f.stopped() is None
        f.record_stop(stop)
        f.finished()
        assert f.stopped() is None


def test_changes_since_the_copy_are_named(checkout):
    work = checkout / "w"
    copied = [f"{DATA}/VERSIONS.lock", f"{DATA}/patches/a/1.patch", "README.md"]
    copy = checkout.parent / "copy"
    for rel in copied:
        (copy / rel).parent.mkdir(parents=True, exist_ok=True)
        (copy / rel).write_bytes((checkout / rel).read_bytes())
    with wf.claim(work, checkout) as f:
        f.record_copy(checkout, copy, copied)
        (copy / "README.md").write_text("the copy's own, proposed\n")  # hashed when copied
        new = f"{DATA}/patches/b/2.0.patch"  # a variant the carry adds
        assert f.changed_since_copy(checkout, DATA, [f"{DATA}/VERSIONS.lock", new]) == []
        (checkout / "README.md").write_text("edited\n")
        (checkout / DATA / "patches/a/2.patch").write_text("new\n")
        (checkout / DATA / "patches/a/1.patch").unlink()
        (checkout / "other.py").write_text("made while the carry ran\n")
        assert f.changed_since_copy(checkout, DATA, ["other.py", new]) == [
            "README.md",
            "other.py",  # the carry would add it: someone made it meanwhile
            f"{DATA}/patches/a/1.patch",
            f"{DATA}/patches/a/2.patch",
        ]
        other = checkout.parent / "other"
        assert f.changed_since_copy(other, DATA, [])[0].startswith(f"{other} (the carry's copy")


def test_a_carry_from_inside_another_checkout_is_refused(checkout, tmp_path):
    other = tmp_path / "clone"
    (other / DATA).mkdir(parents=True)
    (other / DATA / "VERSIONS.lock").write_text("")
    (other / "pyproject.toml").write_text("")
    (other / "sub").mkdir()
    with pytest.raises(ConfigError, match=f"carries the checkout {checkout}, .* {other}"):
        wf.refuse_other_checkout(checkout, DATA, other / "sub")
    wf.refuse_other_checkout(checkout, DATA, checkout / "build")
    wf.refuse_other_checkout(checkout, DATA, tmp_path)  # in no checkout: its own folders
