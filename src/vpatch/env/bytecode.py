"""The bytecode of changed modules.

A .pyc made with `--invalidation-mode unchecked-hash` is never checked
against its source again: left alone, it would keep running the old code
after the source is patched. So every .pyc of a changed module is found
(`__pycache__/<name>.<tag>[.opt-N].pyc`) and its invalidation mode read
from its header (PEP 552 flags); those of the target interpreter are
recompiled by that interpreter, in the mode and optimization level they
had; those of other interpreters (another cache tag) are removed, since
vpatch cannot compile them.
"""

from __future__ import annotations

import importlib.util
import json
import os
import py_compile
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from ..errors import PatchError

MODES = {0b00: "timestamp", 0b11: "checked-hash", 0b01: "unchecked-hash"}
TIMEOUT = 300

_NAME = re.compile(r"^(?P<stem>.+?)\.(?P<tag>[^.]+)(?:\.opt-(?P<opt>[12]))?\.pyc$")

# Runs in the target interpreter: compile each job's source into its cfile.
# `dfile` is the path tracebacks show (the installed file, not the staged one).
_COMPILE = r"""
import json, py_compile, sys
M = py_compile.PycInvalidationMode
modes = {"timestamp": M.TIMESTAMP, "checked-hash": M.CHECKED_HASH,
         "unchecked-hash": M.UNCHECKED_HASH}
for j in json.load(sys.stdin):
    py_compile.compile(j["source"], cfile=j["cfile"], dfile=j["dfile"], doraise=True,
                       optimize=j["optimize"], invalidation_mode=modes[j["mode"]])
"""


@dataclass(frozen=True)
class Pyc:
    path: Path
    source: Path  # the module's source file
    tag: str  # "cpython-311"
    optimize: int  # 0, 1, 2
    mode: str  # timestamp | checked-hash | unchecked-hash | unknown


def mode_of(data: bytes) -> str:
    """The invalidation mode in a .pyc header (PEP 552), or 'unknown'."""
    if len(data) < 16:
        return "unknown"
    return MODES.get(int.from_bytes(data[4:8], "little"), "unknown")


def find(source: Path) -> list[Pyc]:
    """The .pyc files in source's __pycache__ that belong to it, any tag."""
    cache = source.parent / "__pycache__"
    stem = source.name.removesuffix(".py")
    try:
        # plain names, not Paths: vLLM's model folders hold hundreds of .pyc
        names = sorted(n for n in os.listdir(cache) if n.startswith(stem + "."))
    except OSError:
        return []
    out = []
    for name in names:
        m = _NAME.match(name)
        p = cache / name
        if not m or m["stem"] != stem or not p.is_file():
            continue
        with open(p, "rb") as f:
            head = f.read(16)
        out.append(Pyc(p, source, m["tag"], int(m["opt"] or 0), mode_of(head)))
    return out


@dataclass(frozen=True)
class Job:
    source: Path  # the staged source to compile (its stat is what a timestamp pyc records)
    cfile: Path  # where to write the .pyc
    dfile: Path  # the installed source path, for tracebacks
    optimize: int
    mode: str


def compile_all(python: str, jobs: list[Job], magic: str = "") -> None:
    """Compile every job for python: in this process when python's bytecode
    magic number is ours (same CPython minor version: the same .pyc bytes),
    else by python itself (one child process). PatchError when a patched
    module does not compile."""
    if not jobs:
        return
    if magic and magic == importlib.util.MAGIC_NUMBER.hex():
        for j in jobs:
            try:
                py_compile.compile(
                    str(j.source),
                    cfile=str(j.cfile),
                    dfile=str(j.dfile),
                    doraise=True,
                    optimize=j.optimize,
                    invalidation_mode=_MODE[_known(j.mode)],
                )
            except py_compile.PyCompileError as e:
                msg = str(e).strip().splitlines()[-1] if str(e).strip() else "syntax error"
                raise PatchError(f"a patched module does not compile: {msg}") from None
        return
    payload = [
        {
            "source": str(j.source),
            "cfile": str(j.cfile),
            "dfile": str(j.dfile),
            "optimize": j.optimize,
            "mode": _known(j.mode),
        }
        for j in jobs
    ]
    try:
        res = subprocess.run(
            [python, "-c", _COMPILE],
            input=json.dumps(payload),
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        raise PatchError(f"{python} could not byte-compile the patched modules: {e}") from None
    if res.returncode != 0:
        err = (res.stderr.strip().splitlines() or [f"exit status {res.returncode}"])[-1]
        raise PatchError(f"a patched module does not compile under {python}: {err}")


def _known(mode: str) -> str:
    # an unreadable header: a plain timestamp pyc is always safe
    return mode if mode in _MODE else "timestamp"


_MODE = {
    "timestamp": py_compile.PycInvalidationMode.TIMESTAMP,
    "checked-hash": py_compile.PycInvalidationMode.CHECKED_HASH,
    "unchecked-hash": py_compile.PycInvalidationMode.UNCHECKED_HASH,
}
