from pathlib import Path

import pytest
from support import synthetic as S
from vpatch import quilt
from vpatch.errors import ConfigError, PatchError, TreeError, UnsafePathError

ROOT = Path(__file__).resolve().parents[2]


def test_parse_reads_subject_dep3_and_files(good_series):
    s = quilt.load(good_series)
    assert [p.name for p in s.patches] == ["0001-step-1.patch", "0002-step-2.patch"]
    p = s.patches[1]
    assert p.subject == "config: allow deepseek"
    assert p.fields["Applied-Upstream"] == "10.0.0"
    assert p.fields["Description"] == "config: allow deepseek"
    assert p.files == ["vllm/config.py"]
    assert s.files == ["vllm/model.py", "vllm/config.py"]
    assert p.changes() == [
        ("vllm/config.py", ["allow = ['llama']\n"], ["allow = ['llama', 'deepseek']\n"])
    ]


def test_fields_of_reads_dep3_alone(good_series, tmp_path):
    """What parse() reads as fields, without parsing the diff (the tier's venvs
    have no unidiff); errors as parse()'s."""
    for p in quilt.load(good_series).patches:
        assert quilt.fields_of(p.path) == p.fields
    bad = tmp_path / "bad.patch"
    bad.write_bytes(b"From 0 Mon\nSubject: x\n\n\xff\n")
    with pytest.raises(PatchError, match="not UTF-8"):
        quilt.fields_of(bad)
    bad.write_text("Subject: no mail\n")
    with pytest.raises(PatchError, match="not a git format-patch mail"):
        quilt.fields_of(bad)


def test_series_comments_and_blank_lines(good_series):
    (good_series / "series").write_text("# the plan\n\n0002-step-2.patch -p1\n")
    assert [p.name for p in quilt.load(good_series).patches] == ["0002-step-2.patch"]


def test_series_naming_a_missing_file(good_series):
    (good_series / "series").write_text("0001-step-1.patch\n0009-gone.patch\n")
    with pytest.raises(PatchError, match="names 0009-gone.patch, but .* does not exist"):
        quilt.load(good_series)


def test_series_naming_a_file_outside(good_series):
    (good_series / "series").write_text("../../etc/passwd\n")
    with pytest.raises(PatchError, match="escapes"):
        quilt.load(good_series)


def test_a_folder_that_is_no_series_is_bad_input(tmp_path):
    """`--series DIR` naming the wrong folder is bad input (exit 2), not a bad
    patch (`vpatch install --series /nonexistent` once exited 5)."""
    with pytest.raises(ConfigError, match="has no series file"):
        quilt.load(tmp_path)
    with pytest.raises(ConfigError, match="/nonexistent: no such folder"):
        quilt.load(tmp_path / "nonexistent")
    (tmp_path / "file").write_text("0001-a.patch\n")
    with pytest.raises(ConfigError, match="file: no such folder"):
        quilt.load(tmp_path / "file")


@pytest.mark.parametrize(
    "text, why",
    [
        ("just text\n", "not a git format-patch mail"),
        ("From 0 Mon Sep 17 00:00:00 2001\nSubject: x\n\nno diff here\n", "no 'diff --git'"),
        (
            "From 0 Mon Sep 17 00:00:00 2001\nSubject: x\n\n---\ndiff --git a/f b/f\n"
            "--- a/f\n+++ b/f\n@@ -1,3 +1,3 @@\n-a\n+b\n",
            "malformed patch",
        ),
    ],
    ids=["no-mail", "no-diff", "bad-hunk"],
)
def test_malformed_patches(tmp_path, text, why):
    (tmp_path / "series").write_text("0001-x.patch\n")
    (tmp_path / "0001-x.patch").write_text(text)
    with pytest.raises(PatchError, match=why):
        quilt.load(tmp_path)


@pytest.mark.parametrize("path", ["../evil.py", "/etc/evil.py"])
def test_patch_paths_outside_the_tree(tmp_path, path):
    (tmp_path / "p.patch").write_text(
        "From 0 Mon Sep 17 00:00:00 2001\nSubject: x\n\n---\n"
        f"diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n@@ -1 +1 @@\n-a\n+b\n"
    )
    with pytest.raises((UnsafePathError, PatchError)):
        quilt.parse(tmp_path / "p.patch")


def test_symlink_in_patch_is_refused(tmp_path):
    (tmp_path / "p.patch").write_text(
        "From 0 Mon Sep 17 00:00:00 2001\nSubject: x\n\n---\n"
        "diff --git a/link b/link\nnew file mode 120000\nindex 0000000..1111111\n"
        "--- /dev/null\n+++ b/link\n@@ -0,0 +1 @@\n+/etc/passwd\n\\ No newline at end of file\n"
    )
    with pytest.raises(UnsafePathError, match="symlink"):
        quilt.parse(tmp_path / "p.patch")


def test_content_hash_changes_with_any_byte(good_series):
    h1 = quilt.load(good_series).content_hash()
    p = good_series / "0001-step-1.patch"
    p.write_text(p.read_text().replace("first change", "first change!"))
    assert quilt.load(good_series).content_hash() != h1


def test_slug_of():
    assert quilt.slug_of("eagle: alias Kimi-K2.5 media placeholder token id") == (
        "eagle-alias-kimi-k2-5-media-placeholder-token-id"
    )


