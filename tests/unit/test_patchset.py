"""patchset.py: variants mapped to spans of releases, a release's series
rendered from them, what patches.toml says of each patch, and whether two
exports are one change. (Writing it: test_patchset_write.py.)"""

import pytest
from support import patchsets
from support.patchsets import PINNED, write
from vpatch import patchset
from vpatch.errors import ConfigError, PatchError

two = patchsets.two


def test_a_release_gets_the_variant_of_each_patch_that_serves_it(tmp_path, two):
    ps = write(
        tmp_path,
        '# comment\n["a"]\nreleases = ["1.0:1.1", "2.0"]\n\n["b"]\nreleases = ["1.1"]\n',
        {"a/1.0.patch": two[0], "a/2.0.patch": two[0], "b/1.1.patch": two[1]},
    )
    assert ps.slugs == ["a", "b"]
    assert [v.span for v in ps.variants["a"]] == ["1.0:1.1", "2.0"]
    s = ps.series("1.1")
    assert s is not None and s.name == "1.1"
    assert [(p.name, p.path.relative_to(ps.dir).as_posix()) for p in s.patches] == [
        ("0001-a.patch", "a/1.0.patch"),
        ("0002-b.patch", "b/1.1.patch"),
    ]
    assert [p.name for p in ps.series("2.0").patches] == ["0001-a.patch"]  # renumbered
    assert ps.series("1.2") is None  # between two spans: nothing
    files = s.files_out()
    assert files["series"] == b"0001-a.patch\n0002-b.patch\n"
    assert files["0002-b.patch"] == two[1]


def test_a_release_status_is_what_its_series_makes_it(tmp_path, two):
    """patched: its series carries a patch that is EAGLE-3 itself; upstream-fix:
    only others; upstream: no series."""
    ps = write(
        tmp_path,
        '["a"]\nreleases = ["1.0:1.1"]\neagle3 = true\n\n["b"]\nreleases = ["1.1:2.0"]\n',
        {"a/1.0.patch": two[0], "b/1.1.patch": two[1]},
    )
    assert [ps.status(v) for v in PINNED] == ["patched", "patched", "upstream-fix", "upstream-fix"]
    assert ps.status("3.0") == "upstream"


@pytest.mark.parametrize(
    "toml, message",
    [
        ('["a"]\nreleases = ["1.1:1.0"]\n', "ends before it starts"),
        ('["a"]\nreleases = ["1.0:1.2", "1.1"]\n', "variants 1.2 and 1.1 overlap"),
        ('["a"]\nreleases = ["x"]\n', "'x' is not a release"),
        ('["a"]\nreleases = "1.0"\n', "releases is a list of spans"),
        ('["a"]\nreleases = [""]\n', "spans 'first:last' or one release"),
        ("a = 1\n", r"\[a\]: not a table"),
    ],
)
def test_bad_spans_are_config_errors(tmp_path, toml, message):
    with pytest.raises(ConfigError, match=message):
        write(tmp_path, toml, {})


def test_a_variant_without_its_file_is_a_patch_error(tmp_path):
    ps = write(tmp_path, '["a"]\nreleases = ["1.0"]\n', {})
    with pytest.raises(PatchError, match=r"\[a\]: variant 1.0 has no file a/1.0.patch"):
        ps.series("1.0")


def test_same_change_ignores_where_it_sits_only(two):
    moved = two[0].replace(b"@@ -2,7 +2,7 @@", b"@@ -12,7 +12,7 @@")
    assert moved != two[0] and patchset.same_change(two[0], moved)
    blobs = b"\n".join(
        b"index 0123456..89abcde 100644" if ln.startswith(b"index ") else ln
        for ln in two[0].split(b"\n")
    )
    assert blobs != two[0] and patchset.same_change(two[0], blobs)
    assert not patchset.same_change(two[0], two[0].replace(b"+line five", b"+line 5ive"))
    assert not patchset.same_change(two[0], two[0].replace(b" line 4\n", b" line four\n"))


