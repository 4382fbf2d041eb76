"""lint: a synthetic repository (lock, patches/, patches.toml) with one kind of
problem at a time, and the real repository, which must be clean."""

import re
from pathlib import Path

import pytest
from support import BASE, change, make_series, sdist
from vpatch import lock
from vpatch.commands import apply, export, lint

MODEL = BASE["vllm/model.py"]
META = """
["model-first-change"]
probe = [{ file = "vllm/model.py", uses = "never_there" }]

["config-allow-deepseek"]
probe = [{ file = "vllm/config.py", uses = "never_there" }]
"""


def write_series(root: Path, version: str, pins, release_dir, steps, tmp: Path) -> Path:
    """patches/<version> as export writes it, from steps made on BASE."""
    made = make_series(tmp, BASE, steps)
    tree = tmp / "tree"
    apply.apply(version, dest=tree, source=str(release_dir), series_dir=made, pins=pins)
    return export.export(tree, root / "patches" / version, pins).dir


STEPS = [
    ("model: first change", {"vllm/model.py": change(MODEL, "line 5\n", "line five\n")}),
    ("config: allow deepseek", {"vllm/config.py": "allow = ['llama', 'deepseek']\n"}),
]


@pytest.fixture
def repo(tmp_path, cache_root, release_dir):
    """(root, pins): two releases carrying the same two patches."""
    root = tmp_path / "root"
    root.mkdir()
    rels = {}
    for v in ("9.8.0", "9.9.0"):
        rel = sdist(cache_root, v, BASE)
        rels[v] = lock.Release(v, f"v{v}", "abc1234", "patched", f"patches/{v}", rel.artifacts)
    pins = lock.Lock(rels, root / "VERSIONS.lock")
    lock.save(pins)
    for v in rels:
        work = tmp_path / f"work-{v}"
        work.mkdir()
        write_series(root, v, pins, release_dir, STEPS, work)
    (root / "patches/patches.toml").write_text(META)
    return root, pins


def run(pins, **kw) -> list[str]:
    result = lint.lint(pins, meta_path=pins.path.parent / "patches/patches.toml", **kw)
    return [str(p) for p in result.problems]


def patch_file(root: Path, v: str = "9.9.0", n: int = 1) -> Path:
    return sorted((root / "patches" / v).glob(f"{n:04d}-*.patch"))[0]


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


def test_a_consistent_repository_is_clean(repo):
    _, pins = repo
    assert run(pins) == []


def test_unlisted_and_missing_patches(repo):
    root, pins = repo
    d = root / "patches/9.9.0"
    (d / "0003-extra.patch").write_bytes(patch_file(root).read_bytes())
    edit(
        d / "series",
        "0002-config-allow-deepseek.patch\n",
        "0002-config-allow-deepseek.patch\n0004-gone.patch\n",
    )
    problems = run(pins, sources=False)
    assert "patches/9.9.0/0003-extra.patch: not listed in the series file" in problems
    assert "patches/9.9.0/series: lists 0004-gone.patch, which does not exist" in problems


def test_series_folder_not_pinned(repo):
    root, pins = repo
    (root / "patches/1.0.0").mkdir()
    (root / "patches/1.0.0/series").write_text("")
    assert run(pins, sources=False) == [
        "patches/1.0.0: no release in VERSIONS.lock pins this series"
    ]


def test_file_name_must_match_number_and_subject(repo):
    root, pins = repo
    d = root / "patches/9.9.0"
    old = patch_file(root).name
    (d / old).rename(d / "0001-something-else.patch")
    edit(d / "series", old, "0001-something-else.patch")
    problems = run(pins, sources=False)
    assert any("name it 0001-model-first-change.patch" in p for p in problems), problems


@pytest.mark.parametrize(
    "old, new, message",
    [
        ("Description: model: first change\n", "", "Description is missing"),
        ("Origin: vendor\n", "Origin: somewhere\n", "Origin 'somewhere'"),
        ("Forwarded: not-needed\n", "Forwarded: maybe\n", "Forwarded 'maybe'"),
        ("Applied-Upstream: 0.18.0\n", "Applied-Upstream: soon\n", "Applied-Upstream 'soon'"),
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
        "Applied-Upstream: 0.18.0, https://github.com/vllm-project/vllm/pull/1",
        "Applied-Upstream: https://github.com/vllm-project/vllm/pull/1",
    ],
)
def test_good_dep3_variants(repo, value):
    root, pins = repo
    field = value.split(":")[0]
    for v in ("9.8.0", "9.9.0"):
        path = patch_file(root, v)
        path.write_text(re.sub(rf"^{field}: .*$", value, path.read_text(), count=1, flags=re.M))
    assert run(pins, sources=False) == []


def test_hand_edited_patch_is_not_up_to_date(repo):
    root, pins = repo
    # the hunk still applies (at an offset), but export writes its real place
    path = patch_file(root)
    text = path.read_text()
    path.write_text(
        re.sub(r"^@@ -(\d+),", lambda m: f"@@ -{int(m[1]) + 3},", text, count=1, flags=re.M)
    )
    problems = run(pins)
    assert len(problems) == 1
    assert "0001-model-first-change.patch: is not what apply + export gives" in problems[0]


def test_patch_that_no_longer_applies(repo):
    root, pins = repo
    edit(patch_file(root), "-line 5\n", "-line 5 changed\n")
    problems = run(pins)
    assert any("does not apply to vLLM 9.9.0" in p for p in problems), problems


def test_offline_skips_what_is_not_cached(repo, cache_root):
    _, pins = repo
    for f in (cache_root / "downloads").iterdir():
        f.unlink()
    result = lint.lint(pins, meta_path=pins.path.parent / "patches/patches.toml", offline=True)
    assert result.problems == [] and len(result.skipped) == 2
    assert "not in the cache" in result.skipped[0]


def test_same_patch_must_carry_the_same_change(repo, tmp_path, release_dir):
    root, pins = repo
    other = [STEPS[0], ("config: allow deepseek", {"vllm/config.py": "allow = ['deepseek']\n"})]
    work = tmp_path / "work-other"
    work.mkdir()
    write_series(root, "9.8.0", pins, release_dir, other, work)
    problems = run(pins)
    assert problems == [
        "patches/9.8.0/0002-config-allow-deepseek.patch: changes other lines than "
        "patches/9.9.0/0002-config-allow-deepseek.patch; make them agree, or declare the "
        "release a variant in patches.toml"
    ]
    # a declared variant is fine; a patch only some releases carry is fine too
    edit(
        root / "patches/patches.toml",
        '["config-allow-deepseek"]\n',
        '["config-allow-deepseek"]\nvariants = [["9.8.0"]]\n',
    )
    assert run(pins) == []


def test_probes_must_cover_the_newest_series(repo):
    root, pins = repo
    meta = root / "patches/patches.toml"
    edit(meta, '["config-allow-deepseek"]', '["config-allow-deepseek-old"]')
    assert run(pins, sources=False) == [
        "patches.toml: no probe for 0002-config-allow-deepseek.patch "
        "(the matrix cannot tell `upstream`)",
        "patches.toml: [config-allow-deepseek-old] names no patch",
    ]


def test_the_repository_itself_is_clean():
    # every check that needs no release sources; the up-to-date check against
    # each release is test_lint_real's (it downloads them)
    assert [str(p) for p in lint.lint(sources=False).problems] == []
