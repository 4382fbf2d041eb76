"""patchset_write.py: patches.toml's `releases` lines rewritten in place,
and record(): what export and port write for one release, touching no
other."""

import pytest
from support import patchsets, text_file
from support.patchsets import PINNED, write
from vpatch import patchset, patchset_write
from vpatch.errors import ConfigError, PatchError

two = patchsets.two


def test_set_spans_rewrites_one_line_and_keeps_the_rest(tmp_path):
    path = text_file(
        tmp_path / "patches.toml",
        '# head\n\n["a"]\n# why a\nreleases = ["1.0"]\nprobe = []\n\n'
        '# about b\n["b"]\npr_title = "B"\n',
    )
    patchset_write.set_spans(path, "a", ["1.0:1.1", "2.0"])
    patchset_write.set_spans(path, "b", ["1.1"])
    patchset_write.set_spans(path, "c", ["2.0"], after="a")  # a new table, after a's
    assert path.read_text() == (
        '# head\n\n["a"]\n# why a\nreleases = ["1.0:1.1", "2.0"]\nprobe = []\n\n'
        '["c"]\nreleases = ["2.0"]\n\n'
        '# about b\n["b"]\nreleases = ["1.1"]\npr_title = "B"\n'
    )
    assert patchset.load(path).slugs == ["a", "c", "b"]
    path.write_text('["a"]\nreleases = [\n  "1.0",\n]\n')
    with pytest.raises(ConfigError, match="write releases on one line"):
        patchset_write.set_spans(path, "a", ["1.1"])


def test_a_line_of_an_explanation_is_no_table(tmp_path, two):
    """A line of a multi-line string that looks like a table header is no
    table to set_spans."""
    ps = write(
        tmp_path,
        '["a"]\nreleases = ["1.0:1.1", "2.0"]\n'
        "explanation = '''\nLong.\n[\"not a table\"]\n'''\n\n"
        '["b"]\nreleases = ["1.1"]\n\n["c"]\nreleases = ["2.0"]\n',
        {"a/1.0.patch": two[0], "a/2.0.patch": two[0], "b/1.1.patch": two[1]},
    )
    patchset_write.set_spans(ps.toml, "a", ["1.0:1.2", "2.0"])
    patchset_write.set_spans(ps.toml, "d", ["1.0"], after="a")
    again = patchset.load(ps.toml)
    assert again.slugs == ["a", "d", "b", "c"] and again.about["a"] == ps.about["a"]
    assert [v.span for v in again.variants["a"]] == ["1.0:1.2", "2.0"]


def record(ps, version, exported):
    """record() into `ps`, which then is what its files say: the next
    record() and every read go on from the same object, never a reload."""
    out = patchset_write.record(ps, PINNED, version, exported)
    fresh = patchset.load(ps.toml)
    assert ps == fresh and list(ps.tables) == list(fresh.tables)
    return out.done, ps


def test_record_only_changes_what_the_release_gets(tmp_path, two):
    ps = write(tmp_path, '["a"]\nreleases = ["1.0:1.1"]\n', {"a/1.0.patch": two[0]})
    # the same bytes, or the same change exported from a release where it moved
    moved = two[0].replace(b"@@ -2,7 +2,7 @@", b"@@ -9,7 +9,7 @@")
    done, after = record(ps, "1.1", [("a", moved)])
    assert done == {"a": "unchanged"} and (ps.dir / "a/1.0.patch").read_bytes() == two[0]
    # a new release next to the span, with the same change: the span grows
    done, after = record(after, "1.2", [("a", moved)])
    assert done == {"a": "extended"} and [v.span for v in after.variants["a"]] == ["1.0:1.2"]
    # another change on a release inside the span: it starts a variant of its own
    other = two[0].replace(b"+line five", b"+line 5ive")
    done, after = record(after, "1.1", [("a", other)])
    assert done == {"a": "split"}
    assert [v.span for v in after.variants["a"]] == ["1.0", "1.1:1.2"]
    assert (ps.dir / "a/1.1.patch").read_bytes() == other
    assert (ps.dir / "a/1.0.patch").read_bytes() == two[0]
    # the release a variant was exported from rewrites its file
    done, after = record(after, "1.1", [("a", moved)])
    assert done == {"a": "written"} and (ps.dir / "a/1.1.patch").read_bytes() == moved


def test_record_a_new_patch_and_a_release_of_its_own(tmp_path, two):
    ps = write(tmp_path, '["a"]\nreleases = ["1.0"]\n', {"a/1.0.patch": two[0]})
    other = two[0].replace(b"+line five", b"+line 5ive")
    done, after = record(ps, "2.0", [("a", other), ("b", two[1])])
    assert done == {"a": "new", "b": "new"}
    assert [v.span for v in after.variants["a"]] == ["1.0", "2.0"]
    assert after.slugs == ["a", "b"] and [v.span for v in after.variants["b"]] == ["2.0"]
    # a span that grows downwards is exported from its new first release
    done, after = record(after, "1.2", [("a", other), ("b", two[1])])
    assert done == {"a": "extended", "b": "extended"}
    assert [v.span for v in after.variants["b"]] == ["1.2:2.0"]
    assert (ps.dir / "b/1.2.patch").read_bytes() == two[1]
    assert not (ps.dir / "b/2.0.patch").exists()


