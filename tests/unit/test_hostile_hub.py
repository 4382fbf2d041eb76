"""Hostile hubs and hostile names for `vpatch doctor`'s hub reads (issue 37).

`vpatch doctor` runs as a user runs it (a process of its own, HF_HOME and
HF_ENDPOINT set) against the stand-in hub (tests/support/hub.py), whose
answers a case replaces with a hostile one. Each case checks the documented
exit code, exactly one `vpatch: error:` line last on stderr, no traceback,
and that nothing outside HF_HOME changed and HF_HOME holds no half-done
file. Time bounds are no speed assertions: a case gives doctor a short
deadline and checks the exit code and the message; the subprocess's own,
generous timeout is the failure signal.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from support import pairs as F
from support import synthetic as S
from support.hub import StandIn

TARGET, DRAFTER = "ok/target", "ok/drafter"
SPEC = '{"method": "eagle3", "model": "ok/drafter", "num_speculative_tokens": 3}'


@pytest.fixture(scope="module")
def standin(tmp_path_factory):
    root = tmp_path_factory.mktemp("hub")
    t, d = F.pair(root, sparse=True)
    s = StandIn()
    s.add(TARGET, t)
    s.add(DRAFTER, d)
    with s.running():
        yield s


@dataclass
class Box:
    dir: Path  # the user's files: HF_HOME is hf/ in it

    @property
    def hf(self) -> Path:
        return self.dir / "hf"

    @property
    def refs(self) -> Path:
        """Where huggingface_hub writes refs/<revision> for the drafter."""
        return self.hf / "hub" / "models--ok--drafter" / "refs"


@pytest.fixture
def box(tmp_path, standin) -> Box:
    standin.answer.clear()
    standin.reset()
    b = Box(tmp_path / "home")
    b.hf.mkdir(parents=True)
    (b.dir / "victim.txt").write_text("precious\n")
    return b


def doctor(standin: StandIn, box: Box, *args: str, env: dict[str, str] | None = None):
    """`vpatch doctor ARGS` as a user runs it; 60 s is the failure signal."""
    home = {"HF_HOME": str(box.hf), "HF_ENDPOINT": standin.url, "HF_TOKEN": ""}
    return subprocess.run(
        [sys.executable, "-m", "vpatch.cli", "doctor", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **home, **(env or {})},
        timeout=60,
    )


def one_line(r: subprocess.CompletedProcess, code: int) -> str:
    """The run ended with `code` and one error line, last; that line."""
    lines = r.stderr.strip().splitlines()
    errors = [ln for ln in lines if ln.startswith("vpatch: error:")]
    assert r.returncode == code, r.stderr
    assert len(errors) == 1 and lines[-1] == errors[0], r.stderr
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr, r.stderr
    return errors[0]


def whole_files_only(hf: Path) -> None:
    """HF_HOME holds nothing a failed run left half done."""
    for p in hf.rglob("*"):
        assert not p.name.endswith((".incomplete", ".lock", ".tmp")), p
        assert ".no_exist" not in p.parts, p


# -- 1. names: refused before any request, and nothing written outside HF_HOME ----------


def lenient(h, path: str) -> None:
    """A hub that resolves any revision to the default branch (as a mirror
    that does not check might): a name doctor sends is answered."""
    m = re.match(r"^/api/models/([^/]+/[^/]+)(?:/revision/.+)?$", path)
    if m:
        return h._model_info(m.group(1), "main")
    m = re.match(r"^/([^/]+/[^/]+)/resolve/.+/([^/]+)$", path)
    if m:
        return h._resolve(m.group(1), "main", m.group(2))
    h._send(404, b"not found")


def out_of_hf_home(box: Box) -> str:
    """A revision that, as refs/<revision>, is the victim beside HF_HOME."""
    return os.path.relpath(box.dir / "victim.txt", box.refs)


def pair(target: str = TARGET, drafter: str = DRAFTER) -> list[str]:
    return ["--target", target, "--drafter", drafter]


def serve(*flags: str, spec: str = SPEC) -> list[str]:
    return ["--", "vllm", "serve", TARGET, *flags, "--speculative-config", spec]


NAMES = {
    "drafter-at-revision": lambda b: pair(drafter=f"{DRAFTER}@{out_of_hf_home(b)}"),
    "target-at-revision": lambda b: pair(target=f"{TARGET}@{out_of_hf_home(b)}"),
    "drafter-at-absolute": lambda b: pair(drafter=f"{DRAFTER}@{b.dir / 'victim.txt'}"),
    "serve-revision": lambda b: serve("--revision", out_of_hf_home(b)),
    "spec-revision": lambda b: serve(
        spec=SPEC.replace("}", f', "revision": "{out_of_hf_home(b)}"}}')
    ),
    "empty-after-at": lambda b: pair(drafter=f"{DRAFTER}@"),
    "dot-dot-owner": lambda b: pair(target="../x"),
    "dot-dot-name": lambda b: pair(drafter="ok/.."),
}


@pytest.mark.parametrize("case", sorted(NAMES))
def test_a_name_is_refused_before_any_request(standin, box, case):
    """`--drafter 'ok/drafter@../../../../victim.txt'` overwrote victim.txt,
    beside HF_HOME, with the commit id (huggingface_hub writes
    refs/<revision>); the same through --revision and the speculative
    config's "revision". `ok/drafter@` advised `--revision ` with nothing
    after it; `../x` and `ok/..` were sent to the hub as ids. Now each is
    one line, exit 2, before any request, and nothing is written."""
    standin.answer[r"/revision/|/resolve/"] = lenient
    before = S.snapshot(box.dir)
    line = one_line(doctor(standin, box, *NAMES[case](box)), 2)
    assert standin.log == [], standin.log
    assert S.same(before, S.snapshot(box.dir)) == []
    assert (box.dir / "victim.txt").read_text() == "precious\n"
    if case == "empty-after-at":
        assert "nothing after @" in line and "--revision" not in line, line
    elif case.startswith("dot-dot"):
        assert "not a hub id" in line, line
    else:
        assert "is not a branch, tag or commit name" in line, line
