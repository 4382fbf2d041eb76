"""Archives into source trees: an sdist without its top folder, a wheel's
Python files (from the cache, or member by member with range requests,
checked against the lock's RECORD hash), a local folder. Every member is
checked before anything is written."""

import io
import tarfile
import zipfile
from pathlib import Path

import pytest
from support import REMOTE_MEMBERS, listing
from vpatch.errors import ConfigError, IntegrityError, UnsafePathError
from vpatch.sources import extract


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
    assert listing(dest) == ["vllm/a.py", "vllm/cfg/x.json"]


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


def test_copy_folder_leaves_git_out_and_keeps_links_inside(tmp_path):
    src = tmp_path / "src"
    (src / "vllm").mkdir(parents=True)
    (src / ".git").mkdir()
    (src / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (src / "vllm" / "a.py").write_text("a\n")
    (src / "vllm" / "alias.py").symlink_to("a.py")
    dest = tmp_path / "dest"
    extract.copy_folder(src, dest)
    assert listing(dest) == ["vllm/a.py", "vllm/alias.py"]
    assert (dest / "vllm" / "alias.py").is_symlink()
    with pytest.raises(ConfigError, match="no such folder"):
        extract.copy_folder(tmp_path / "missing", tmp_path / "d2")


def test_hard_links_inside_the_sdist_are_kept_outside_refused(tmp_path):
    def hard(name, target):
        info = tarfile.TarInfo(name)
        info.type = tarfile.LNKTYPE
        info.linkname = target
        return info, b""

    ok = _tar(
        tmp_path / "ok.tar.gz",
        [_file("vllm-1.0/a.py", b"a"), hard("vllm-1.0/b.py", "vllm-1.0/a.py")],
    )
    dest = tmp_path / "dest"
    dest.mkdir()
    extract.extract_sdist(ok, dest, "vllm-1.0")
    assert (dest / "b.py").read_bytes() == b"a"
    bad = _tar(
        tmp_path / "bad.tar.gz", [_file("vllm-1.0/a.py"), hard("vllm-1.0/b.py", "/etc/passwd")]
    )
    (tmp_path / "d2").mkdir()
    with pytest.raises(UnsafePathError):
        extract.extract_sdist(bad, tmp_path / "d2", "vllm-1.0")
    assert list((tmp_path / "d2").iterdir()) == []


def test_damaged_archives_are_integrity_errors(tmp_path):
    (tmp_path / "s.tar.gz").write_bytes(b"\x1f\x8b not really gzip")
    with pytest.raises(IntegrityError, match="not a readable tar.gz"):
        extract.extract_sdist(tmp_path / "s.tar.gz", tmp_path, "vllm-1.0")
    with pytest.raises(ConfigError, match="no such file"):
        extract.open_zip(tmp_path / "missing.whl")
    whl = _wheel(tmp_path / "v.whl", {"vllm/a.py": b"a" * 5000})
    data = bytearray(whl.read_bytes())
    at = data.index(b"a" * 100)  # the stored member's bytes
    data[at : at + 100] = b"b" * 100
    whl.write_bytes(bytes(data))
    (tmp_path / "dest").mkdir()
    with pytest.raises(IntegrityError, match="a member cannot be read"):
        extract.extract_wheel(whl, tmp_path / "dest")


def test_record_member_must_be_one(tmp_path):
    with zipfile.ZipFile(io.BytesIO(), "w") as zf:
        zf.writestr("a-1.dist-info/RECORD", "")
        zf.writestr("b-1.dist-info/RECORD", "")
        with pytest.raises(IntegrityError, match="expected one .dist-info/RECORD, found 2"):
            extract.record_member(zf, "x.whl")


# -- a remote wheel's members alone, by range requests -------------------------------


def test_members_alone_are_fetched_and_checked(remote_wheel, range_server, tmp_path):
    whl, art = remote_wheel()
    dest = tmp_path / "dest"
    dest.mkdir()
    fetched = extract.extract_wheel_lazy(art, dest)
    assert listing(dest) == ["vllm/a.py", "vllm/sub/b.py"]
    assert (dest / "vllm/a.py").read_bytes() == REMOTE_MEMBERS["vllm/a.py"]
    assert 0 < fetched < (1 << 20) < whl.stat().st_size  # the extension module never crossed
    assert extract.record_sha256(range_server[1] + whl.name, art.size) == art.record_sha256


def test_member_that_does_not_match_record_writes_nothing(remote_wheel, tmp_path):
    _, art = remote_wheel(tamper="vllm/sub/b.py")
    dest = tmp_path / "dest"
    dest.mkdir()
    with pytest.raises(IntegrityError, match="vllm/sub/b.py does not match its RECORD"):
        extract.extract_wheel_lazy(art, dest)
    assert list(dest.iterdir()) == []


def test_record_that_does_not_match_the_lock(remote_wheel, tmp_path):
    _, art = remote_wheel(record_sha="0" * 64)
    dest = tmp_path / "dest"
    dest.mkdir()
    with pytest.raises(IntegrityError, match="record_sha256"):
        extract.extract_wheel_lazy(art, dest)
    assert list(dest.iterdir()) == []


def test_a_remote_file_that_is_no_zip(range_server):
    root, base = range_server
    (root / "x.whl").write_bytes(b"not a zip at all" * 100)
    with pytest.raises(IntegrityError, match="x.whl is not a valid zip file"):
        extract.record_sha256(base + "x.whl", 1600)
