"""lint: a synthetic repository (lock, patches/, patches.toml) with one kind of
problem at a time, and the real repository, which must be clean."""

import dataclasses
import re
from pathlib import Path

import pytest
from support import BASE, change, make_series, sdist
from vpatch import lock
from vpatch.commands import apply, export
from vpatch.maintain import lint

MODEL = BASE["vllm/model.py"]
META = """
["model-first-change"]
eagle3 = true
probe = [{ file = "vllm/model.py", uses = "never_there" }]

["config-allow-deepseek"]
probe = [{ file = "vllm/config.py", uses = "never_there" }]
"""


STEPS = [
    ("model: first change", {"vllm/model.py": change(MODEL, "line 5\n", "line five\n")}),
    ("config: allow deepseek", {"vllm/config.py": "allow = ['llama', 'deepseek']\n"}),
]


@pytest.fixture
def repo(tmp_path, cache_root, release_dir):
    """(root, pins): two releases carrying the same two patches, one variant
    each (9.8.0:9.9.0), written the way a maintainer writes them: apply,
    then export, release by release (9.9.0's model.py has a line more at the
    top, so the hunks sit one line lower there)."""
    root = tmp_path / "root"
    (root / "patches").mkdir(parents=True)
    (root / "patches/patches.toml").write_text(META)
    later = {**BASE, "vllm/model.py": "# 9.9.0\n" + MODEL}
    rels = {}
    for v, files in (("9.8.0", BASE), ("9.9.0", later)):
        rel = sdist(cache_root, v, files)
        rels[v] = lock.Release(v, f"v{v}", "abc1234", "patched", rel.artifacts)
    pins = lock.Lock(rels, root / "VERSIONS.lock")
    lock.save(pins)
    made = make_series(tmp_path, BASE, STEPS)
    for v in rels:
        tree = tmp_path / f"tree-{v}"
        apply.apply(v, dest=tree, series_dir=made, pins=pins)
        export.export(tree, pins=lock.load(pins.path))
    return root, lock.load(pins.path)


def run(pins, **kw) -> list[str]:
    result = lint.lint(lock.load(pins.path), **kw)
    return [str(p) for p in result.problems]


def patch_file(root: Path, slug: str = "model-first-change") -> Path:
    return root / "patches" / slug / "9.8.0.patch"


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


def test_a_consistent_repository_is_clean(repo):
    root, pins = repo
    assert run(pins) == []
    meta = (root / "patches/patches.toml").read_text()
    assert meta.count('releases = ["9.8.0:9.9.0"]') == 2  # one variant each
    assert sorted(p.relative_to(root).as_posix() for p in root.rglob("*.patch")) == [
        "patches/config-allow-deepseek/9.8.0.patch",
        "patches/model-first-change/9.8.0.patch",
    ]


def test_stray_files_and_variants_without_one(repo):
    root, pins = repo
    (root / "patches/model-first-change/extra.patch").write_bytes(patch_file(root).read_bytes())
    edit(root / "patches/patches.toml", '"9.8.0:9.9.0"]', '"9.8.0:9.9.0", "10.0.0"]')
    assert run(pins, sources=False) == [
        "patches/patches.toml [model-first-change]: variant 10.0.0: 10.0.0 is not a pinned release",
        "patches/patches.toml [model-first-change]: variant 10.0.0 has no file "
        "patches/model-first-change/10.0.0.patch",
        "patches/model-first-change/extra.patch: no variant in patches.toml is this file",
    ]


def test_overlapping_variants(repo):
    root, pins = repo
    edit(root / "patches/patches.toml", '"9.8.0:9.9.0"]', '"9.8.0:9.9.0", "9.9.0"]')
    problems = run(pins, sources=False)
    assert problems == [
        "patches.toml: patches.toml [model-first-change]: variants 9.9.0 and 9.9.0 overlap"
    ]


def test_subject_must_give_the_slug(repo):
    root, pins = repo
    edit(patch_file(root), "Subject: model: first change", "Subject: model: other")
    problems = run(pins, sources=False)
    assert any("gives the slug 'model-other'" in p for p in problems), problems


@pytest.mark.parametrize(
    "old, new, message",
    [
        ("Description: model: first change\n", "", "Description is missing"),
        ("Origin: vendor\n", "Origin: somewhere\n", "Origin 'somewhere'"),
        ("Forwarded: not-needed\n", "Forwarded: maybe\n", "Forwarded 'maybe'"),
        ("Applied-Upstream: 10.0.0\n", "Applied-Upstream: soon\n", "Applied-Upstream 'soon'"),
        ("Last-Update: 2026-11-29\n", "Last-Update: 2026-13-01\n", "not a date"),
        ("Last-Update: 2026-11-29\n", "Last-Update: 29/11/2026\n", "not a date"),
    ],
)
def test_bad_dep3_fields(repo, old, new, message):
    root, pins = repo
    edit(patch_file(root), old, new)
    problems = run(pins, sources=False)
    assert len(problems) == 1 and message in problems[0], problems


