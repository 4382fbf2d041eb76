"""export: the commits of a patched tree become the series, deterministically."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from support import git
from support import synthetic as S
from vpatch import lock, quilt
from vpatch.commands import apply, export
from vpatch.errors import ConfigError, PatchError, TreeError


def files(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(d.iterdir())}


def test_names_series_and_content(patched_tree, tmp_path, pins):
    done = export.export(patched_tree, tmp_path / "out", pins=pins)
    names = ["0001-model-first-change.patch", "0002-config-allow-deepseek.patch"]
    assert done.names == names and done.version == "9.9.0"
    assert (tmp_path / "out/series").read_text() == "".join(n + "\n" for n in names)
    out = quilt.load(tmp_path / "out")
    assert [p.subject for p in out.patches] == ["model: first change", "config: allow deepseek"]
    assert out.patches[0].fields["Applied-Upstream"] == "10.0.0"  # the message is kept
    text = (tmp_path / "out" / names[0]).read_text()
    assert text.startswith("From 0000000000000000000000000000000000000000 ")  # no commit id
    assert "\n-- \n" not in text  # no git version signature


def test_same_tree_same_bytes(patched_tree, tmp_path, pins):
    export.export(patched_tree, tmp_path / "a", pins=pins)
    again = export.export(patched_tree, tmp_path / "a", pins=pins)
    assert again.written == []  # nothing changed, nothing rewritten
    export.export(patched_tree, tmp_path / "b", pins=pins)
    assert files(tmp_path / "a") == files(tmp_path / "b")


HOSTILE = """\
[diff]
    algorithm = patience
    context = 7
    noprefix = true
    suppressBlankEmpty = true
    mnemonicPrefix = true
[format]
    useAutoBase = true
    headers = "X-Extra: 1"
    signature = mine
    numbered = true
    thread = shallow
    coverLetter = true
    to = someone@example.com
    from = Me <me@example.com>
[core]
    abbrev = 12
    quotePath = false
"""


def test_bytes_ignore_user_config_and_git_env(patched_tree, tmp_path, pins):
    export.export(patched_tree, tmp_path / "plain", pins=pins)
    home = tmp_path / "home"
    home.mkdir()
    (home / ".gitconfig").write_text(HOSTILE)
    env = {
        **os.environ,
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home),
        "GIT_DIFF_OPTS": "--unified=9",
        "GIT_CONFIG_COUNT": "1",
        "GIT_CONFIG_KEY_0": "diff.context",
        "GIT_CONFIG_VALUE_0": "5",
        "GIT_AUTHOR_NAME": "someone else",
        "GIT_COMMITTER_DATE": "2031-05-05T00:00:00+00:00",
    }
    code = (
        "import sys; from pathlib import Path; from vpatch import lock;"
        "from vpatch.commands import export;"
        "export.export(Path(sys.argv[1]), Path(sys.argv[2]), pins=lock.load())"
    )
    subprocess.run(
        [sys.executable, "-c", code, str(patched_tree), str(tmp_path / "hostile")],
        env=env,
        check=True,
    )
    assert files(tmp_path / "hostile") == files(tmp_path / "plain")


def test_a_persons_commit_is_exported_and_round_trips(patched_tree, tmp_path, pins, release_dir):
    (patched_tree / "README.md").write_text("tiny, documented\n")
    git(patched_tree, "commit", "-qam", "docs: say more\n\nDescription: more words\n")
    done = export.export(patched_tree, tmp_path / "out", pins=pins)
    assert done.names[-1] == "0003-docs-say-more.patch"
    text = (tmp_path / "out" / done.names[-1]).read_text()
    assert "From: t <t@example.com>" in text  # the person's identity and date
    assert "Date: Fri, 2 Jan 2026 00:00:00 +0000" in text
    # apply the exported series to a fresh tree and export again: a fixpoint
    fresh = tmp_path / "fresh"
    apply.apply("9.9.0", fresh, str(release_dir), series_dir=tmp_path / "out", pins=pins)
    export.export(fresh, tmp_path / "again", pins=pins)
    assert files(tmp_path / "again") == files(tmp_path / "out")


def test_a_folder_of_the_users_is_refused_and_left_as_it_was(patched_tree, tmp_path, pins):
    """Into a folder holding notes.txt, 0009-old.patch and a
    series of the user's, export deleted 0009-old.patch and overwrote the
    series; it must refuse, as `vpatch series --out` does (TreeError, 6)."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine\n")
    (out / "0009-old.patch").write_text("old\n")
    (out / "series").write_text("0009-old.patch\n")
    before = S.snapshot(out)
    with pytest.raises(TreeError, match=r"holds other files than a series vpatch wrote"):
        export.export(patched_tree, out, pins=pins)
    assert S.snapshot(out) == before
    (out / "notes.txt").unlink()  # a series of the user's alone is theirs too
    before = S.snapshot(out)
    with pytest.raises(TreeError, match=r"\(0009-old.patch\)"):
        export.export(patched_tree, out, pins=pins)
    assert S.snapshot(out) == before


