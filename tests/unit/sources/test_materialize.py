"""sources/__init__.py: where a release's source comes from (`--source`):
auto, sdist, wheel (whole from the cache, else by range requests), git, a
folder; each into an empty destination."""

import subprocess

import pytest
from support import BASE, commit_tree, git, listing, sdist, write_tree
from vpatch import lock, sources
from vpatch.errors import ConfigError, IntegrityError, NetworkError
from vpatch.sources import cache, extract


@pytest.fixture
def bare_remote(tmp_path):
    """A local bare repo with a tagged commit, standing in for GitHub."""
    work = commit_tree(tmp_path / "upstream", {"vllm/a.py": "a\n"}, "release")
    git(work, "tag", "v9.9.0")
    bare = tmp_path / "remote.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(work), str(bare)], check=True)
    return bare, git(work, "rev-parse", "HEAD").strip()


def test_git_source_checks_out_the_tag(tmp_path, bare_remote):
    bare, sha_ = bare_remote
    rel = lock.Release("9.9.0", "v9.9.0", "g" + sha_[:9], "patched")
    dest = tmp_path / "dest"
    dest.mkdir()
    what = sources.materialize(rel, "git", dest, remote=bare.as_uri())
    assert (dest / "vllm/a.py").read_text() == "a\n" and "v9.9.0" in what


def test_git_source_with_wrong_commit_is_refused(tmp_path, bare_remote):
    bare, _ = bare_remote
    rel = lock.Release("9.9.0", "v9.9.0", "deadbeef1", "patched")
    dest = tmp_path / "dest"
    dest.mkdir()
    with pytest.raises(IntegrityError, match="pins deadbeef1"):
        sources.materialize(rel, "git", dest, remote=bare.as_uri())


def test_auto_prefers_the_sdist():
    with_sdist = lock.Release(
        "1", "v1", "c", "patched", {"sdist": lock.Artifact("sdist", "s", "h")}
    )
    without = lock.Release("1", "v1", "c", "patched", {})
    assert sources.resolve(with_sdist, "auto") == "sdist"
    assert sources.resolve(without, "auto") == "wheel"


def test_materialize_prefers_the_cache_then_ranges(remote_wheel, monkeypatch, tmp_path):
    _, art = remote_wheel()
    rel = lock.Release("1.0", "v1.0", "c", "patched", {"wheel": art})
    calls = []
    real = extract.extract_wheel_lazy
    monkeypatch.setattr(sources, "extract_wheel_lazy", lambda a, d: calls.append(a) or real(a, d))
    (tmp_path / "d1").mkdir()
    assert sources.materialize(rel, "wheel", tmp_path / "d1") == art.filename
    assert calls == [art]
    cache.download(art)  # now the whole wheel is cached
    (tmp_path / "d2").mkdir()
    sources.materialize(rel, "wheel", tmp_path / "d2")
    assert calls == [art]  # the cached file was used
    assert (tmp_path / "d1/vllm/a.py").read_bytes() == (tmp_path / "d2/vllm/a.py").read_bytes()


def test_offline_reads_no_ranges(remote_wheel, tmp_path):
    _, art = remote_wheel()
    rel = lock.Release("1.0", "v1.0", "c", "patched", {"wheel": art})
    (tmp_path / "d").mkdir()
    with pytest.raises(NetworkError, match="--offline"):
        sources.materialize(rel, "wheel", tmp_path / "d", offline=True)
    assert list((tmp_path / "d").iterdir()) == []


def test_sdist_source_from_the_cache(cache_root, tmp_path):
    rel = sdist(cache_root, "9.9.0", BASE)
    dest = tmp_path / "dest"
    dest.mkdir()
    assert (
        sources.materialize(rel, sources.resolve(rel, "auto"), dest, offline=True)
        == "vllm-9.9.0.tar.gz"
    )
    assert listing(dest) == sorted(BASE)


def test_folder_source_and_unknown_sources(release_dir, tmp_path):
    dest = tmp_path / "dest"
    dest.mkdir()
    rel = lock.Release("1", "v1", "c", "patched")
    assert sources.materialize(rel, str(release_dir), dest) == str(release_dir)
    assert listing(dest) == sorted(BASE)
    with pytest.raises(ConfigError, match="unknown source 'zip'; use one of auto, sdist"):
        sources.materialize(rel, "zip", tmp_path / "d2")
    with pytest.raises(NetworkError, match="--offline cannot be used with --source git"):
        sources.materialize(rel, "git", tmp_path / "d2", offline=True)


def test_a_relative_folder_source(monkeypatch, tmp_path):
    write_tree(tmp_path / "rel", {"vllm/a.py": "a\n"})
    monkeypatch.chdir(tmp_path)
    dest = tmp_path / "dest"
    dest.mkdir()
    sources.materialize(lock.Release("1", "v1", "c", "patched"), "./rel", dest)
    assert listing(dest) == ["vllm/a.py"]
