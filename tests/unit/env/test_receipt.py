"""env.receipt: vpatch.json and where the originals are kept."""

from __future__ import annotations

import pytest
from vpatch.env import receipt
from vpatch.errors import TreeError


def test_round_trip_and_paths(tmp_path):
    di = tmp_path / "vllm-9.9.1.dist-info"
    di.mkdir()
    assert receipt.read(di) is None
    rec = receipt.Receipt("9.9.1", "9.9.1", "ab" * 32, ["0001-a.patch"])
    rec.files["vllm/a.py"] = receipt.FileState("sha256=o", "sha256=p", 0o644, 123)
    rec.bytecode["vllm/__pycache__/a.cpython-311.pyc"] = receipt.FileState(
        "sha256=x", None, 0o644, 5, "unchecked-hash"
    )
    rec.record = receipt.FileState("sha256=r", None, 0o644, 7)
    receipt.path(di).write_bytes(rec.dumps())
    assert receipt.read(di) == rec
    # keys a later vpatch adds do not stop this one from undoing the install
    text = rec.dumps().replace(b'"release"', b'"by": "vpatch 9", "release"')
    receipt.path(di).write_bytes(text)
    assert receipt.read(di) == rec
    assert receipt.saved(di, "vllm/a.py") == di / "vpatch/orig/vllm/a.py.orig"
    assert receipt.saved_record(di) == di / "vpatch/RECORD.orig"


@pytest.mark.parametrize("text", [b"{", b'{"format": 99}', b'{"format": 1, "files": 3}'])
def test_unreadable_receipt(tmp_path, text):
    (tmp_path / "vpatch.json").write_bytes(text)
    with pytest.raises(TreeError, match="is not a vpatch receipt"):
        receipt.read(tmp_path)
