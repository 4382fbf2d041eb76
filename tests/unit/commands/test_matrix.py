"""The matrix on synthetic releases: statuses from `git apply` (clean, offset,
fuzz, conflict) and from probes (upstream), files read from cached sdists."""

import dataclasses
from pathlib import Path

import pytest
from support import make_series, named_series, publish, sdist, text_file, write_tree
from vpatch import lock, probes, quilt
from vpatch.commands import matrix

LINES = "".join(f"line {i}\n" for i in range(1, 41))
MODEL = "class Model(Base):\n    def forward(self):\n        return 1\n"
BASE = {"vllm/a.py": LINES, "vllm/b.py": LINES, "vllm/c.py": LINES, "vllm/model.py": MODEL}
META = """
["step-1"]
probe = [{ file = "vllm/a.py", uses = "never_there" }]

["step-4"]
probe = [
  { file = "vllm/model.py", class = "Model", has_base = "Eagle" },
  { file = "vllm/model.py", function = "Model.forward", uses = "aux" },
]
"""


pytestmark = pytest.mark.usefixtures("cache_root")


@pytest.fixture
def patches(tmp_path) -> list[quilt.Patch]:
    d = make_series(
        tmp_path,
        BASE,
        [
            ("a: change five", {"vllm/a.py": LINES.replace("line 5\n", "line five\n")}),
            ("b: change ten", {"vllm/b.py": LINES.replace("line 10\n", "line ten\n")}),
            ("c: change twenty", {"vllm/c.py": LINES.replace("line 20\n", "line twenty\n")}),
            (
                "model: support eagle",
                {"vllm/model.py": MODEL.replace("Base)", "Base, Eagle)").replace("1", "self.aux")},
            ),
        ],
    )
    return quilt.load(d).patches


@pytest.fixture
def meta(tmp_path) -> Path:
    return text_file(tmp_path / "patches.toml", META)


def shifted(text: str) -> str:
    return "new 1\nnew 2\n" + text


UPSTREAM_MODEL = (
    "class Model(mod.Base, Eagle):\n"
    "    def forward(self):\n"
    "        for i in self.aux:\n"
    "            pass\n"
)


def test_each_status(tmp_path, patches, meta):
    release = {
        "vllm/a.py": LINES,  # clean
        "vllm/b.py": shifted(LINES),  # offset
        "vllm/c.py": LINES.replace("line 18\n", "line eighteen\n"),  # fuzz: context differs
        "vllm/model.py": UPSTREAM_MODEL,  # upstream wrote it its own way
    }
    got = matrix.classify(write_tree(tmp_path / "rel", release), patches, probes.load(meta))
    assert list(got.values()) == ["clean", "offset", "fuzz", "upstream"]
    assert "line five" in (tmp_path / "rel/vllm/a.py").read_text()  # applied in order


def test_conflict_and_missing_file(tmp_path, patches, meta):
    release = {"vllm/a.py": LINES.replace("line 5\n", "line 5 upstream\n"), "vllm/model.py": MODEL}
    got = matrix.classify(write_tree(tmp_path / "rel", release), patches, probes.load(meta))
    assert got == {
        "0001-step-1": "conflict",
        "0002-step-2": "conflict",  # b.py does not exist in this release
        "0003-step-3": "conflict",
        "0004-step-4": "clean",  # the probe says missing: base lacks Eagle
    }
    assert (tmp_path / "rel/vllm/a.py").read_text().count("upstream") == 1  # untouched


def test_probe_reads_the_pristine_files(tmp_path, patches, meta):
    # our own patch implements the behaviour: the probe holds on the patched
    # tree, but the matrix asks about the release as shipped
    rel = write_tree(tmp_path / "rel", BASE)
    checks = probes.load(meta)
    before = probes.folder_files(rel, probes.patterns(checks))
    assert matrix.classify(rel, patches, checks)["0004-step-4"] == "clean"
    after = probes.folder_files(rel, probes.patterns(checks))
    assert not probes.holds(checks["step-4"], before)
    assert probes.holds(checks["step-4"], after)


