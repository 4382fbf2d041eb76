import hashlib
import io
import subprocess
import tarfile
import zipfile
from pathlib import Path

import pytest
from conftest import git
from vpatch import lock, sources
from vpatch.errors import IntegrityError, NetworkError, UnsafePathError
from vpatch.sources import cache, extract, index


@pytest.fixture(autouse=True)
def cache_root(tmp_path, monkeypatch):
    monkeypatch.setenv("VPATCH_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_verified_download_is_renamed_into_place(tmp_path):
    src = tmp_path / "file.bin"
    src.write_bytes(b"payload" * 1000)
    dest = tmp_path / "out" / "file.bin"
    dest.parent.mkdir()
    cache.fetch_verified(src.as_uri(), dest, sha(src.read_bytes()))
    assert dest.read_bytes() == src.read_bytes()
    assert [p.name for p in dest.parent.iterdir()] == ["file.bin"]


def test_hash_mismatch_deletes_and_fails(tmp_path):
    src = tmp_path / "file.bin"
    src.write_bytes(b"tampered")
    dest = tmp_path / "out" / "file.bin"
    dest.parent.mkdir()
    with pytest.raises(IntegrityError, match="does not match"):
        cache.fetch_verified(src.as_uri(), dest, "0" * 64)
    assert list(dest.parent.iterdir()) == []


def test_download_uses_the_index_then_the_cache(tmp_path, monkeypatch, cache_root):
    data = b"wheel bytes"
    (tmp_path / "x.whl").write_bytes(data)
    art = lock.Artifact("wheel", "x.whl", sha(data), len(data))
    calls = []

    def files(project):
        calls.append(project)
        return {"x.whl": index.IndexFile("x.whl", (tmp_path / "x.whl").as_uri(), sha(data), 0)}

    monkeypatch.setattr(cache, "index_files", files)
    path = cache.download(art)
    assert path.read_bytes() == data and path.parent == cache_root / "downloads"
    assert cache.download(art, offline=True) == path
    assert calls == ["vllm"]


def test_offline_with_nothing_cached_says_so():
    art = lock.Artifact("sdist", "vllm-0.0.1.tar.gz", "0" * 64)
    with pytest.raises(NetworkError, match="--offline"):
        cache.download(art, offline=True)


def test_cache_entry_with_wrong_hash_is_not_used(cache_root):
    (cache_root / "downloads").mkdir(parents=True)
    (cache_root / "downloads" / "x.whl").write_bytes(b"corrupt")
    art = lock.Artifact("wheel", "x.whl", sha(b"good"))
    assert cache.cached(art) is None


def test_index_url_follows_pip_configuration(monkeypatch):
    index.index_url.cache_clear()
    monkeypatch.setenv("PIP_INDEX_URL", "https://mirror.invalid/simple")
    try:
        assert index.index_url() == "https://mirror.invalid/simple/"
    finally:
        index.index_url.cache_clear()


def _tar(path: Path, members: list[tuple[tarfile.TarInfo, bytes]]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for info, data in members:
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def _file(name, data=b"x"):
    return tarfile.TarInfo(name), data


def _link(name, target):
    info = tarfile.TarInfo(name)
    info.type = tarfile.SYMTYPE
    info.linkname = target
    return info, b""


def test_sdist_is_unpacked_without_its_top_folder(tmp_path):
    tgz = _tar(
        tmp_path / "s.tar.gz", [_file("vllm-1.0/vllm/a.py", b"a"), _file("vllm-1.0/setup.py")]
    )
    dest = tmp_path / "dest"
    dest.mkdir()
    extract.extract_sdist(tgz, dest, "vllm-1.0")
    assert (dest / "vllm/a.py").read_bytes() == b"a" and (dest / "setup.py").exists()


@pytest.mark.parametrize(
    "bad",
    [
        _file("vllm-1.0/../../evil.py"),
        _file("/etc/evil.py"),
        _file("other/evil.py"),
        _link("vllm-1.0/vllm/link", "../../../outside"),
        _link("vllm-1.0/vllm/abs", "/etc/passwd"),
    ],
    ids=["dotdot", "absolute", "outside-top", "symlink-out", "symlink-abs"],
)
def test_unsafe_sdist_members_are_refused_before_any_write(tmp_path, bad):
    tgz = _tar(tmp_path / "s.tar.gz", [_file("vllm-1.0/vllm/ok.py"), bad])
    dest = tmp_path / "d" / "dest"
    dest.mkdir(parents=True)
    with pytest.raises(UnsafePathError):
        extract.extract_sdist(tgz, dest, "vllm-1.0")
    assert list(dest.iterdir()) == []
    assert not (tmp_path / "evil.py").exists()


def _wheel(path: Path, members: dict[str, bytes], links: tuple[str, ...] = ()) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in members.items():
            info = zipfile.ZipInfo(name)
            if name in links:
                info.external_attr = (0o120777) << 16
            zf.writestr(info, data)
    return path


def test_wheel_source_keeps_python_files_only(tmp_path):
    whl = _wheel(
        tmp_path / "v.whl",
        {
            "vllm/a.py": b"a",
            "vllm/_C.abi3.so": b"\x7fELF",
            "vllm/cfg/x.json": b"{}",
            "vllm-1.0.dist-info/RECORD": b"",
        },
    )
    dest = tmp_path / "dest"
    dest.mkdir()
    extract.extract_wheel(whl, dest)
    got = sorted(p.relative_to(dest).as_posix() for p in dest.rglob("*") if p.is_file())
    assert got == ["vllm/a.py", "vllm/cfg/x.json"]


@pytest.mark.parametrize("name", ["../evil.py", "/abs/evil.py", "vllm/../../evil.py"])
def test_unsafe_wheel_members_are_refused(tmp_path, name):
    whl = _wheel(tmp_path / "v.whl", {"vllm/a.py": b"a", name: b"evil"})
    dest = tmp_path / "dest"
    dest.mkdir()
    with pytest.raises(UnsafePathError):
        extract.extract_wheel(whl, dest)
    assert list(dest.iterdir()) == []


def test_symlink_in_wheel_is_refused(tmp_path):
    whl = _wheel(tmp_path / "v.whl", {"vllm/link": b"/etc/passwd"}, links=("vllm/link",))
    dest = tmp_path / "dest"
    dest.mkdir()
    with pytest.raises(UnsafePathError, match="symlink"):
        extract.extract_wheel(whl, dest)


def test_bad_zip_is_a_clear_error(tmp_path):
    bad = tmp_path / "v.whl"
    bad.write_bytes(b"not a zip")
    with pytest.raises(IntegrityError, match="not a valid zip"):
        extract.extract_wheel(bad, tmp_path)


def test_folder_with_symlink_out_is_refused(tmp_path):
    src = tmp_path / "src"
    (src / "vllm").mkdir(parents=True)
    (src / "vllm" / "link").symlink_to("/etc")
    with pytest.raises(UnsafePathError):
        extract.copy_folder(src, tmp_path / "dest")


@pytest.fixture
def bare_remote(tmp_path):
    """A local bare repo with a tagged commit, standing in for GitHub."""
    work = tmp_path / "upstream"
    work.mkdir()
    git(work, "init", "-q")
    (work / "vllm").mkdir()
    (work / "vllm" / "a.py").write_text("a\n")
    git(work, "add", "-A")
    git(work, "commit", "-qm", "release")
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
        "1", "v1", "c", "patched", "", {"sdist": lock.Artifact("sdist", "s", "h")}
    )
    without = lock.Release("1", "v1", "c", "patched", "", {})
    assert sources.resolve(with_sdist, "auto") == "sdist"
    assert sources.resolve(without, "auto") == "wheel"
