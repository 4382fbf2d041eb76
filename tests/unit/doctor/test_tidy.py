"""What a failed hub read takes back from the Hugging Face cache: what
huggingface_hub made for it goes, but for whole files and the refs that
name their commit; what was there before stays."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from vpatch.doctor import tidy
from vpatch.network import deadline, hubclient

REPO = "acme/d"
COMMIT = "a" * 40
STUCK = threading.Event()  # never set: a read stuck in a socket


def made_by_a_fetch(cache: Path, whole: bool) -> Path:
    """What hf_hub_download leaves mid-way: folders, a ref, a lock, a
    partial download, a .no_exist marker; with `whole`, config.json
    complete (its blob and the link to it)."""
    base = cache / "models--acme--d"
    (base / "refs").mkdir(parents=True)
    (base / "refs" / "main").write_text(COMMIT)
    (base / "blobs").mkdir()
    (base / "blobs" / "f00d.incomplete").write_bytes(b"half")
    (base / ".no_exist" / COMMIT).mkdir(parents=True)
    (base / ".no_exist" / COMMIT / "tokenizer_config.json").touch()
    (cache / ".locks" / "models--acme--d").mkdir(parents=True)
    (cache / ".locks" / "models--acme--d" / "f00d.lock").touch()
    (cache / "CACHEDIR.TAG").write_text("Signature: 8a477f597d28d172789f06886806bc55\n")
    snap = base / "snapshots" / COMMIT
    snap.mkdir(parents=True)
    if whole:
        (base / "blobs" / "beef").write_text("{}")
        (snap / "config.json").symlink_to("../../blobs/beef")
    return base


def test_a_failure_leaves_whole_files_and_their_ref(tmp_path):
    cache = tmp_path / "hub"
    with pytest.raises(KeyError), tidy.tidy(cache, REPO):
        base = made_by_a_fetch(cache, whole=True)
        raise KeyError("the next read failed")
    left = sorted(p.relative_to(cache).as_posix() for p in cache.rglob("*"))
    assert left == [
        "CACHEDIR.TAG",
        "models--acme--d",
        "models--acme--d/blobs",
        "models--acme--d/blobs/beef",
        "models--acme--d/refs",
        "models--acme--d/refs/main",
        "models--acme--d/snapshots",
        f"models--acme--d/snapshots/{COMMIT}",
        f"models--acme--d/snapshots/{COMMIT}/config.json",
    ]
    assert (base / "snapshots" / COMMIT / "config.json").read_text() == "{}"


def test_a_failure_before_any_whole_file_leaves_nothing(tmp_path):
    cache = tmp_path / "hub"
    with pytest.raises(KeyboardInterrupt), tidy.tidy(cache, REPO):
        made_by_a_fetch(cache, whole=False)
        raise KeyboardInterrupt
    assert not cache.exists()


def test_what_was_there_stays(tmp_path):
    cache = tmp_path / "hub"
    made_by_a_fetch(cache, whole=False)
    before = sorted(cache.rglob("*"))
    with pytest.raises(KeyError), tidy.tidy(cache, REPO):
        (cache / "models--acme--d" / "refs" / "v2").write_text(COMMIT)
        raise KeyError
    assert sorted(cache.rglob("*")) == before


def test_a_read_that_succeeds_keeps_all(tmp_path):
    cache = tmp_path / "hub"
    with tidy.tidy(cache, REPO):
        made_by_a_fetch(cache, whole=False)
    assert (cache / "models--acme--d" / "blobs" / "f00d.incomplete").exists()


def test_a_cache_that_was_there_stays_when_emptied(tmp_path):
    cache = tmp_path / "hub"
    cache.mkdir()
    (cache / "CACHEDIR.TAG").write_text("Signature: 8a477f597d28d172789f06886806bc55\n")
    with pytest.raises(KeyError), tidy.tidy(cache, REPO):
        made_by_a_fetch(cache, whole=False)
        raise KeyError
    assert sorted(p.name for p in cache.iterdir()) == ["CACHEDIR.TAG"]


def test_a_failure_leaves_the_cache_to_a_read_still_running(tmp_path):
    """The target and the drafter are read at once into one cache: the one
    that fails first left no cache folder for the other, which was making
    its repo folder in it (FileNotFoundError, exit 11). Now the cache's own
    entries go with the last read only."""
    cache = tmp_path / "hub"
    with tidy.tidy(cache, "acme/target"):  # still running while the drafter fails
        with pytest.raises(KeyError), tidy.tidy(cache, REPO):
            made_by_a_fetch(cache, whole=False)
            raise KeyError
        assert sorted(p.name for p in cache.iterdir()) == [".locks", "CACHEDIR.TAG"]
    with pytest.raises(KeyError), tidy.tidy(cache, "acme/target"):
        raise KeyError  # the last one: the cache it found was there, and stays
    assert cache.is_dir()


def test_reads_stopped_together_take_the_cache_back(tmp_path):
    """Stopped by the deadline or Ctrl-C, the reads are done: the main
    thread's taking back removes the cache folder they made."""
    cache = tmp_path / "hub"
    made: list = []

    def read(repo: str) -> None:
        with tidy.tidy(cache, repo):
            deadline.current().begin()
            if repo == REPO:
                made_by_a_fetch(cache, whole=False)
            made.append(repo)
            STUCK.wait(30)

    with pytest.raises(hubclient.Expired), hubclient.reads(1) as reads:
        jobs = [reads.start(r, read, r) for r in (REPO, "acme/target")]
        while len(made) < 2:
            STUCK.wait(0.01)
        reads.result(jobs[0])
    assert not cache.exists()