def pins_of(tmp_path, *releases) -> lock.Lock:
    return lock.Lock({r.version: r for r in releases}, tmp_path / "VERSIONS.lock")


def test_build_over_cached_sdists(tmp_path, cache_root, patches, meta):
    old = sdist(cache_root, "9.8.0", {**BASE, "vllm/b.py": shifted(LINES)})
    new = sdist(cache_root, "10.0.0", {**BASE, "vllm/model.py": UPSTREAM_MODEL})
    pins = pins_of(tmp_path, old, new)
    d = patches[0].path.parent
    m = matrix.build(pins=pins, series_dir=d, meta_path=meta, jobs=2)
    data = m.to_json()
    assert list(data) == ["releases", "series"]  # {"releases": ...} keeps its shape
    assert list(data["releases"]) == ["9.8.0", "10.0.0"]  # by version, not text
    assert data["series"] == {"9.8.0": "none", "10.0.0": "none"}  # no series of their own
    assert data["releases"]["9.8.0"] == {
        "0001-step-1": "clean",
        "0002-step-2": "offset",
        "0003-step-3": "clean",
        "0004-step-4": "clean",
    }
    assert data["releases"]["10.0.0"]["0004-step-4"] == "upstream"
    md = m.to_text()
    assert "| 9.8.0   | patched | none   | 4/4   | clean | offset | clean | clean    |" in md
    assert "- P4: 0004-step-4" in md and "upstream: the release already has it" in md


def test_warm_runs_read_no_archive(tmp_path, cache_root, patches, meta):
    rel = sdist(cache_root, "9.8.0", BASE)
    pins = pins_of(tmp_path, rel)
    d = patches[0].path.parent
    first = matrix.build(pins=pins, series_dir=d, meta_path=meta, jobs=1)
    (cache_root / "downloads" / "vllm-9.8.0.tar.gz").unlink()  # warm: the few files are cached
    again = matrix.build(pins=pins, series_dir=d, meta_path=meta, jobs=1, offline=True)
    assert again.releases == first.releases
    kept = sorted(
        p.name for p in (cache_root / "files" / rel.artifacts["sdist"].sha256).rglob("*.py")
    )
    assert kept == ["a.py", "b.py", "c.py", "model.py"]


def test_every_patch_of_every_series(tmp_path, cache_root):
    """Without series_dir: each patch of the patch set once, from the newest
    series that has it, in the tables' order (every series' order: 10.0.0
    puts b before a); `included` when an earlier patch brings it; and whether
    each release's own series applies."""
    a5 = {"vllm/a.py": LINES.replace("line 5\n", "line five\n")}
    model = {"vllm/model.py": MODEL.replace("Base)", "Base, Eagle)").replace("1", "self.aux")}
    b10 = {"vllm/b.py": LINES.replace("line 10\n", "line ten\n")}
    root = tmp_path / "root"
    # the tables in series order: 10.0.0 puts b before a, 9.8.0 a before model
    text_file(
        root / "patches/patches.toml",
        '["b-change-ten"]\nprobe = [{ file = "vllm/a.py", uses = "never" }]\n'
        '["a-change-five"]\n'
        '["model-support-eagle"]\nprobe = [{ file = "vllm/model.py", class = "Model", '
        'has_base = "Eagle" }]\n',
    )
    s1 = named_series(
        tmp_path / "s1",
        tmp_path / "series-9.8.0",
        BASE,
        [("a: change five", a5), ("model: support eagle", model)],
        ["0001-a-change-five.patch", "0002-model-support-eagle.patch"],
    )
    newer_a5 = {"vllm/a.py": LINES.replace("line 5\n", "line FIVE\n")}
    s2 = named_series(
        tmp_path / "s2",
        tmp_path / "series-10.0.0",
        BASE,
        [("b: change ten", b10), ("a: change five", newer_a5)],
        ["0001-b-change-ten.patch", "0002-a-change-five.patch"],
    )
    publish(root, "9.8.0", s1)
    publish(root, "10.0.0", s2)
    old = dataclasses.replace(sdist(cache_root, "9.8.0", BASE), status="patched")
    new = dataclasses.replace(
        sdist(cache_root, "10.0.0", {**BASE, "vllm/model.py": UPSTREAM_MODEL}),
        status="upstream-fix",
    )
    bare = sdist(cache_root, "10.1.0", {**BASE, "vllm/b.py": "other\n"})
    pins = lock.Lock({r.version: r for r in (old, new, bare)}, root / "VERSIONS.lock")
    found = matrix.every_patch(pins)
    assert [(v, p.name) for v, p in found] == [
        ("10.0.0", "0001-b-change-ten.patch"),
        ("10.0.0", "0002-a-change-five.patch"),  # in 9.8.0 too: the newest copy
        ("9.8.0", "0002-model-support-eagle.patch"),
    ]
    assert (
        found[1][1].path.read_bytes()
        == (tmp_path / "series-10.0.0/0002-a-change-five.patch").read_bytes()
    )
    m = matrix.build(pins=pins, jobs=1)
    stems = ["0001-b-change-ten", "0002-a-change-five", "0002-model-support-eagle"]
    assert m.patches == stems
    assert m.releases["9.8.0"] == dict(zip(stems, ["clean", "clean", "clean"], strict=True))
    assert m.releases["10.0.0"]["0002-model-support-eagle"] == "upstream"
    assert m.releases["10.1.0"]["0001-b-change-ten"] == "conflict"
    assert m.series == {"9.8.0": "applies", "10.0.0": "applies", "10.1.0": "none"}
    # 10.0.0's own series does not apply to 10.1.0's b.py: a release's series is its own
    assert m.source["0002-a-change-five"] == "10.0.0"