@pytest.mark.parametrize(
    "path",
    sorted((ROOT / "src/vpatch/data/patches").glob("*/*.patch")),
    ids=lambda p: f"{p.parent.name}/{p.name}",
)
def test_every_committed_patch_has_dep3_fields(path):
    p = quilt.parse(path)
    missing = [f for f in quilt.REQUIRED_FIELDS if not p.fields.get(f)]
    assert not missing, f"{path} lacks {missing}"
    assert path.parent.name == quilt.slug_of(p.subject)  # its folder is its slug


def test_names_and_keys():
    assert quilt.slug("0007-model-fix.patch") == "model-fix"
    assert quilt.file_name(12, "Model: fix it!") == "0012-model-fix-it.patch"
    assert quilt.slug_of("x" * 70 + " y") == "x" * 64
    assert quilt.slug_of("a" * 63 + " b") == "a" * 63  # no trailing '-'


def test_write_makes_the_folder_hold_exactly_the_files(tmp_path):
    out = tmp_path / "out"
    files = {"0001-a.patch": b"a\n", "0002-b.patch": b"b\n", "series": b"0001-a.patch\n"}
    assert quilt.write(out, files) == (["0001-a.patch", "0002-b.patch", "series"], [])
    again = {**files, "0002-b.patch": b"b2\n", "0003-c.patch": b"c\n"}
    del again["0001-a.patch"]
    assert quilt.write(out, again) == (["0002-b.patch", "0003-c.patch"], ["0001-a.patch"])
    assert sorted(p.name for p in out.iterdir()) == sorted([*again, quilt.MANIFEST])
    assert (out / "0002-b.patch").read_bytes() == b"b2\n"


@pytest.mark.parametrize(
    "mine",
    [
        {"notes.txt": b"mine\n"},
        {"0009-old.patch": b"old\n", "series": b"0009-old.patch\n"},  # a series of the user's
        {"sub/x.patch": b"x\n"},
    ],
)
def test_write_never_touches_a_users_file(tmp_path, mine):
    """The folder holds files vpatch did not write: nothing is removed,
    overwritten or added (vpatch export --into deleted 0009-old.patch and
    overwrote the user's series)."""
    out = tmp_path / "out"
    for name, data in mine.items():
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_bytes(data)
    before = S.snapshot(out)
    with pytest.raises(TreeError, match=r"holds other files than a series vpatch wrote \("):
        quilt.write(out, {"0001-a.patch": b"a\n", "series": b"0001-a.patch\n"})
    assert S.snapshot(out) == before


def test_write_keeps_a_file_of_ours_the_user_edited(tmp_path):
    out = tmp_path / "out"
    quilt.write(out, {"0001-a.patch": b"a\n", "series": b"0001-a.patch\n"})
    (out / "0001-a.patch").write_bytes(b"a, with my fix\n")
    with pytest.raises(TreeError, match=r"\(0001-a.patch\)"):
        quilt.write(out, {"0002-b.patch": b"b\n", "series": b"0002-b.patch\n"})
    assert (out / "0001-a.patch").read_bytes() == b"a, with my fix\n"
    assert not (out / "0002-b.patch").exists()


def test_a_write_killed_half_way_leaves_a_folder_of_ours(tmp_path, monkeypatch):
    """The manifest names the new files before the first is written: a run
    killed after some left no file the next run takes for a user's."""
    out = tmp_path / "out"
    quilt.write(out, {"0001-a.patch": b"a\n", "series": b"0001-a.patch\n"})
    real, calls = quilt.write_atomic, []

    def killed(path, data):
        calls.append(path.name)
        if path.name == "series":
            raise KeyboardInterrupt  # after 0002-b.patch was written
        real(path, data)

    monkeypatch.setattr(quilt, "write_atomic", killed)
    new = {"0002-b.patch": b"b\n", "series": b"0002-b.patch\n"}
    with pytest.raises(KeyboardInterrupt):
        quilt.write(out, new)
    assert calls == [quilt.MANIFEST, "0002-b.patch", "series"]
    monkeypatch.setattr(quilt, "write_atomic", real)
    assert quilt.write(out, new) == (["series"], ["0001-a.patch"])


def test_a_series_file_that_is_not_text(tmp_path):
    (tmp_path / "series").write_bytes(b"\xff\xfe0001.patch\n")
    with pytest.raises(PatchError, match="is not UTF-8 text"):
        quilt.read_names(tmp_path / "series")


def test_applied_upstream_and_dep3_problems():
    assert quilt.applied("10.0.0") == (["10.0.0"], [])
    assert quilt.applied("10.0.0, https://x/pull/1") == (["10.0.0"], ["https://x/pull/1"])
    assert quilt.applied("https://x/pull/1") == ([], ["https://x/pull/1"])
    good = {
        "Description": "d",
        "Origin": "backport, https://x/pull/1",
        "Forwarded": "not-needed",
        "Applied-Upstream": "10.0.0, https://x/pull/1",
        "Last-Update": "2026-12-01",
    }
    assert quilt.dep3_problems(good) == []
    assert quilt.dep3_problems({**good, "Applied-Upstream": "soon"}) == [
        "Applied-Upstream 'soon': use a version or URL"
    ]
    assert quilt.dep3_problems({**good, "Description": ""}) == [
        "DEP-3 field Description is missing or empty"
    ]
