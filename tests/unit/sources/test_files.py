"""files.py: the few files of a release the matrix, lint and `vpatch pr` read,
taken from the cached sdist or wheel once and kept by the artifact's hash."""

import json
import zipfile

import pytest
from support import cache_file, listing, sdist, sha256, targz
from vpatch import lock
from vpatch.errors import IntegrityError, NetworkError
from vpatch.sources import files

FILES = {
    "vllm/a.py": "a\n",
    "vllm/b.py": "b\n",
    "vllm/sub/c.py": "c\n",
    "setup.py": "setup()\n",
}


def test_reads_what_the_globs_match_once(cache_root):
    rel = sdist(cache_root, "9.9.0", FILES)
    home = cache_root / "files" / rel.artifacts["sdist"].sha256
    tree = files.release_files(rel, {"vllm/*.py"})
    assert tree == home / "tree"
    assert listing(tree) == ["vllm/a.py", "vllm/b.py"]  # `*` stays in one folder
    assert (tree / "vllm/a.py").read_text() == "a\n"
    manifest = json.loads((home / "manifest.json").read_text())
    assert manifest["globs"] == {"vllm/*.py": ["vllm/a.py", "vllm/b.py"]}
    assert manifest["files"] == {f: sha256(FILES[f].encode()) for f in ("vllm/a.py", "vllm/b.py")}
    (cache_root / "downloads" / "vllm-9.9.0.tar.gz").unlink()
    # asked before: no archive needed; a new glob needs it again
    assert files.release_files(rel, {"vllm/*.py"}, offline=True) == tree
    with pytest.raises(NetworkError, match="--offline"):
        files.release_files(rel, {"vllm/*.py", "setup.py"}, offline=True)


def test_a_new_glob_adds_to_the_tree_and_the_manifest(cache_root):
    rel = sdist(cache_root, "9.9.0", FILES)
    files.release_files(rel, {"vllm/a.py"})
    tree = files.release_files(rel, {"vllm/a.py", "vllm/sub/*.py", "gone.py"})
    assert listing(tree) == ["vllm/a.py", "vllm/sub/c.py"]
    manifest = json.loads((tree.parent / "manifest.json").read_text())
    assert manifest["globs"] == {
        "gone.py": [],
        "vllm/a.py": ["vllm/a.py"],
        "vllm/sub/*.py": ["vllm/sub/c.py"],
    }
    assert sorted(manifest["files"]) == ["vllm/a.py", "vllm/sub/c.py"]


def test_a_damaged_manifest_reads_the_archive_again(cache_root):
    rel = sdist(cache_root, "9.9.0", FILES)
    tree = files.release_files(rel, {"setup.py"})
    (tree.parent / "manifest.json").write_text("{broken")
    (tree / "setup.py").unlink()
    assert listing(files.release_files(rel, {"setup.py"})) == ["setup.py"]


def test_wheel_only_releases_read_the_wheel_and_keep_the_x_bit(cache_root):
    path = cache_root / "w.whl"
    path.parent.mkdir(parents=True)
    with zipfile.ZipFile(path, "w") as zf:
        info = zipfile.ZipInfo("vllm/run.py")
        info.external_attr = 0o100755 << 16
        zf.writestr(info, "#!/usr/bin/env python\n")
        zf.writestr("vllm/a.py", "a\n")
        zf.writestr("vllm-1.0.dist-info/RECORD", "")
    art = cache_file(cache_root, "wheel", "vllm-1.0-py3-none-any.whl", path.read_bytes())
    rel = lock.Release("1.0", "v1.0", "c", "patched", {"wheel": art})
    tree = files.release_files(rel, {"vllm/*.py"})
    assert listing(tree) == ["vllm/a.py", "vllm/run.py"]
    assert (tree / "vllm/run.py").stat().st_mode & 0o777 == 0o755
    assert (tree / "vllm/a.py").stat().st_mode & 0o777 == 0o644


def test_an_unreadable_archive_is_an_integrity_error(cache_root):
    data = targz({"vllm-1.0/vllm/a.py": b"a\n"})[:-20]  # cut short
    art = cache_file(cache_root, "sdist", "vllm-1.0.tar.gz", data)
    rel = lock.Release("1.0", "v1.0", "c", "patched", {"sdist": art})
    with pytest.raises(IntegrityError, match="vllm-1.0.tar.gz cannot be read"):
        files.release_files(rel, {"vllm/a.py"})
