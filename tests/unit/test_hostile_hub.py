"""Hostile hubs and hostile names for `vpatch doctor`'s hub reads.

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

import json
import os
import re
import signal
import struct
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from support import cli
from support import hub as H
from support import pairs as F
from support import synthetic as S
from support import vllm_server as V
from support.hub import StandIn

TARGET, DRAFTER = "ok/target", "ok/drafter"
SPEC = '{"method": "eagle3", "model": "ok/drafter", "num_speculative_tokens": 3}'


NESTED = b"[" * 100_000 + b"]" * 100_000  # deeper than json.loads goes: RecursionError
FC = 7168 * 21504 * 2  # bytes of a BF16 fc.weight [7168, 21504]
MALFORMED = {  # safetensors headers that the safetensors library refuses
    "negative-shape": {
        "fc.weight": {"dtype": "BF16", "shape": [-7168, -21504], "data_offsets": [0, FC]}
    },
    "negative-offsets": {
        "fc.weight": {"dtype": "BF16", "shape": [7168, 21504], "data_offsets": [-FC, 0]}
    },
    "string-shape": {
        "fc.weight": {"dtype": "BF16", "shape": ["7168", "21504"], "data_offsets": [0, FC]}
    },
}


@pytest.fixture(scope="module")
def standin(tmp_path_factory):
    """ok/target and ok/drafter, a good pair; bad/* drafters and targets
    whose files are hostile."""
    root = tmp_path_factory.mktemp("hub")
    t, d = F.pair(root, sparse=True)
    s = StandIn()
    s.add(TARGET, t)
    s.add(DRAFTER, d)
    cfg = json.loads((d / "config.json").read_text())
    bad = {
        "nested-header": {"model.safetensors": struct.pack("<Q", len(NESTED)) + NESTED},
        "nested-index": {"model.safetensors.index.json": NESTED},
        "nested-config": {"config.json": NESTED},
        "escaping-index": {
            "model.safetensors.index.json": json.dumps(
                {"weight_map": {"fc.weight": "../../../etc/passwd"}}
            ).encode()
        },
    }
    for name, meta in MALFORMED.items():
        raw = json.dumps(meta).encode()
        bad[name] = {"model.safetensors": struct.pack("<Q", len(raw)) + raw}
    shards = [f"model-{i:06d}-of-100000.safetensors" for i in range(100_000)]
    bad["many-shards"] = {
        "model.safetensors.index.json": json.dumps(
            {"weight_map": {f"t{i}": n for i, n in enumerate(shards)}}
        ).encode()
    }
    for name, files in bad.items():
        folder = F.write_model(root / name, cfg)
        for file, data in files.items():
            (folder / file).write_bytes(data)
        s.add(f"bad/{name}", folder)
    s.folders = {"nested-config": root / "nested-config"}
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
    """`vpatch doctor ARGS` as a user runs it; 60 s is the failure signal.
    It runs in an empty folder of an empty folder, so that a relative name
    (`../x`) names nothing that happens to exist beside the checkout."""
    home = {"HF_HOME": str(box.hf), "HF_ENDPOINT": standin.url, "HF_TOKEN": ""}
    with tempfile.TemporaryDirectory() as d:
        (Path(d) / "cwd").mkdir()
        return cli.vpatch(
            "doctor", *args, env={**home, **(env or {})}, cwd=Path(d) / "cwd", timeout=60
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
    """HF_HOME holds nothing a failed run left half done: no partial
    download, marker, or ref to nothing (huggingface_hub keeps the lock of
    a file it fetched whole)."""
    for p in hf.rglob("*"):
        assert not p.name.endswith((".incomplete", ".tmp")), p
        assert ".no_exist" not in p.parts, p
        if "refs" in p.parts and p.is_file():
            assert (p.parents[1] / "snapshots" / p.read_text().strip()).is_dir(), p


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


# -- 2. one deadline for the hub reads, whatever the server does ------------------------

HEAD_CONFIG = r"^/ok/target/resolve/main/config.json$"
STALLS = {
    # what the hub does, where; the deadline (the range read comes after the
    # target's reads: they must be done by then); what the message names
    "listing-never": ({r"^/api/models/": H.never}, 2, "no answer to GET .*/api/models/ok/"),
    "config-head-never": ({HEAD_CONFIG: H.never}, 2, "no answer to HEAD .*/config.json"),
    "listing-drips": (
        {r"^/api/models/": H.drip()},
        2,
        r"the answer to GET .*/api/models/ok/\w+ \(200\)",
    ),
    "config-drips": ({HEAD_CONFIG: H.drip()}, 2, r"the answer to GET .*/config.json \(200\)"),
    "range-drips": ({r"^/cdn/": H.drip()}, 5, r"the answer to GET .*/cdn/ok/drafter/.* \(200\)"),
    "config-500": (
        {HEAD_CONFIG: H.body(b"{}", status=500)},
        2,
        r"the last request, HEAD .*/config.json, was answered 500",
    ),
}


