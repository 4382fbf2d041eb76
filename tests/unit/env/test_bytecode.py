"""env.bytecode: finding a module's .pyc, their invalidation mode, and
compiling with the target interpreter."""

from __future__ import annotations

import importlib.util
import py_compile
import sys

import pytest
from vpatch.env import bytecode
from vpatch.errors import PatchError

TAG = sys.implementation.cache_tag
MODES = {
    "timestamp": py_compile.PycInvalidationMode.TIMESTAMP,
    "checked-hash": py_compile.PycInvalidationMode.CHECKED_HASH,
    "unchecked-hash": py_compile.PycInvalidationMode.UNCHECKED_HASH,
}


def test_find_reads_each_pyc_mode_tag_and_level(tmp_path):
    src = tmp_path / "model.py"
    src.write_text("X = 1\n")
    (tmp_path / "model2.py").write_text("Y = 2\n")
    for mode, opt in [("timestamp", 0), ("unchecked-hash", 1), ("checked-hash", 2)]:
        py_compile.compile(
            src,
            cfile=importlib.util.cache_from_source(src, optimization=opt or ""),
            optimize=opt,
            invalidation_mode=MODES[mode],
        )
    py_compile.compile(tmp_path / "model2.py")  # another module: not model's
    (tmp_path / "__pycache__" / "model.cpython-399.pyc").write_bytes(b"short")
    found = {p.path.name: (p.tag, p.optimize, p.mode) for p in bytecode.find(src)}
    assert found == {
        f"model.{TAG}.pyc": (TAG, 0, "timestamp"),
        f"model.{TAG}.opt-1.pyc": (TAG, 1, "unchecked-hash"),
        f"model.{TAG}.opt-2.pyc": (TAG, 2, "checked-hash"),
        "model.cpython-399.pyc": ("cpython-399", 0, "unknown"),
    }
    assert bytecode.find(tmp_path / "none.py") == []


MAGIC = importlib.util.MAGIC_NUMBER.hex()


@pytest.mark.parametrize("magic", [MAGIC, ""], ids=["in-process", "child"])
@pytest.mark.parametrize("mode", list(MODES))
def test_compile_all_keeps_the_mode(tmp_path, mode, magic):
    staged = tmp_path / "staged.py"
    staged.write_text("def f():\n    return 1 / 0\n")
    out = tmp_path / "out.pyc"
    final = tmp_path / "pkg" / "mod.py"
    bytecode.compile_all(sys.executable, [bytecode.Job(staged, out, final, 1, mode)], magic)
    data = out.read_bytes()
    assert bytecode.mode_of(data) == mode
    assert str(final).encode() in data  # tracebacks name the installed file
    assert b"__debug__" not in data


@pytest.mark.parametrize("magic", [MAGIC, ""], ids=["in-process", "child"])
def test_a_module_that_does_not_compile(tmp_path, magic):
    staged = tmp_path / "bad.py"
    staged.write_text("def f(:\n")
    with pytest.raises(PatchError, match="a patched module does not compile"):
        bytecode.compile_all(
            sys.executable,
            [bytecode.Job(staged, tmp_path / "o.pyc", staged, 0, "timestamp")],
            magic,
        )
    assert not (tmp_path / "o.pyc").exists()
    bytecode.compile_all(sys.executable, [])  # nothing to do: no child at all
