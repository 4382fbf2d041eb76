"""`vpatch docs`: the README's patch table, docs/patches.md and doctor.md's
tables generated from patches.toml (and RULES); --check names the stale
ones and writes nothing; a write changes only the generated parts."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from support import drill, text_file
from vpatch import cli, lock, resources
from vpatch.doctor import behaviour, defects
from vpatch.errors import ConfigError
from vpatch.maintain import docs

PINS = lock.load()
MAIL = (
    "From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\n"
    "From: t <t@example.com>\nSubject: {slug}: fix\n\nWhy.\n\n{fields}\n"
    "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n"
)


def synthetic(tmp: Path) -> lock.Lock:
    """Two patches over releases 1.0-2.0: `a` in two variants with a gap, a
    backport that upstream has from 2.0 (1.0, 1.1, 1.3); `b`, ours, sent."""
    text_file(
        tmp / "patches" / "patches.toml",
        '["a"]\nreleases = ["1.0:1.1", "1.3"]\nsummary = "a works"\nmarkers = ["m_a"]\n'
        "doctor = \"key_a\"\nexplanation = '''\nThe long *why*.\n'''\n\n"
        '["b"]\nreleases = ["1.1:1.3"]\nsummary = "b works"\n',
    )
    fields = {
        "a/1.0.patch": "Origin: vendor",
        "a/1.3.patch": "Origin: backport, https://x/pull/7\nApplied-Upstream: 2.0",
        "b/1.1.patch": "Origin: vendor\nForwarded: https://x/pull/8",
    }
    for name, f in fields.items():
        text_file(tmp / "patches" / name, MAIL.format(slug=name.split("/")[0], fields=f))
    versions = ["1.0", "1.1", "1.2", "1.3", "2.0"]
    releases = {v: lock.Release(v, f"v{v}", "abc", "patched") for v in versions}
    return lock.Lock(releases, tmp / "VERSIONS.lock")


def test_runs_of_consecutive_pinned_releases():
    pinned = ["1.0", "1.1", "1.2", "1.3", "2.0"]
    assert docs.runs(["1.0", "1.1", "1.3"], pinned) == "1.0–1.1, 1.3"
    assert docs.runs(["1.2"], pinned) == "1.2" and docs.runs([], pinned) == ""


def test_the_patch_table_and_patches_md_come_from_the_table_and_dep3(tmp_path):
    pins = synthetic(tmp_path)
    assert docs.patch_table(pins).splitlines()[2:] == [
        "| [`a`](docs/patches.md#a) | 1.0–1.1, 1.3 (2 variants) | a works | upstream from 2.0 |",
        "| [`b`](docs/patches.md#b) | 1.1–1.3 | b works | sent upstream, not merged |",
    ]
    md = docs.patches_md(pins)
    a = md.split("## `a`\n", 1)[1].split("## `b`", 1)[0]
    assert "A works.\n" in a and "The long *why*.\n" in a
    assert "| variants | [1.0](../src/vpatch/data/patches/a/1.0.patch) (1.0–1.1), " in a
    assert "| upstream | upstream from 2.0; this is a backport of <https://x/pull/7> |" in a
    assert "| tier markers | `m_a` |" in a and "| doctor | `key_a` |" in a
    assert "| tier markers | none of its own |" in md.split("## `b`", 1)[1]


def checkout(tmp: Path, extra: tuple[docs.Block, ...] = ()) -> Path:
    """A checkout's docs with every block's markers (the patch set's, and
    `extra`), their content stale."""
    named: dict[str, list[str]] = {}
    for b in docs.blocks(lock.load(), extra=extra):
        if b.name:
            named.setdefault(b.path, []).append(b.name)
    for path, names in named.items():
        body = "".join(
            f"# x\n<!-- vpatch docs: {n} -->\nold\n<!-- vpatch docs: end of {n} -->\nkept\n"
            for n in names
        )
        text_file(tmp / path, body)
    return tmp


def test_check_names_the_stale_parts_and_write_mends_only_them(tmp_path):
    root = checkout(tmp_path)
    assert docs.stale(root, pins=PINS) == [
        "README.md (title)",
        "README.md (why)",
        "README.md (families)",
        "README.md (patch table)",
        "README.md (layout)",
        "docs/patches.md",
        "docs/doctor.md (defects table)",
        "docs/doctor.md (releases table)",
        "docs/doctor.md (families table)",
    ]
    assert not (root / "docs" / "patches.md").exists()  # --check writes nothing
    assert docs.write(root, pins=PINS) == ["README.md", "docs/patches.md", "docs/doctor.md"]
    assert docs.stale(root, pins=PINS) == [] and docs.write(root, pins=PINS) == []
    readme = (root / "README.md").read_text()
    assert readme.startswith("# x\n<!-- vpatch docs: title -->\n# vpatch — EAGLE-3")
    assert "<!-- vpatch docs: patch table -->\n| patch |" in readme
    assert "<!-- vpatch docs: end of patch table -->\nkept\n" in readme
    assert readme.endswith("<!-- vpatch docs: end of layout -->\nkept\n")
    assert "\nold\n" not in (root / "docs" / "doctor.md").read_text()


def test_a_doc_without_its_markers_is_a_config_error(tmp_path):
    root = checkout(tmp_path)
    text_file(root / "README.md", "# the markers are gone\n")
    with pytest.raises(ConfigError, match="README.md lacks the markers of its title"):
        docs.stale(root, pins=PINS)


def test_an_installed_vpatch_has_no_docs_to_write(monkeypatch):
    monkeypatch.setattr(resources, "checkout", lambda data=None: None)
    with pytest.raises(ConfigError, match="run it in a vpatch checkout"):
        docs.write(pins=PINS)


def test_the_command(tmp_path, monkeypatch, capsys):
    root = checkout(tmp_path, cli.generated_here())
    monkeypatch.setattr(resources, "checkout", lambda data=None: root)
    assert cli.main(["docs", "--check"]) == 5
    out, err = capsys.readouterr()
    assert "stale: README.md (patch table)" in out and "run `make docs`" in err
    assert "stale: README.md (commands)" in out  # the CLI's own part
    assert cli.main(["docs"]) == 0
    assert "wrote docs/patches.md" in capsys.readouterr().out
    assert cli.main(["docs", "--check"]) == 0


def test_a_block_is_found_between_its_own_markers():
    """block_text and rendered, which the tests' check example uses too."""
    ours = docs.Block("R.md", "commands", "new")
    other = docs.Block("R.md", "other", "x")
    text = f"a\n{ours.start}old\n{ours.end}\n{other.start}kept\n{other.end}\n"
    assert docs.block_text(text, ours) == "old" and docs.block_text(text, other) == "kept"
    new = docs.rendered(text, ours)
    assert docs.block_text(new, ours) == "new" and docs.block_text(new, other) == "kept"
    assert docs.block_text(text, docs.Block("R.md", "check example", "")) is None


