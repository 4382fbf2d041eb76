"""Trust bytes, not stamps: a flipped byte in a cached artifact or in the
derived file cache is refused and repaired (downloaded or read again), or
with --offline refused (IntegrityError, exit 4); one use hashes once."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import synthetic as S
from vpatch import lock, sources
from vpatch.commands import apply, wheel
from vpatch.errors import IntegrityError
from vpatch.sources import cache, files


@pytest.fixture(scope="module")
def rel(tmp_path_factory) -> S.Release:
    return S.make_release(tmp_path_factory.mktemp("verify"))


@pytest.fixture
def server(rel, tmp_path, monkeypatch) -> Iterator[S.Index]:
    with S.serving(rel.www, tmp_path / "cache", monkeypatch) as idx:
        yield idx


def release(rel: S.Release) -> lock.Release:
    return lock.load(rel.root / "VERSIONS.lock").get(S.VERSION)


def flip(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))


def tree(d: Path) -> dict[str, bytes]:
    return {
        p.relative_to(d).as_posix(): p.read_bytes()
        for p in d.rglob("*")
        if p.is_file() and ".git" not in p.parts
    }


@pytest.fixture
def hashed(monkeypatch) -> list[str]:
    """The names of the files cache.sha256_file hashed."""
    seen: list[str] = []
    real = cache.sha256_file

    def count(path: Path) -> str:
        got = real(path)  # a missing file is not hashed
        seen.append(Path(path).name)
        return got

    monkeypatch.setattr(cache, "sha256_file", count)
    monkeypatch.setattr(files, "sha256_file", count)
    return seen


def stamp(rel: S.Release, cached: Path, kind: str) -> Path:
    """A stamp claiming the right hash, as vpatch <= 0.1 wrote: not trusted."""
    p = cached.with_name(cached.name + ".sha256")
    p.write_text(f"{release(rel).artifact(kind).sha256} {cached.stat().st_size}\n")
    return p


def test_a_flipped_byte_in_the_sdist_is_refused_and_downloaded_again(rel, server, tmp_path):
    pins = lock.load(rel.root / "VERSIONS.lock")
    good = tmp_path / "good"
    apply.apply(S.VERSION, good, pins=pins)
    cached = tmp_path / "cache" / "downloads" / S.SDIST
    flip(cached)
    old = stamp(rel, cached, "sdist")
    said: list[str] = []
    again = tmp_path / "again"
    apply.apply(S.VERSION, again, pins=pins, say=said.append)
    assert tree(again) == tree(good)  # the repro: no damaged file in the tree
    assert cached.read_bytes() == rel.sdist.read_bytes() and not old.exists()
    assert server.full_downloads(S.SDIST) == 2
    damaged = [m for m in said if "damaged" in m]
    assert len(damaged) == 1 and S.SDIST in damaged[0] and "deleted it" in damaged[0]


def test_a_flipped_byte_in_the_wheel_is_refused_and_downloaded_again(
    rel, server, tmp_path, monkeypatch
):
    monkeypatch.setenv("VPATCH_ROOT", str(rel.root))
    good = wheel.build(S.VERSION, out=tmp_path / "good", pins=lock.load())
    cached = tmp_path / "cache" / "downloads" / S.WHEEL
    flip(cached)
    old = stamp(rel, cached, "wheel")
    said: list[str] = []
    again = wheel.build(S.VERSION, out=tmp_path / "again", say=said.append, pins=lock.load())
    assert isinstance(good, wheel.Built) and isinstance(again, wheel.Built)
    assert again.path.read_bytes() == good.path.read_bytes()
    assert cached.read_bytes() == rel.wheel.read_bytes() and not old.exists()
    assert server.full_downloads(S.WHEEL) == 2
    assert len([m for m in said if "damaged" in m]) == 1


def test_a_flipped_byte_in_the_wheel_is_not_used_for_a_tree(rel, server, tmp_path):
    """A tree from the wheel reads its members with range requests instead."""
    pins = lock.load(rel.root / "VERSIONS.lock")
    good = tmp_path / "good"
    apply.apply(S.VERSION, good, source="wheel", pins=pins)
    cached = cache.download(release(rel).artifact("wheel"))
    flip(cached)
    again = tmp_path / "again"
    apply.apply(S.VERSION, again, source="wheel", pins=pins)
    assert tree(again) == tree(good)
    assert not cached.exists() and server.full_downloads(S.WHEEL) == 1


def test_offline_a_damaged_file_is_an_integrity_error(rel, server, tmp_path):
    art = release(rel).artifact("sdist")
    path = cache.download(art)
    flip(path)
    with pytest.raises(IntegrityError, match="damaged.*without --offline") as e:
        cache.download(art, offline=True)
    assert S.SDIST in str(e.value) and not path.exists()
    assert e.value.exit_code == 4


@pytest.mark.parametrize("kind", ["sdist", "wheel"])
def test_one_use_hashes_once(kind, rel, server, tmp_path, hashed):
    art = release(rel).artifact(kind)
    cache.download(art)  # downloaded: hashed while it streamed
    assert hashed == []
    dest = tmp_path / "dest"
    dest.mkdir()
    sources.materialize(release(rel), kind, dest)
    assert hashed == [art.filename]


def test_the_file_cache_checks_what_it_kept(rel, server, tmp_path, hashed):
    globs = {"vllm/model.py", "vllm/*.py"}
    said: list[str] = []
    home = files.release_files(release(rel), globs, say=said.append)
    manifest = json.loads((home.parent / "manifest.json").read_text())
    model = home / "vllm" / "model.py"
    assert manifest["files"]["vllm/model.py"] == S.sha256(model.read_bytes())
    assert set(manifest["globs"]) == globs
    hashed.clear()
    assert files.release_files(release(rel), globs) == home  # warm: no archive opened
    assert S.SDIST not in hashed and "model.py" in hashed
    good = model.read_bytes()
    flip(model)
    hashed.clear()
    assert files.release_files(release(rel), {"vllm/model.py"}, say=said.append) == home
    assert model.read_bytes() == good
    assert hashed.count(S.SDIST) == 1  # read again from the archive, which was verified
    assert any("damaged" in m for m in said)
    assert set(json.loads((home.parent / "manifest.json").read_text())["globs"]) == globs


def test_a_manifest_without_hashes_is_read_again(rel, server, tmp_path, hashed):
    home = files.release_files(release(rel), {"vllm/model.py"})
    manifest = home.parent / "manifest.json"
    manifest.write_text(json.dumps({"vllm/model.py": ["vllm/model.py"]}))  # the old format
    (home / "vllm" / "model.py").write_text("not what the release has\n")
    hashed.clear()
    files.release_files(release(rel), {"vllm/model.py"})
    assert (home / "vllm" / "model.py").read_bytes() == rel.files["vllm/model.py"]
    assert "vllm/model.py" in json.loads(manifest.read_text())["files"]
