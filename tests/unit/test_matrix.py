"""The matrix on synthetic releases: statuses from `git apply` (clean, offset,
fuzz, conflict) and from probes (upstream), files read from cached sdists."""

import hashlib
import io
import json
import tarfile
from pathlib import Path

import pytest
from conftest import make_series
from vpatch import lock, probes, series
from vpatch.commands import matrix
from vpatch.errors import ConfigError
from vpatch.sources import refresh

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


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("VPATCH_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def sdist(cache: Path, version: str, files: dict[str, str]) -> lock.Release:
    """A release whose sdist (vllm-V/...) sits verified in the download cache."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for path, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"vllm-{version}/{path}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    data = buf.getvalue()
    name = f"vllm-{version}.tar.gz"
    (cache / "downloads").mkdir(parents=True, exist_ok=True)
    (cache / "downloads" / name).write_bytes(data)
    art = lock.Artifact("sdist", name, hashlib.sha256(data).hexdigest(), len(data))
    return lock.Release(version, f"v{version}", "abc1234", "patched", "", {"sdist": art})


@pytest.fixture
def patches(tmp_path) -> list[series.Patch]:
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
    return series.load(d).patches


@pytest.fixture
def meta(tmp_path) -> Path:
    path = tmp_path / "patches.toml"
    path.write_text(META)
    return path


def shifted(text: str) -> str:
    return "new 1\nnew 2\n" + text


UPSTREAM_MODEL = (
    "class Model(mod.Base, Eagle):\n"
    "    def forward(self):\n"
    "        for i in self.aux:\n"
    "            pass\n"
)


def tree(root: Path, files: dict[str, str]) -> Path:
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    return root


def test_each_status(tmp_path, patches, meta):
    release = {
        "vllm/a.py": LINES,  # clean
        "vllm/b.py": shifted(LINES),  # offset
        "vllm/c.py": LINES.replace("line 18\n", "line eighteen\n"),  # fuzz: context differs
        "vllm/model.py": UPSTREAM_MODEL,  # upstream wrote it its own way
    }
    got = matrix.classify(tree(tmp_path / "rel", release), patches, probes.load(meta))
    assert list(got.values()) == ["clean", "offset", "fuzz", "upstream"]
    assert "line five" in (tmp_path / "rel/vllm/a.py").read_text()  # applied in order


def test_conflict_and_missing_file(tmp_path, patches, meta):
    release = {"vllm/a.py": LINES.replace("line 5\n", "line 5 upstream\n"), "vllm/model.py": MODEL}
    got = matrix.classify(tree(tmp_path / "rel", release), patches, probes.load(meta))
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
    rel = tree(tmp_path / "rel", BASE)
    checks = probes.load(meta)
    before = probes.folder_files(rel, probes.patterns(checks))
    assert matrix.classify(rel, patches, checks)["0004-step-4"] == "clean"
    after = probes.folder_files(rel, probes.patterns(checks))
    assert not probes.holds(checks["step-4"], before)
    assert probes.holds(checks["step-4"], after)


def pins_of(tmp_path, *releases) -> lock.Lock:
    return lock.Lock({r.version: r for r in releases}, tmp_path / "VERSIONS.lock")


def test_build_over_cached_sdists(tmp_path, cache, patches, meta):
    old = sdist(cache, "9.8.0", {**BASE, "vllm/b.py": shifted(LINES)})
    new = sdist(cache, "10.0.0", {**BASE, "vllm/model.py": UPSTREAM_MODEL})
    pins = pins_of(tmp_path, old, new)
    d = patches[0].path.parent
    m = matrix.build(pins=pins, series_dir=d, meta_path=meta, jobs=2)
    data = json.loads(m.to_json())
    assert list(data) == ["releases"]
    assert list(data["releases"]) == ["9.8.0", "10.0.0"]  # by version, not text
    assert data["releases"]["9.8.0"] == {
        "0001-step-1": "clean",
        "0002-step-2": "offset",
        "0003-step-3": "clean",
        "0004-step-4": "clean",
    }
    assert data["releases"]["10.0.0"]["0004-step-4"] == "upstream"
    md = m.to_markdown()
    assert "| 9.8.0   | patched | 4/4   | clean | offset |" in md
    assert "- 0004: step-4" in md and "upstream: the release already has it" in md


def test_warm_runs_read_no_archive(tmp_path, cache, patches, meta):
    rel = sdist(cache, "9.8.0", BASE)
    pins = pins_of(tmp_path, rel)
    d = patches[0].path.parent
    first = matrix.build(pins=pins, series_dir=d, meta_path=meta, jobs=1)
    (cache / "downloads" / "vllm-9.8.0.tar.gz").unlink()  # warm: the few files are cached
    again = matrix.build(pins=pins, series_dir=d, meta_path=meta, jobs=1, offline=True)
    assert again.releases == first.releases
    kept = sorted(p.name for p in (cache / "files" / rel.artifacts["sdist"].sha256).rglob("*.py"))
    assert kept == ["a.py", "b.py", "c.py", "model.py"]


def test_unpinned_release_offline_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="not pinned"):
        refresh.resolve(pins_of(tmp_path), "0.1.0", offline=True)


# -- probes ---------------------------------------------------------------------

CODE = """
class Config:
    def check(self):
        allowed = ["llama", "qwen", "deepseek_v2"]
        if name == "Kimi":
            self.token = cfg.media_id
        else:
            self.token = cfg.image_id
"""


@pytest.mark.parametrize(
    "check, expected",
    [
        ({"list": "allowed", "includes": ["llama", "deepseek_v2"]}, True),
        ({"list": "allowed", "includes": ["kimi_k2"]}, False),
        ({"list": "gone", "includes": ["kimi_k2"], "or_absent": True}, True),
        ({"list": "allowed", "includes": ["kimi_k2"], "or_absent": True}, False),
        ({"when": "Kimi", "uses": "media_id"}, True),
        ({"when": "Kimi", "uses": "image_id"}, False),  # only in the else branch
        ({"function": "Config.check", "uses": "media_id"}, True),
        ({"function": "Config.other", "uses": "media_id"}, False),
        ({"class": "Config", "defines": "check"}, True),
        ({"class": "Config", "has_base": "object"}, False),
    ],
)
def test_check_kinds(tmp_path, check, expected):
    path = tmp_path / "patches.toml"
    items = ", ".join(f"{k} = {json.dumps(v)}" for k, v in check.items())
    path.write_text(f'[p]\nprobe = [{{ file = "pkg/*.py", {items} }}]\n')
    files = {"pkg/config.py": CODE, "pkg/sub/other.py": CODE.replace("Kimi", "Other")}
    assert probes.holds(probes.load(path)["p"], files) is expected


def test_globs_stay_in_one_folder():
    assert probes.matches("vllm/v1/spec_decode/eagle.py", "vllm/v1/spec_decode/*.py")
    assert not probes.matches("vllm/v1/spec_decode/dynamic/x.py", "vllm/v1/spec_decode/*.py")


@pytest.mark.parametrize(
    "text, message",
    [
        ('[p]\nprobe = [{ file = "a.py", uses = "x", typo = 1 }]\n', "unknown check keys typo"),
        ('[p]\nprobe = [{ file = "a.py" }]\n', "one of"),
        ('[p]\nprobe = [{ file = "a.py", has_base = "B" }]\n', "needs a class"),
        ("[p]\nprobes = []\n", "unknown keys probes"),
        ("[p\n", "not valid TOML"),
    ],
)
def test_bad_declarations_are_config_errors(tmp_path, text, message):
    path = tmp_path / "patches.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message):
        probes.load(path)


def test_no_probe_is_no_claim():
    assert not probes.holds([], {"a.py": "anything"})