def test_the_title_and_why_say_what_the_data_says():
    """The README's range is the lock's; the layer-0 crash's, the fix's
    spans (a carry moves both)."""
    pinned = PINS.versions()
    assert docs.title(PINS).endswith(f"vLLM {pinned[0]}–{pinned[-1]}")
    fixed = PINS.patchset.serving(PINS.patchset.fixes()["layer0"], pinned)
    why = " ".join(docs.why(PINS).split())
    assert f"every release of {fixed[0]}–{fixed[-1]} crashes" in why
    assert f"vLLM {PINS.versions('patched')[0]}–{PINS.versions('patched')[-1]}." in why


def test_the_layout_is_the_packages_docstrings_and_modules(tmp_path):
    """Each subpackage: its docstring up to the first colon or full stop, its
    modules and subpackages; then the top-level modules. A subpackage without
    a docstring is refused: the README would say nothing of it."""
    text_file(tmp_path / "lib" / "__init__.py", '"""The library: what it does. More."""\n')
    text_file(tmp_path / "lib" / "b.py", "")
    text_file(tmp_path / "lib" / "a.py", "")
    text_file(tmp_path / "lib" / "sub" / "__init__.py", '"""Sub."""\n')
    text_file(tmp_path / "core.py", "")
    text_file(tmp_path / "__main__.py", "")
    assert docs.layout(tmp_path).splitlines()[2:] == [
        "| `src/vpatch/lib/` | The library | a · b · sub/ |",
        "| `src/vpatch/*.py` | the core and the trees | core |",
    ]
    text_file(tmp_path / "bare" / "__init__.py", "")
    with pytest.raises(ConfigError, match="bare/__init__.py has no docstring"):
        docs.layout(tmp_path)
    # the real package: every subpackage has its row
    real = docs.layout()
    for d in docs.PACKAGE.iterdir():
        if (d / "__init__.py").is_file():
            assert f"| `src/vpatch/{d.name}/` |" in real


