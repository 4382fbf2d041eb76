"""sources/listing.py: a release's tree as `materialize` writes it (names,
kinds, executable bits, sha256s, link targets), read without writing it:
from an sdist, a cached wheel, a remote wheel's RECORD, a local folder;
kept in the cache for sdists and cached wheels."""

from __future__ import annotations

import gzip
import io
import shutil
import tarfile
from pathlib import Path

import pytest
from support import REMOTE_MEMBERS
from support import synthetic as S
from vpatch import lock, sources
from vpatch.errors import ConfigError, IntegrityError
from vpatch.sources import cache, listing


def written(release: lock.Release, source: str, where: Path) -> listing.Entries:
    """What materialize writes, read back from the disk."""
    where.mkdir()
    sources.materialize(release, sources.resolve(release, source), where)
    return listing.folder_entries(where)


@pytest.fixture
def synthetic(tmp_path) -> lock.Release:
    rel = S.make_release(tmp_path / "world")
    cache.downloads().mkdir(parents=True)
    for f in (rel.sdist, rel.wheel):
        shutil.copy(f, cache.downloads())
    return lock.load(rel.root / "VERSIONS.lock").get(S.VERSION)


@pytest.mark.parametrize("source", ["sdist", "wheel", "auto"])
def test_the_listing_is_what_materialize_writes(synthetic, tmp_path, source):
    got = listing.entries(synthetic, source)
    assert got == written(synthetic, source, tmp_path / "tree")
    assert got["vllm"] == listing.FOLDER and got["vllm/config.py"][0] == "file"


def test_links_hard_links_and_executable_bits_of_an_sdist(tmp_path):
    raw = io.BytesIO()
    top = "vllm-9.9.0"
    with tarfile.open(fileobj=raw, mode="w") as tar:
        files = [
            ("tools/run.sh", b"#!/bin/sh\n", 0o755),
            ("x.sh", b"x\n", 0o700),
            ("a.py", b"a\n", 0o644),
        ]
        for name, data, mode in files:
            info = tarfile.TarInfo(f"{top}/{name}")
            info.size, info.mode = len(data), mode
            tar.addfile(info, io.BytesIO(data))
        link = tarfile.TarInfo(f"{top}/b.py")
        link.type, link.linkname = tarfile.SYMTYPE, "a.py"
        tar.addfile(link)
        hard = tarfile.TarInfo(f"{top}/tools/again.sh")
        hard.type, hard.linkname = tarfile.LNKTYPE, f"{top}/tools/run.sh"
        tar.addfile(hard)
    data = gzip.compress(raw.getvalue())
    archive = cache.downloads() / "vllm-9.9.0.tar.gz"
    archive.parent.mkdir(parents=True)
    archive.write_bytes(data)
    art = lock.Artifact("sdist", archive.name, S.sha256(data), len(data))
    rel = lock.Release("9.9.0", "v9.9.0", "abc", "patched", {"sdist": art})
    got = listing.entries(rel, "sdist")
    assert got == written(rel, "sdist", tmp_path / "tree")
    assert got["b.py"] == ("symlink", False, "a.py") and got["x.sh"][1]
    # a hard link is the file it names, whose mode the link's member sets last
    assert got["tools/again.sh"] == got["tools/run.sh"] == ("file", False, got["tools/run.sh"][2])


def test_a_wheel_that_is_not_cached_is_listed_from_its_record(remote_wheel, tmp_path):
    _, art = remote_wheel()
    rel = lock.Release("1.0", "v1.0", "c", "patched", {"wheel": art})
    got = listing.entries(rel, "wheel")
    assert not (cache.downloads() / art.filename).exists()  # nothing was downloaded
    assert set(got) >= {m for m in REMOTE_MEMBERS if not m.endswith(".so")}
    assert got == written(rel, "wheel", tmp_path / "tree")


def test_a_remote_record_that_is_not_the_locks_is_refused(remote_wheel):
    _, art = remote_wheel(record_sha="0" * 64)
    rel = lock.Release("1.0", "v1.0", "c", "patched", {"wheel": art})
    with pytest.raises(IntegrityError, match="record_sha256"):
        listing.entries(rel, "wheel")


def test_the_listing_is_kept_and_a_damaged_one_is_read_again(synthetic):
    first = listing.entries(synthetic, "sdist")
    kept = cache.cache_dir() / "files" / synthetic.artifact("sdist").sha256 / "entries.json"
    assert kept.is_file()
    (cache.downloads() / S.SDIST).unlink()  # the archive is not read again
    assert listing.entries(synthetic, "sdist", offline=True) == first
    kept.write_text("{not json")
    with pytest.raises(Exception, match="offline"):  # damaged: the archive is needed again
        listing.entries(synthetic, "sdist", offline=True)


def test_a_folder_source_is_listed_as_it_is_copied(release_dir, tmp_path):
    (release_dir / ".git").mkdir()
    (release_dir / ".git" / "HEAD").write_text("ref: x\n")
    (release_dir / "vllm" / "link.py").symlink_to("model.py")
    rel = lock.Release("9.9.0", "v9.9.0", "abc", "patched")
    got = listing.entries(rel, str(release_dir))
    assert ".git" not in got and got["vllm/link.py"] == ("symlink", False, "model.py")
    assert got == written(rel, str(release_dir), tmp_path / "tree")


def test_a_git_source_has_no_plain_folder_listing():
    rel = lock.Release("9.9.0", "v9.9.0", "abc", "patched")
    with pytest.raises(ConfigError, match="git checkout"):
        listing.entries(rel, "git")


def test_an_entry_is_what_git_sees(tmp_path):
    (tmp_path / "f").write_bytes(b"x")
    (tmp_path / "f").chmod(0o755)
    (tmp_path / "l").symlink_to("f")
    (tmp_path / "d").mkdir()
    assert listing.entry(tmp_path / "f") == ("file", True, S.sha256(b"x"))
    assert listing.entry(tmp_path / "f", digest=False) == ("file", True, "")
    assert listing.entry(tmp_path / "l") == ("symlink", False, "f")
    assert listing.entry(tmp_path / "d") == listing.FOLDER