@pytest.mark.parametrize(
    "value",
    [
        "Origin: upstream, https://github.com/vllm-project/vllm/pull/1",
        "Forwarded: https://github.com/vllm-project/vllm/pull/1",
        "Applied-Upstream: 10.0.0, https://github.com/vllm-project/vllm/pull/1",
        "Applied-Upstream: https://github.com/vllm-project/vllm/pull/1",
    ],
)
def test_good_dep3_variants(repo, value):
    root, pins = repo
    field = value.split(":")[0]
    path = patch_file(root)
    path.write_text(re.sub(rf"^{field}: .*$", value, path.read_text(), count=1, flags=re.M))
    assert run(pins, sources=False) == []


def test_variants_agree_on_where_upstream_stands(repo):
    root, pins = repo
    first = patch_file(root)
    second = first.with_name("9.9.0.patch")
    second.write_bytes(first.read_bytes())
    edit(root / "patches/patches.toml", '"9.8.0:9.9.0"]', '"9.8.0", "9.9.0"]')
    assert run(pins, sources=False) == []
    edit(second, "Applied-Upstream: 10.0.0\n", "Applied-Upstream: 10.1.0\n")
    assert run(pins, sources=False) == [
        "patches/patches.toml [model-first-change]: variants 9.8.0, 9.9.0 differ in DEP-3 "
        "Origin/Forwarded/Applied-Upstream"
    ]


def test_hand_edited_patch_is_not_up_to_date(repo):
    root, pins = repo
    # the hunk still applies (at an offset), but export writes its real place:
    # on 9.8.0, which the variant was exported from, that is another file; on
    # 9.9.0 the change sits elsewhere anyway
    path = patch_file(root)
    text = path.read_text()
    path.write_text(
        re.sub(r"^@@ -(\d+),", lambda m: f"@@ -{int(m[1]) + 3},", text, count=1, flags=re.M)
    )
    assert run(pins) == [
        "patches/model-first-change/9.8.0.patch (9.8.0): apply + export of vLLM 9.8.0 does "
        "not give its bytes; run `vpatch apply 9.8.0` and `vpatch export build/vllm-9.8.0`"
    ]


def test_a_variant_must_give_the_same_change_on_every_release(repo):
    root, pins = repo
    # context the patch carries that 9.9.0's export tells otherwise: its function heading
    edit(patch_file(root), "@@ -2,7 +2,7 @@", "@@ -2,7 +2,7 @@ def somewhere")
    problems = run(pins)
    assert len(problems) == 2, problems
    assert "(9.9.0): apply + export of vLLM 9.9.0 does not give its change" in problems[1]


def test_patch_that_no_longer_applies(repo):
    root, pins = repo
    edit(patch_file(root), "-line 5\n", "-line 5 changed\n")
    problems = run(pins)
    assert any("9.9.0: its series does not apply" in p for p in problems), problems


def test_offline_skips_what_is_not_cached(repo, cache_root):
    _, pins = repo
    for f in (cache_root / "downloads").iterdir():
        f.unlink()
    result = lint.lint(pins, offline=True)
    assert result.problems == [] and len(result.skipped) == 2
    assert "not in the cache" in result.skipped[0]


def test_probes_must_cover_the_newest_series(repo):
    root, pins = repo
    meta = root / "patches/patches.toml"
    edit(meta, 'probe = [{ file = "vllm/config.py", uses = "never_there" }]\n', "")
    assert run(pins, sources=False) == [
        "patches.toml: no probe for config-allow-deepseek (the matrix cannot tell `upstream`)"
    ]


def test_a_status_the_series_does_not_make_is_a_problem(repo):
    """VERSIONS.lock's status is what the series makes it (PatchSet.status):
    9.9.0 carries model-first-change (eagle3 = true), so it is patched."""
    root, pins = repo
    lock.save(pins.with_release(dataclasses.replace(pins.get("9.9.0"), status="upstream-fix")))
    assert run(pins, sources=False) == [
        "VERSIONS.lock [9.9.0]: status 'upstream-fix', but its series makes it 'patched' "
        "(patches.toml: the spans, and `eagle3` of the patches that are EAGLE-3 itself)"
    ]
    meta = root / "patches/patches.toml"
    edit(meta, "eagle3 = true\n", "")
    assert len(run(pins, sources=False)) == 1  # now 9.8.0 is the one: both upstream-fix


def test_the_repository_itself_is_clean():
    # every check that needs no release sources; the up-to-date check against
    # each release is test_lint_real's (it downloads them)
    assert [str(p) for p in lint.lint(lock.load(), sources=False).problems] == []