def test_record_refuses_a_dropped_patch_and_another_order(tmp_path, two):
    ps = write(
        tmp_path,
        '["a"]\nreleases = ["1.0"]\n["b"]\nreleases = ["1.0"]\n',
        {"a/1.0.patch": two[0], "b/1.0.patch": two[1]},
    )
    with pytest.raises(PatchError, match="lacks b, which patches.toml gives it"):
        record(ps, "1.0", [("a", two[0])])
    before = sorted((p, p.read_bytes()) for p in ps.dir.rglob("*") if p.is_file())
    with pytest.raises(PatchError, match="orders vLLM 1.1's patches a, b; the tree has b, a"):
        record(ps, "1.1", [("b", two[1]), ("a", two[0])])
    assert sorted((p, p.read_bytes()) for p in ps.dir.rglob("*") if p.is_file()) == before


def test_the_set_recorded_into_reads_its_files_anew(tmp_path, two):
    """A file record() wrote over is parsed again by the set it was given
    (PatchSet.forget), not served from what that set parsed before."""
    ps = write(tmp_path, '["a"]\nreleases = ["1.0:1.1"]\n', {"a/1.0.patch": two[0]})
    assert "+line five" in str(ps.series("1.0").patches[0].diff)  # parsed, and kept
    other = two[0].replace(b"+line five", b"+line 5ive")
    done = patchset_write.record(ps, PINNED, "1.0", [("a", other)]).done
    assert done == {"a": "written"}
    assert "+line 5ive" in str(ps.series("1.0").patches[0].diff)


def test_the_set_recorded_into_equals_a_fresh_load_after_each_kind_of_write(tmp_path, two):
    """Each kind of write record() makes, on one PatchSet: after each, the
    object is what loading the files anew gives (slugs in table order,
    variants and their files, About, the tables as parsed), and what it
    parsed of a file written over or removed is read again."""
    ps = write(
        tmp_path,
        '# head\n["a"]\nreleases = ["1.0"]\nsummary = "A"\n\n["b"]\nreleases = ["1.0"]\n',
        {"a/1.0.patch": two[0], "b/1.0.patch": two[1]},
    )
    other = two[0].replace(b"+line five", b"+line 5ive")
    c = two[1].replace(b"deepseek", b"kimi")
    assert ps.series("1.0") is not None  # both files parsed, and kept
    seen = []
    for version, exported in [
        ("1.0", [("a", two[0]), ("b", two[1])]),  # unchanged
        ("1.1", [("a", two[0]), ("b", two[1])]),  # extended upwards
        ("1.1", [("a", other), ("b", two[1])]),  # split
        ("1.1", [("a", two[0]), ("b", two[1])]),  # written: 1.1's own file
        ("2.0", [("a", two[0]), ("c", c), ("b", two[1])]),  # new: variants, a table after a's
        ("1.2", [("a", two[0]), ("c", c), ("b", two[1])]),  # extended downwards: 2.0's file goes
    ]:
        done, after = record(ps, version, exported)
        assert after is ps
        seen += done.values()
        fresh = patchset.load(ps.toml)
        for v in PINNED:  # every series, parsed: from files as they are now
            assert series(ps, v) == series(fresh, v), (version, v)
    assert set(seen) == {"unchanged", "extended", "split", "written", "new"}
    assert ps.slugs == ["a", "c", "b"] and [v.span for v in ps.variants["c"]] == ["1.2:2.0"]
    assert ps.about["a"].summary == "A" and not (ps.dir / "c/2.0.patch").exists()


def series(ps, version):
    s = ps.series(version)
    return [(p.name, str(p.diff)) for p in s.patches] if s else []


def test_record_refuses_a_patch_whose_code_is_gone(tmp_path, two):
    """A release at or after a patch's `gone` cannot get it: patches.toml
    would no longer load, nor the set equal it. Nothing is written."""
    ps = write(tmp_path, '["a"]\nreleases = ["1.0"]\ngone = "1.2"\n', {"a/1.0.patch": two[0]})
    before = sorted((p, p.read_bytes()) for p in ps.dir.rglob("*") if p.is_file())
    with pytest.raises(PatchError, match="vLLM 2.0 has a, whose code patches.toml says"):
        patchset_write.record(ps, PINNED, "2.0", [("a", two[0])])
    assert sorted((p, p.read_bytes()) for p in ps.dir.rglob("*") if p.is_file()) == before
    assert ps == patchset.load(ps.toml)