def test_included_when_an_earlier_patch_brings_it(tmp_path):
    """A patch whose probe holds only once the patches before it are applied
    (a patched series' 0001 brings the layer-0 fix) is `included`, not applied."""
    eagle = MODEL.replace("Base)", "Base, Eagle)")
    d = make_series(
        tmp_path,
        BASE,
        [
            ("model: eagle and more", {"vllm/model.py": eagle}),
            ("model: eagle", {"vllm/model.py": eagle, "vllm/a.py": LINES + "more\n"}),
        ],
    )
    toml = text_file(
        tmp_path / "inc.toml",
        '["step-2"]\nprobe = [{ file = "vllm/model.py", class = "Model", has_base = "Eagle" }]\n',
    )
    series = quilt.load(d).patches
    got = matrix.classify(write_tree(tmp_path / "rel", BASE), series, probes.load(toml))
    assert got == {"0001-step-1": "clean", "0002-step-2": "included"}
    assert (tmp_path / "rel/vllm/a.py").read_text() == LINES  # step 2 was not applied
    upstream = {**BASE, "vllm/model.py": eagle}
    got = matrix.classify(write_tree(tmp_path / "up", upstream), series, probes.load(toml))
    assert got["0002-step-2"] == "upstream"


def test_own_series(tmp_path, patches):
    rel = write_tree(tmp_path / "rel", BASE)
    assert matrix.own_series(rel, patches) == "applies"
    other = write_tree(tmp_path / "other", {**BASE, "vllm/a.py": "nothing\n"})
    assert matrix.own_series(other, patches) == "fails"
    assert matrix.own_series(tmp_path, []) == "none"


def test_a_patch_whose_code_upstream_removed_is_gone_not_a_conflict(tmp_path, patches, meta):
    """step-4's probe reads vllm/model.py; a release without it, where
    patches.toml says the code is gone, shows `gone`; without that word of a
    person's, or with the file still there, the patch is tried as any other."""
    release = {"vllm/a.py": LINES}
    checks = probes.load(meta)
    got = matrix.classify(write_tree(tmp_path / "a", release), patches, checks)
    assert got["0004-step-4"] == "conflict"
    removed = frozenset({"step-4"})
    got = matrix.classify(write_tree(tmp_path / "b", release), patches, checks, removed=removed)
    assert got["0004-step-4"] == "gone"
    kept = {**release, "vllm/model.py": MODEL}
    got = matrix.classify(write_tree(tmp_path / "c", kept), patches, checks, removed=removed)
    assert got["0004-step-4"] == "clean"