def test_a_dropped_commit_drops_its_patch(patched_tree, tmp_path, pins):
    export.export(patched_tree, tmp_path / "out", pins=pins)
    git(patched_tree, "reset", "-q", "--hard", "HEAD~1")
    done = export.export(patched_tree, tmp_path / "out", pins=pins)
    assert done.removed == ["0002-config-allow-deepseek.patch"]
    assert (tmp_path / "out/series").read_text() == "0001-model-first-change.patch\n"


def test_dirty_tree_is_refused(patched_tree, tmp_path, pins):
    (patched_tree / "new.txt").write_text("untracked\n")
    with pytest.raises(TreeError, match="uncommitted changes"):
        export.export(patched_tree, tmp_path / "out", pins=pins)
    assert not (tmp_path / "out").exists()


def test_plain_folder_and_missing_base_are_refused(patched_tree, tmp_path, pins):
    with pytest.raises(TreeError, match="no git repository"):
        export.export(tmp_path, tmp_path / "out", pins=pins)
    git(patched_tree, "tag", "-d", "vpatch/base-9.9.0")
    with pytest.raises(TreeError, match="no vpatch/base-"):
        export.export(patched_tree, tmp_path / "out", pins=pins)


def test_empty_commit_is_refused(patched_tree, tmp_path, pins):
    git(patched_tree, "commit", "-q", "--allow-empty", "-m", "nothing")
    with pytest.raises(PatchError, match="changes no file"):
        export.export(patched_tree, tmp_path / "out", pins=pins)


def test_export_into_the_patch_set_then_render_it(patched_tree, tmp_path, pins):
    done = export.export(patched_tree, pins=pins)
    slugs = ["model-first-change", "config-allow-deepseek"]
    assert done.variants == dict.fromkeys(slugs, "new") and done.written == slugs
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.glob("patches/*/*")) == [
        "patches/config-allow-deepseek/9.9.0.patch",
        "patches/model-first-change/9.9.0.patch",
    ]
    plain = export.export(patched_tree, tmp_path / "plain", pins=pins)
    again = export.export(patched_tree, pins=lock.Lock(pins.releases, pins.path))
    assert again.variants == dict.fromkeys(slugs, "unchanged") and again.written == []
    # `vpatch series`: the release's series as plain files, the bytes export wrote
    out = export.render("9.9.0", tmp_path / "rendered", pins=lock.Lock(pins.releases, pins.path))
    assert out.names == plain.names
    assert files(tmp_path / "rendered") == files(tmp_path / "plain")


def test_render_refuses_what_it_cannot_write(patched_tree, tmp_path, pins):
    export.export(patched_tree, pins=pins)
    pins = lock.Lock(pins.releases, pins.path)
    with pytest.raises(ConfigError, match="vLLM 9.8.0 carries no series"):
        export.render("9.8.0", tmp_path / "out", pins=pins)
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("mine\n")
    with pytest.raises(TreeError, match="holds other files than a series"):
        export.render("9.9.0", tmp_path / "mine", pins=pins)
    assert [p.name for p in (tmp_path / "mine").iterdir()] == ["notes.txt"]