@pytest.mark.parametrize("case", sorted(STALLS))
def test_the_hub_reads_end_at_their_deadline(standin, box, case):
    """A HEAD of config.json that never answered took 389 s with
    HF_HUB_DOWNLOAD_TIMEOUT=3 and then said "did not answer within 3 s"; a
    server that sends a byte every 2 s still ran at 100 s; a 500 printed a
    dozen retry lines before the error. Now the reads end at their deadline
    (VPATCH_HUB_TIMEOUT, a few seconds here), in one line that says what
    timed out and after how long; nothing else is printed but the notice of
    what is awaited."""
    answers, seconds, said = STALLS[case]
    standin.answer.update(answers)
    env = {"VPATCH_HUB_TIMEOUT": str(seconds), "HF_HUB_DOWNLOAD_TIMEOUT": "3"}
    r = doctor(standin, box, *pair(), env=env)
    line = one_line(r, 2)
    within = f"not read within {seconds}s, the time doctor gives its hub reads in all"
    assert re.search(rf"{within} \(VPATCH_HUB_TIMEOUT=SECONDS sets it\): {said}", line), line
    assert all(ln.startswith("waiting for ") for ln in r.stderr.splitlines()[:-1]), r.stderr
    whole_files_only(box.hf)


# -- 3. Ctrl-C, and SIGTERM: prompt, and nothing half done -------------------------------