def test_the_table_is_the_rules():
    """Each row's releases behave alike and differ from the next row's, and
    the rows cover every pinned release once, in order."""
    known = behaviour.known_releases(PINS)
    rows = docs.summary_rows(PINS)
    covered = []
    for row in rows:
        first, _, last = row[0].partition("-")
        span = known[known.index(first) : known.index(last or first) + 1]
        covered += span
        for v in span:
            r = PINS.rules.at(v)
            p = v in defects.patched_eagle3(PINS)
            assert tuple(str(f(r, p, PINS)) for _, f in docs.SUMMARY_COLUMNS) == row[1:], v
    assert covered == known
    assert all(a[1:] != b[1:] for a, b in zip(rows, rows[1:], strict=False))
    assert len(docs.SUMMARY_HEAD) == len(rows[0])


def test_the_table_can_end_where_a_carry_proposes():
    """A carry regenerates the docs with LAST as it proposes it (`upto`),
    before rules.toml says so."""
    known = behaviour.known_releases(PINS)
    # the longest row (several releases), cut inside it and at its first
    spans = [r[0].partition("-")[::2] for r in docs.summary_rows(PINS)]
    first, last = max(spans, key=lambda s: known.index(s[1] or s[0]) - known.index(s[0]))
    second = known[known.index(first) + 1]
    assert known.index(last) > known.index(second)  # a cut inside the row
    assert docs.summary_rows(PINS, second)[-1][0] == f"{first}-{second}"
    assert docs.summary_rows(PINS, first)[-1][0] == first
    assert docs.summary_rows(PINS)[-1][0].endswith(PINS.rules.newest)


def serving_runs(root: Path) -> list[str]:
    """The release runs of docs/cpu-bugs.md's serving table (the tier's)."""
    text = (root / "docs/cpu-bugs.md").read_text()
    block = text.split("<!-- tier.py docs: serving -->\n", 1)[1].split("<!--", 1)[0]
    return [row.split("|")[1].strip() for row in block.splitlines()[2:]]


def test_the_checkouts_tier_writes_its_tables_into_a_copy_from_the_copys_data(tmp_path):
    """What a carry does with the tier's tables (they follow the lock): the
    checkout's tests/vllm/tier.py, run on a copy of its data and docs,
    writes the copy's tables from the copy's lock; the checkout's own stay."""
    root = docs.checkout_root()
    copy = tmp_path / "copy"
    shutil.copytree(root / resources.DATA, copy / resources.DATA)
    paths = docs.tier_paths(root)
    assert "docs/cpu-bugs.md" in paths and not set(paths) & set(docs.paths(PINS))
    for rel in paths:
        (copy / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(root / rel, copy / rel)
    ours = {rel: (root / rel).read_bytes() for rel in paths}
    docs.write_tier(root, copy)  # the same data: the same tables
    assert {rel: (copy / rel).read_bytes() for rel in paths} == ours
    pins = lock.load(copy / resources.DATA / "VERSIONS.lock")
    newest = pins.versions()[-1]
    drill.rewind_data(copy / resources.DATA, pins.versions()[-2])  # the data as one release ago
    docs.write_tier(root, copy)
    assert any(newest in run for run in serving_runs(root))
    assert not any(newest in run for run in serving_runs(copy))
    assert {rel: (root / rel).read_bytes() for rel in paths} == ours


def test_a_checkout_without_its_tier_or_whose_tier_fails_is_named(tmp_path):
    with pytest.raises(ConfigError, match=f"has no {docs.TIER}, which writes the tier's"):
        docs.tier_paths(tmp_path)
    text_file(
        tmp_path / docs.TIER,
        "import sys\nprint('wrote part')\nsys.exit('tier: error: the lock is broken')\n",
    )
    said = r"docs --paths failed \(exit 1\): 'tier: error: the lock is broken'"
    with pytest.raises(ConfigError, match=said):
        docs.tier_paths(tmp_path)