def test_about_a_patch_and_what_derives_from_it(tmp_path, two):
    ps = write(
        tmp_path,
        '["a"]\nreleases = ["1.0:1.1", "2.0"]\nsummary = "it breaks"\n'
        'markers = ["m_a", "shared"]\ndoctor = "defect_a"\n'
        "explanation = '''\nLong.\n[\"not a table\"]\n'''\n\n"
        '["b"]\nreleases = ["1.1"]\nmarkers = ["shared"]\n\n["c"]\nreleases = ["2.0"]\n',
        {"a/1.0.patch": two[0], "a/2.0.patch": two[0], "b/1.1.patch": two[1]},
    )
    assert ps.about["a"] == patchset.About(
        "it breaks", ("m_a", "shared"), "defect_a", 'Long.\n["not a table"]'
    )
    assert ps.about["c"] == patchset.About()
    gone = write(tmp_path / "g", '["a"]\nreleases = ["1.0:1.1"]\ngone = "2.0"\n', {})
    assert gone.about["a"].gone == "2.0"
    assert ps.fixes() == {"defect_a": "a"}
    assert ps.markers() == {"m_a": ["a"], "shared": ["a", "b"]}
    assert ps.serving("a", PINNED) == ["1.0", "1.1", "2.0"]
    assert ps.serving("b", PINNED) == ["1.1"]


@pytest.mark.parametrize(
    "toml, message",
    [
        ('["a"]\nreleases = ["1.0"]\nsumary = "x"\n', "unknown keys sumary"),
        ('["a"]\nsummary = "two\\nlines"\n', "summary is one line"),
        ('["a"]\nsummary = 1\n', "summary is a string"),
        ('["a"]\nmarkers = "m"\n', "markers is a list of pytest marker names"),
        ('["a"]\nmarkers = ["Not-a-marker"]\n', "markers is a list of pytest marker names"),
        ('["a"]\ndoctor = "a b"\n', "doctor 'a b' is not a key"),
        ('["a"]\ndoctor = "k"\n["b"]\ndoctor = "k"\n', r"\[b\]: doctor key 'k' is already \[a\]'s"),
        ('["a"]\neagle3 = "yes"\n', "eagle3 is true or false"),
        ('["a"]\ngone = "soon"\n', "gone 'soon' is not a release"),
        ('["a"]\ngone = 2\n', "gone is a string"),
        # a patch cannot change code its release no longer has
        ('["a"]\nreleases = ["1.0:1.2"]\ngone = "1.2"\n', "gone 1.2, but variant 1.0 serves"),
    ],
)
def test_bad_facts_are_config_errors(tmp_path, toml, message):
    with pytest.raises(ConfigError, match=message):
        write(tmp_path, toml, {})


MAIL = (
    "From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\n"
    "From: t <t@example.com>\nSubject: a: fix\n\nWhy.\n\n{fields}\n"
    "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n"
)


@pytest.mark.parametrize(
    "fields, release, merged, link, said",
    [
        ("Origin: vendor\nForwarded: no", None, None, "", "not upstream"),
        ("Origin: vendor\nForwarded: https://x/pull/1", None, None, "https://x/pull/1", "sent"),
        (
            "Origin: backport, https://x/pull/2\nApplied-Upstream: 10.0.0",
            "10.0.0",
            None,
            "https://x/pull/2",
            "upstream from 10.0.0",
        ),
        (
            "Origin: backport, https://x/pull/3\nApplied-Upstream: https://x/pull/3",
            None,
            "https://x/pull/3",
            "https://x/pull/3",
            "merged upstream, in no release yet",
        ),
        ("Origin: upstream\nApplied-Upstream: 1.1, https://x/c/4", "1.1", "https://x/c/4", "", ""),
    ],
)
def test_upstream_is_read_from_the_newest_variants_dep3(
    tmp_path, fields, release, merged, link, said
):
    ps = write(
        tmp_path,
        '["a"]\nreleases = ["1.0", "2.0"]\n',
        {
            "a/1.0.patch": MAIL.format(fields="Origin: vendor").encode(),
            "a/2.0.patch": MAIL.format(fields=fields).encode(),
        },
    )
    up = ps.upstream("a")
    assert (up.release, up.merged, up.link) == (release, merged, link)
    assert said in up.describe()