def started(standin, box, *args, until: Callable[[], bool]) -> subprocess.Popen:
    """`vpatch doctor ARGS` started, once `until()` holds (30 s at most)."""
    home = {"HF_HOME": str(box.hf), "HF_ENDPOINT": standin.url, "HF_TOKEN": ""}
    p = subprocess.Popen(
        [*cli.command(), "doctor", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=cli.environment({**home, "VPATCH_HUB_TIMEOUT": "600"}),
    )
    t0 = time.monotonic()
    while not until():
        assert p.poll() is None and time.monotonic() - t0 < 30, p.communicate()
        time.sleep(0.05)
    return p


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_one_signal_ends_a_hung_read(standin, box, sig):
    """One SIGINT 5 s into a hung read left doctor running 150 s later (the
    worker threads were waited for); SIGTERM left huggingface_hub's
    blobs/*.incomplete behind. Now either ends it at once (20 s is the
    failure signal): exit 130, one line, and the cache as it was but for
    whole files. The signal comes while config.json's body is half read."""
    standin.answer[HEAD_CONFIG] = H.drip(0.2)
    partial = lambda: any(box.hf.rglob("*.incomplete"))  # noqa: E731
    p = started(standin, box, *pair(), until=partial)
    p.send_signal(sig)
    out, err = p.communicate(timeout=20)
    r = subprocess.CompletedProcess(p.args, p.returncode, out, err)
    assert "interrupted" in one_line(r, 130)
    whole_files_only(box.hf)


# -- 4. bad input is exit 2 in one line, never an internal error (exit 70) -------------

HEAD_DRAFTER_CONFIG = r"^/ok/drafter/resolve/main/config.json$"


def head_with_commit(commit: str) -> H.Answer:
    """config.json's HEAD, its X-Repo-Commit a path (huggingface_hub makes
    snapshots/<it>/)."""
    return H.body(b"", {"X-Repo-Commit": commit, "ETag": '"e"', "X-Linked-Size": "2"})


BAD = {
    # what the hub serves (answers), the pair; what the message says
    "header-nested": ({}, pair(drafter="bad/nested-header"), "safetensors header: not valid JSON"),
    "index-nested": ({}, pair(drafter="bad/nested-index"), "index.json: not valid JSON"),
    "listing-nested": (
        {r"^/api/models/ok/drafter": H.body(NESTED)},
        pair(),
        "not a Hugging Face hub: the listing of ok/drafter: not valid JSON",
    ),
    "drafter-config-nested": ({}, pair(drafter="bad/nested-config"), "not valid JSON"),
    "target-config-nested": ({}, pair(target="bad/nested-config"), "not valid JSON"),
    "listing-redirects": (
        {r"^/api/models/ok/drafter": H.redirect_loop},
        pair(),
        "not a Hugging Face hub (redirects without end: http",
    ),
    "resolve-redirects": (
        {HEAD_DRAFTER_CONFIG: H.redirect_loop},
        pair(),
        "not a Hugging Face hub (redirects without end: Exceeded 20 redirects while resolving",
    ),
    "commit-dot-dot": (
        {HEAD_DRAFTER_CONFIG: head_with_commit("../..")},
        pair(),
        "X-Repo-Commit '../..' is not a commit id",
    ),
    "commit-absolute": (
        {HEAD_DRAFTER_CONFIG: head_with_commit("/tmp/x")},
        pair(),
        "X-Repo-Commit '/tmp/x' is not a commit id",
    ),
    "index-escapes": (
        {},
        pair(drafter="bad/escaping-index"),
        "weight_map names '../../../etc/passwd', not a file of the checkpoint",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_is_exit_2(standin, box, case):
    """Deep JSON in a header, an index, the listing, a config
    (RecursionError), a redirect loop on the listing or on resolve
    (TooManyRedirects), an X-Repo-Commit of `../..` or an absolute path and
    an index naming `../../../etc/passwd` (ValueError) were internal errors
    (exit 70). Each is exit 2 in one line now, nothing written outside
    HF_HOME, nothing half done in it."""
    answers, args, said = BAD[case]
    standin.answer.update(answers)
    before = S.snapshot(box.dir, skip=("hf",))
    line = one_line(doctor(standin, box, *args), 2)
    assert said in line, line
    assert S.same(before, S.snapshot(box.dir, skip=("hf",))) == []
    whole_files_only(box.hf)


def test_a_local_config_nested_deep_is_exit_2(standin, box):
    folder = standin.folders["nested-config"]
    line = one_line(doctor(standin, box, *pair(drafter=str(folder))), 2)
    assert f"{folder / 'config.json'}: not valid JSON (nested too deep to read)" in line


# -- 5. no quadratic work: a stated cap on the files read ---------------------------------


def test_an_index_of_100000_shards(standin, box):
    """An index of 100,000 shards (the listing names them all) spent 73 s of
    CPU in a list lookup before the first request, then 11 minutes of
    requests with nothing said. Now doctor reads the headers of a few files
    at most (weights.MAX_FILES), and says so at once; 60 s is the failure
    signal."""
    repo = "bad/many-shards"
    commit = standin.repos[repo].refs["main"]
    files = ["config.json", "model.safetensors.index.json"]
    files += [f"model-{i:06d}-of-100000.safetensors" for i in range(100_000)]
    listing = {"id": repo, "sha": commit, "siblings": [{"rfilename": f} for f in files]}
    standin.answer[rf"^/api/models/{repo}"] = H.body(json.dumps(listing).encode())
    line = one_line(doctor(standin, box, *pair(drafter=repo)), 2)
    assert "index.json: 100000 safetensors files; an EAGLE-3 drafter has one or a few" in line
    assert not [p for _, p, r in standin.log if r]  # not one header read
    whole_files_only(box.hf)


# -- 6. a header the safetensors library refuses is bad input ------------------------------


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_a_malformed_header_is_exit_2(standin, box, case):
    """fc.weight of shape [-7168, -21504] gave a finding "takes -3 states";
    negative offsets and string shapes passed as tensors. Each is exit 2 in
    one line, as the safetensors library refuses such a file at load."""
    line = one_line(doctor(standin, box, *pair(drafter=f"bad/{case}")), 2)
    assert "model.safetensors at commit" in line and "tensor 'fc.weight'" in line, line


# -- 7. only the requests doctor makes; no credential or control character shown ---------


def test_huggingface_hubs_own_request_is_not_made(standin, box):
    """huggingface_hub fetches its agent registry (GET /api/agent-harnesses,
    on the endpoint, from the User-Agent it builds for each request; once
    per read thread that builds one first, so twice) and writes it into
    HF_HOME; a deadline could name that request as the one awaited. Doctor
    makes the requests its checks read and no other."""
    r = doctor(standin, box, *pair())
    assert r.returncode in (0, 1) and "vpatch: error" not in r.stderr, r.stderr  # a verdict
    assert "/api/agent-harnesses" not in [p for _, p, _ in standin.log], standin.log
    assert not list(box.hf.glob(".agent_harnesses*"))
    standin.reset()
    standin.answer[r"^/"] = H.never  # nothing answers: the first request of ours is awaited
    line = one_line(doctor(standin, box, *pair(), env={"VPATCH_HUB_TIMEOUT": "2"}), 2)
    assert "no answer to GET" in line and "/api/models/ok/" in line, line
    assert "agent-harnesses" not in line and all("harness" not in p for _, p, _ in standin.log)


def test_hf_endpoint_credentials_are_not_printed(standin, box):
    """HF_ENDPOINT=http://user:TOKEN@... showed TOKEN in doctor's line."""
    url = S.closed_port().removesuffix("/simple/").replace("http://", "http://user:TOK3N@")
    r = doctor(standin, box, *pair(), env={"HF_ENDPOINT": url})
    line = one_line(r, 2)
    assert "cannot reach http://***@127.0.0.1:" in line and "TOK3N" not in r.stderr + r.stdout
    hub = standin.url.replace("http://", "http://user:TOK3N@")
    for form in ("text", "json"):  # read from it: the report names it, without the token
        r = doctor(standin, box, *pair(), "--format", form, env={"HF_ENDPOINT": hub})
        assert r.returncode in (0, 1) and "TOK3N" not in r.stderr + r.stdout, r.stderr
        assert "from http://***@127.0.0.1" in r.stdout or '"from": "http://***@' in r.stdout
    standin.answer[r"^/api/models/ok/drafter"] = H.body(b"{}", status=404)
    r = doctor(standin, box, *pair(), env={"HF_ENDPOINT": hub})
    assert "TOK3N" not in r.stderr + r.stdout and "http://***@127.0.0.1" in one_line(r, 2)


def test_the_hubs_words_in_an_error_are_escaped(standin, box):
    """The hub's error message (X-Error-Message, as huggingface_hub quotes
    it) holding ESC, BEL and a newline: one line, each shown escaped."""
    said = "Repo busy\x1b]0;pwned\x07\nok: 0 errors"
    standin.answer[r"^/api/models/ok/drafter"] = H.body(
        b"{}", {"X-Error-Message": said.replace("\n", " "), "X-Request-Id": "\x1b[2J"}, 400
    )
    line = one_line(doctor(standin, box, *pair()), 2)
    assert "\x1b" not in line and "\x07" not in line, line.encode()
    assert "(Request ID: \\x1b[2J): Repo busy\\x1b]0;pwned\\x07 ok: 0 errors)" in line, line


# -- 8. an answer cut short broke off: exit 3, try again --------------------------------


def cut(how: Callable[[bytes], H.Answer]) -> H.Answer:
    """A GET answered by `how` (support/vllm_server.py: Content-Length and
    fewer bytes, or a chunked body without its last chunk); a HEAD is
    answered as the hub answers it."""
    answer = how(json.dumps({"architectures": ["X"], "pad": "x" * 4000}).encode())

    def cut_get(h: H._Handler, path: str) -> bool | None:
        return False if h.command == "HEAD" else answer(h, path)

    return cut_get


CUT = {
    # where the hub's answer breaks off: huggingface_hub's download of
    # config.json (which tries again 5 times, resuming, before it fails),
    # doctor's own listing and safetensors header reads
    "config-short": (HEAD_CONFIG, V.cut_short),
    "config-chunks": (HEAD_CONFIG, V.chunks_cut),
    "listing-short": (r"^/api/models/ok/drafter", V.cut_short),
    "listing-chunks": (r"^/api/models/ok/drafter", V.chunks_cut),
    "header-short": (r"^/cdn/", V.cut_short),
}


@pytest.mark.parametrize("case", sorted(CUT))
def test_an_answer_cut_short_broke_off(standin, box, case):
    """A hub answer that stopped short of its Content-Length, or a chunked
    one without its last chunk, was exit 2, "cannot reach ...
    (RemoteProtocolError: ...)", as if the hub were down or misnamed. It
    broke off, as any answer doctor reads (a server's, the index's): exit
    3, one line that says so and to try again; nothing half done in HF_HOME."""
    where, how = CUT[case]
    standin.answer[where] = cut(how)
    line = one_line(doctor(standin, box, *pair()), 3)
    assert re.search(r": the answer broke off \(.*\); try again$", line), line
    assert "cannot reach" not in line and "RemoteProtocolError" not in line, line
    if case.endswith("short"):
        assert re.search(r"\(\d+ of the \d+ bytes it declared came\)", line), line
    whole_files_only(box.hf)
