"""errors.py: one hierarchy, one exit code per kind of failure, and OS errors
as one line naming the path and the cause."""

import errno
import re
from pathlib import Path

import pytest
from vpatch import errors

ROOT = Path(__file__).resolve().parents[2]
KINDS = [
    errors.ConfigError,
    errors.NetworkError,
    errors.IntegrityError,
    errors.PatchError,
    errors.TreeError,
    errors.UnsafePathError,
    errors.WheelError,
    errors.PreflightError,
    errors.GitError,
    errors.DiskError,
    errors.NewerRelease,
]


def test_every_kind_is_a_vpatch_error_with_its_own_exit_code():
    codes = [k.exit_code for k in KINDS]
    assert codes == list(range(2, 13))
    assert all(issubclass(k, errors.VpatchError) for k in KINDS)
    assert errors.VpatchError.exit_code == 1


def test_a_record_mismatch_is_a_wheel_error():
    assert issubclass(errors.RecordMismatch, errors.WheelError)
    assert errors.RecordMismatch.exit_code == errors.WheelError.exit_code


def test_every_kind_is_named_here():
    found = {
        c
        for c in vars(errors).values()
        if isinstance(c, type) and issubclass(c, errors.VpatchError) and "exit_code" in vars(c)
    }
    assert found - {errors.VpatchError} == set(KINDS)


def test_the_docs_document_every_exit_code():
    """docs/install.md's exit-code table has a row for every error kind, by its class."""
    text = (ROOT / "docs" / "install.md").read_text()
    rows = dict(re.findall(r"^\| (\d+) \| `(\w+)` \|", text, flags=re.M))
    assert {int(code): name for code, name in rows.items()} == {
        k.exit_code: k.__name__ for k in KINDS
    }


@pytest.mark.parametrize(
    "code, why",
    [
        (errno.ENOSPC, "no space left on the device"),
        (errno.EROFS, "read-only file system"),
        (errno.EACCES, "permission denied"),
        (errno.ENAMETOOLONG, "file name too long"),
    ],
)
def test_disk_error_says_where_and_why(code, why):
    e = errors.disk_error(OSError(code, "ignored", "/data/x"), "cannot write the wheel")
    assert isinstance(e, errors.DiskError)
    assert str(e) == f"cannot write the wheel: /data/x: {why}"


def test_disk_error_without_a_path_or_a_known_errno():
    assert str(errors.disk_error(OSError(errno.ENOSPC, "x"))) == "no space left on the device"
    e = errors.disk_error(OSError(errno.EBUSY, "Device or resource busy", "/mnt"), "unmount")
    assert str(e) == "unmount: /mnt: Device or resource busy"


def test_disk_error_of_an_os_error_without_errno_keeps_its_message():
    assert str(errors.disk_error(OSError("cannot copy x: disk full"), "copy")) == (
        "copy: cannot copy x: disk full"
    )
