"""paths.py: nothing an archive, a wheel or a patch names may land outside
its destination."""

from pathlib import Path, PurePosixPath

import pytest
from vpatch.errors import UnsafePathError
from vpatch.paths import check_link, empty, inside, safe_relpath


@pytest.mark.parametrize("name", ["vllm/a.py", "a", "vllm/..b/c..py", "dir/"])
def test_relative_names_inside_are_kept(name):
    assert safe_relpath(name, "w.whl") == PurePosixPath(name)


@pytest.mark.parametrize(
    "name, why",
    [
        ("/etc/passwd", "absolute path"),
        ("", "absolute path"),
        ("C:/evil.py", "absolute path"),
        ("../evil.py", "escapes the destination"),
        ("vllm/../../evil.py", "escapes the destination"),
        ("vllm\\..\\..\\evil.py", "escapes the destination"),  # backslashes count as folders
    ],
)
def test_unsafe_names_are_refused(name, why):
    with pytest.raises(UnsafePathError, match=f"^w.whl: .*{why}"):
        safe_relpath(name, "w.whl")


def test_backslashes_become_folders():
    assert safe_relpath("vllm\\a.py", "w") == PurePosixPath("vllm/a.py")


@pytest.mark.parametrize(
    "link, target, ok",
    [
        ("vllm/a", "b.py", True),
        ("vllm/sub/a", "../b.py", True),
        ("vllm/a", "../setup.py", True),
        ("vllm/a", "../../outside", False),
        ("a", "..", False),
        ("vllm/a", "/etc/passwd", False),
    ],
)
def test_symlinks_must_resolve_inside(link, target, ok):
    if ok:
        check_link(Path("."), PurePosixPath(link), target, "s.tar.gz")
    else:
        with pytest.raises(UnsafePathError, match="points outside"):
            check_link(Path("."), PurePosixPath(link), target, "s.tar.gz")


def test_inside(tmp_path):
    (tmp_path / "root" / "a").mkdir(parents=True)
    (tmp_path / "root" / "out").symlink_to(tmp_path)
    assert inside(tmp_path / "root", tmp_path / "root" / "a" / "b")
    assert not inside(tmp_path / "root", tmp_path / "root" / ".." / "x")
    assert not inside(tmp_path / "root", tmp_path / "root" / "out" / "x")  # through a link


def test_empty_keeps_the_folder_and_does_not_follow_links(tmp_path):
    keep = tmp_path / "keep"
    keep.mkdir()
    (keep / "precious").write_text("x")
    folder = tmp_path / "folder"
    (folder / "sub" / "deeper").mkdir(parents=True)
    (folder / "sub" / "deeper" / "f").write_text("f")
    (folder / "file").write_text("x")
    (folder / "link").symlink_to(keep)
    empty(folder)
    assert folder.is_dir() and list(folder.iterdir()) == []
    assert (keep / "precious").read_text() == "x"  # the link went, not what it points at
