"""`vpatch doctor`: the request (commands.doctor.doctor: a serve command or
--target/--drafter, the readiness from the callable it is given, bad input
as ConfigError) and the command line: `-- vllm serve ...` or
--target/--drafter, text or JSON, exit 0 (ok), 1 (an error), 2 (bad input,
one line, never a traceback). The checks themselves: tests/unit/doctor/."""

from __future__ import annotations

import json
import sys
from dataclasses import replace

import pytest
from support import copy_rules, minor_after, next_release
from support import env as fake_env
from support import pairs as F
from support.cli import vpatch
from support.releases import PINS, last_where, newest_patched, v1_by_default
from vpatch import lock
from vpatch.commands import doctor as D
from vpatch.doctor import hub
from vpatch.doctor.environment import Readiness, find_vllm, from_release
from vpatch.errors import ConfigError, NewerRelease

like_envs = fake_env.like_envs
PATCHED = newest_patched()


def v1_reads_short(r):
    """the V1 runner serves and reads eagle_config's ids; the drafter's positions are its own"""
    return v1_by_default(r) and r.v1_reads_nested_ids and r.draft_positions_short


# a release with EAGLE-3 upstream whose V1 runner reads a drafter's nested ids as
# written and keeps its own positions: the fake environment's
UPSTREAM = last_where(v1_reads_short)
_MAJOR, _MINOR, _MICRO = (int(n) for n in UPSTREAM.split("."))
UNPINNED = f"{_MAJOR}.{_MINOR}.{_MICRO + 1}"  # after it, not in upstream_env's lock
AFTER = minor_after(UPSTREAM)  # pinned in upstream_env's lock after UNPINNED


@pytest.fixture(scope="module")
def upstream_env(tmp_path_factory) -> tuple[str, dict[str, str]]:
    """(python, env) of an environment whose vLLM `vpatch check` calls ready:
    a fake vllm UPSTREAM, and vpatch data (VPATCH_ROOT) where UPSTREAM has
    EAGLE-3 upstream and no series, and AFTER is pinned too (so that
    UNPINNED lies between two pins, and rules.toml's `newest` is a pin)."""
    where = tmp_path_factory.mktemp("upstream-env")
    py = fake_env.build_env(where / "venv", version=UPSTREAM)
    root = where / "root"
    (root / "patches").mkdir(parents=True)
    (root / "patches/patches.toml").write_text("")  # no patch: no series anywhere
    (root / "VERSIONS.lock").write_text(
        f'[releases."{PATCHED}"]\ntag = "v{PATCHED}"\ncommit = "a"\nstatus = "patched"\n\n'
        f'[releases."{UPSTREAM}"]\ntag = "v{UPSTREAM}"\ncommit = "b"\nstatus = "upstream"\n\n'
        f'[releases."{AFTER}"]\ntag = "v{AFTER}"\ncommit = "c"\nstatus = "upstream"\n'
    )
    copy_rules(root)  # doctor's facts as they are, up to the lock's newest
    return str(py), {"VPATCH_ROOT": str(root)}


def test_cli_ok_json_exit_0(tmp_path, upstream_env):
    t, d = F.pair(tmp_path)
    py, env = upstream_env
    r = vpatch(
        "doctor",
        "--target",
        str(t),
        "--drafter",
        str(d),
        "--python",
        py,
        "--tensor-parallel-size",
        "8",
        "--format",
        "json",
        env=env,
    )
    assert r.returncode == 0, r.stderr + r.stdout
    data = json.loads(r.stdout)
    assert data["ok"] is True and '"method": "eagle3"' in data["serve"]


def test_cli_broken_pair_exit_1(tmp_path, upstream_env):
    t, d = F.pair(tmp_path, drop=("d2t",))
    py, env = upstream_env
    r = vpatch(
        "doctor",
        "--target",
        str(t),
        "--drafter",
        str(d),
        "--python",
        py,
        "--tensor-parallel-size",
        "8",
        env=env,
    )
    assert r.returncode == 1
    assert "error    d2t" in r.stdout and "NOT ok: 1 error, " in r.stdout
    assert r.stdout.rstrip().splitlines()[-1].startswith("vllm serve ")


@pytest.mark.parametrize(
    "args,phrase",
    [
        (["--target", "/nonexistent/model", "--drafter", "x"], "no such folder"),
        (
            ["--target", "owner/not-cached", "--drafter", "owner/drafter"],
            "owner/not-cached: config.json, tokenizer_config.json not in the local",
        ),
        (
            ["--tensor-parallel-size", "0"],
            "argument --tensor-parallel-size: must be a whole number from 1",
        ),
        (["--python", "/nonexistent/python"], "/nonexistent/python: no such interpreter"),
    ],
)
def test_cli_bad_input_is_one_line_exit_2(tmp_path, args, phrase):
    t, d = F.pair(tmp_path)
    base = {"--target": str(t), "--drafter": str(d), "--python": sys.executable}
    it = iter(args)
    base.update(dict(zip(it, it, strict=True)))
    flat = [x for kv in base.items() for x in kv]
    r = vpatch("doctor", *flat, env={"HF_HUB_CACHE": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1"})
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("vpatch: error: ") and phrase in lines[0], lines


def test_cli_bad_config_json(tmp_path):
    t, d = F.pair(tmp_path)
    (d / "config.json").write_text("{not json")
    r = vpatch("doctor", "--target", str(t), "--drafter", str(d), "--python", sys.executable)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "not valid JSON" in r.stderr


def test_cli_offline_hub_ids_from_the_local_cache(tmp_path, upstream_env):
    cache = tmp_path / "hf"
    t, d = F.pair(tmp_path / "src")
    for repo, src in (("moonshotai/Kimi-K2.5", t), ("acme/kimi-eagle3", d)):
        snap = cache / f"models--{repo.replace('/', '--')}" / "snapshots" / "abc123"
        snap.parent.mkdir(parents=True)
        src.rename(snap)
        (snap.parents[1] / "refs").mkdir()
        (snap.parents[1] / "refs" / "main").write_text("abc123")
    py, env = upstream_env
    r = vpatch(
        "doctor",
        "--target",
        "moonshotai/Kimi-K2.5",
        "--drafter",
        "acme/kimi-eagle3",
        "--python",
        py,
        "--tensor-parallel-size",
        "8",
        "--format",
        "json",
        "--offline",
        env={"HF_HUB_CACHE": str(cache), **env},
    )
    assert r.returncode == 0, r.stderr + r.stdout
    read = json.loads(r.stdout)["read"]
    assert [(x["from"], x["commit"]) for x in read] == [("cache", "abc123")] * 2
    serve = json.loads(r.stdout)["serve"]
    assert (
        serve.startswith("vllm serve moonshotai/Kimi-K2.5 ")
        and '"model": "acme/kimi-eagle3"' in serve
    )


def test_cli_serve_command_after_the_double_dash(tmp_path, upstream_env):
    t, d = F.pair(tmp_path, target="deepseek_v3", fmt="specforge_dsv3")
    py, env = upstream_env
    spec = json.dumps({"method": "eagle3", "model": str(d), "num_speculative_tokens": 3})
    r = vpatch(
        "doctor",
        "--python",
        py,
        "--format",
        "json",
        "--",
        "vllm",
        "serve",
        str(t),
        "--tensor-parallel-size=8",
        "--max-model-len",
        "32k",
        "--swap-space",
        "16",
        "--speculative-config",
        spec,
        env=env,
    )
    # the V1 runner reads the drafter's nested [1, 29, 57] as written: one layer off
    assert r.returncode == 1, r.stderr + r.stdout
    data = json.loads(r.stdout)
    assert set(data) == {"ok", "findings", "serve", "uninterpreted", "read", "vllm"}
    # which vLLM was judged, and by which release's rules
    assert data["vllm"]["version"].startswith(UPSTREAM) and data["vllm"]["rules"] == UPSTREAM
    assert data["vllm"]["python"] == py and data["vllm"]["given"] is None
    assert [r["from"] for r in data["read"]] == ["folder", "folder"]
    assert data["uninterpreted"] == ["--swap-space"]
    bad = {f["check"] for f in data["findings"] if f["severity"] == "error"}
    # no --trust-remote-code: DeepSeek-V3's config and tokenizer are transformers' own
    assert bad == {"trained_layers"}, data
    assert "--trust-remote-code" not in data["serve"] and "--max-model-len 32000" in data["serve"]
    assert "--swap-space 16" in data["serve"]


@pytest.mark.parametrize(
    "words,phrase",
    [
        (["--", "ls", "-l"], "not a vLLM serve command"),
        (["--", "vllm", "serve", "M", "--speculative-config", "{oops"], "not valid JSON"),
        (["--", "vllm", "serve", "M"], "no --speculative-config"),
        (
            ["--", "vllm", "serve", "owner/not-cached", "--speculative-config", '{"model": "o/d"}'],
            "owner/not-cached: config.json, tokenizer_config.json not in the local",
        ),
        ([], "nothing to check"),
    ],
)
def test_cli_bad_serve_command_is_one_line_exit_2(tmp_path, words, phrase):
    r = vpatch("doctor", *words, env={"HF_HUB_CACHE": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1"})
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("vpatch: error: ") and phrase in lines[0], lines


@pytest.fixture(scope="module")
def py(tmp_path_factory) -> str:
    return str(fake_env.build_env(tmp_path_factory.mktemp("env") / "venv", version=UPSTREAM))


def test_run_takes_readiness_from_the_callable(tmp_path, py):
    t, d = F.pair(tmp_path)
    seen = []

    def ready(env):
        seen.append(env)
        return Readiness(True)

    req = D.Request(target=str(t), drafter=str(d), python=py, tensor_parallel_size=8)
    r = D.doctor(req, ready=ready, pins=lock.load())
    assert seen[0].version == UPSTREAM and seen[0].dist == "vllm"
    assert r.ok, r.to_text()
    assert "--trust-remote-code" in r.serve  # the Kimi-K2.5 target is remote code
    # EAGLE-3 is upstream there: without the layer-0 fix the pair still
    # runs (it asks for no layer 0), and doctor says `vpatch check`'s answer
    said = "EAGLE-3 for DeepSeek-V3 / Kimi-K2.5 targets: NOT ready (0001-x); run `x`"
    r = D.doctor(req, ready=lambda env: Readiness(False, said=said), pins=lock.load())
    assert r.ok
    assert [f.severity for f in r.findings if f.check == "vllm" and said in f.message] == [
        "warning"
    ]


def test_run_a_serve_command(tmp_path, py):
    t, d = F.pair(tmp_path, fmt="specforge_kimi")
    spec = json.dumps({"method": "eagle3", "model": str(d), "num_speculative_tokens": 3})
    cmd = ("vllm", "serve", str(t), "-tp", "8", "--trust-remote-code", "--speculative-config", spec)
    r = D.doctor(
        D.Request(command=cmd, python=py), ready=lambda env: Readiness(True), pins=lock.load()
    )
    # Kimi-K2.5's 262144 positions by default, the drafter has 131072
    assert not r.ok and "max_model_len" in {f.check for f in r.findings if f.severity == "error"}
    assert r.serve.startswith(f"vllm serve {t} --tensor-parallel-size 8 --max-model-len 131072 ")


@pytest.mark.parametrize(
    "req,phrase",
    [
        (D.Request(), "nothing to check"),
        (D.Request(target="t"), "nothing to check"),
        (D.Request(command=("vllm", "serve", "M"), target="t", drafter="d"), "not both"),
        (
            D.Request(target="t", drafter="d", tensor_parallel_size=0),
            "--tensor-parallel-size must be a whole number from 1 ",
        ),
        (
            D.Request(target="t", drafter="d", num_speculative_tokens=0),
            "--num-speculative-tokens must be a whole number from 1 ",
        ),
    ],
)
def test_bad_requests(req, phrase):
    with pytest.raises(ConfigError, match=phrase):
        D.doctor(req, ready=lambda env: Readiness(True), pins=lock.load())


def test_offline_a_drafter_hub_id_not_in_the_cache(tmp_path):
    t, _ = F.pair(tmp_path)
    spec = json.dumps({"method": "eagle3", "model": "acme/nowhere", "num_speculative_tokens": 3})
    req = D.Request(command=("vllm", "serve", str(t), "--speculative-config", spec), offline=True)
    where = hub.Hub(cache_dir=tmp_path / "hf")
    with pytest.raises(ConfigError, match="not in the local Hugging Face cache"):
        D.doctor(req, ready=lambda env: Readiness(True), where=where, pins=lock.load())


def test_json_names_the_vllm_judged_and_the_rules_applied(tmp_path, upstream_env):
    """A vLLM that is not a pinned release (UNPINNED) is judged by the rules
    of the pinned one below it; the JSON says both, apart."""
    _, env = upstream_env
    py = fake_env.build_env(tmp_path / "venv", version=UNPINNED)
    t, d = F.pair(tmp_path, target="deepseek_v3")
    r = vpatch(
        "doctor",
        "--target",
        str(t),
        "--drafter",
        str(d),
        "--python",
        str(py),
        "--format",
        "json",
        env=env,
    )
    assert r.returncode in (0, 1), r.stderr + r.stdout
    judged = json.loads(r.stdout)["vllm"]
    assert (judged["version"], judged["rules"], judged["dist"]) == (UNPINNED, UPSTREAM, "vllm")
    assert judged["python"] == str(py) and judged["given"] is None, judged


# -- --vllm RELEASE [--patched]: the verdict of that release installed --------------


def _verdict(r, env) -> tuple:
    """The report as a user reads the verdict: ok, the serve command, and each
    finding, the environment's name (VllmEnv.where) and its python as
    `--python PY` put for the words a release given instead of one has."""

    def said(m: str) -> str:
        return m.replace(env.where, "<vllm>").replace(f"--python {env.python}", "--python PY")

    return r.ok, r.serve, [(f.check, f.severity, said(f.message)) for f in r.findings]


def test_a_release_given_gives_the_verdict_of_it_installed(tmp_path, like_envs):
    """`--vllm R` gives the findings doctor gives with R installed as released,
    `--vllm R --patched` those with its series installed by `vpatch install`
    (where `python3` had no vLLM, a laptop preflight once ended NOT ok
    for a good pair). Over real release names (their rules apply) and a
    patch set shaped like the real one (support/env.py releases_like): a
    patched release, an upstream-fix one, one without a series; pairs whose
    verdict turns on what is installed (EAGLE-3 itself, the layer-0 fix, the
    draft-positions fix)."""
    lock_path, envs = like_envs
    pins = lock.load(lock_path)
    t, d = F.pair(tmp_path / "a", config={"eagle_aux_hidden_state_layer_ids": [0, 30, 58]})
    t2, d2 = F.pair(tmp_path / "b", fmt="specforge_kimi")
    spec = json.dumps({"method": "eagle3", "model": str(d2), "num_speculative_tokens": 3})
    asks = [
        D.Request(target=str(t), drafter=str(d), tensor_parallel_size=8),
        D.Request(command=("vllm", "serve", str(t2), "-tp", "8", "--speculative-config", spec)),
    ]
    verdicts = {}
    for (release, patched), py in envs.items():
        env = find_vllm(str(py))
        for i, ask in enumerate(asks):
            installed = D.doctor(replace(ask, python=str(py)), pins=pins)
            given = D.doctor(replace(ask, vllm=release, patched=patched), pins=pins)
            stated = from_release(release, patched, pins)[0]
            want = _verdict(installed, env)
            assert _verdict(given, stated) == want, (release, patched, i, given.to_text())
            verdicts[release, patched, i] = {c: s for c, s, _ in want[2] if s != "info"}
    # what the comparison covered: each verdict turns on what is installed
    patched, fix, upstream = fake_env.LIKE
    assert verdicts[patched, False, 0]["vllm"] == "error"  # no EAGLE-3 for the target
    assert "vllm" not in verdicts[patched, True, 0]
    assert verdicts[fix, False, 0]["aux_layers"] == "error"  # layer 0 crashes
    assert "aux_layers" not in verdicts[fix, True, 0]
    assert verdicts[upstream, False, 0]["aux_layers"] == "error"  # no series fixes it
    assert verdicts[fix, False, 1]["max_model_len"] == "error"  # positions too short
    assert "max_model_len" not in verdicts[fix, True, 1]


def test_cli_a_release_given_on_a_machine_without_vllm(tmp_path):
    """The laptop preflight: no vLLM anywhere (`--python` is not
    given, and the python3 on PATH has none: PATH holds only a python
    without vLLM), the release and its series named instead. A good pair on
    a patched release with vpatch's series: ok, exit 0; without it: vLLM refuses
    EAGLE-3 for the target, exit 1, and the fix names `--python PY`."""
    t, d = F.pair(tmp_path)
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    (bin_ / "python3").symlink_to(sys.executable)  # vpatch's own: no vLLM
    env = {"PATH": str(bin_)}
    pair = ["--target", str(t), "--drafter", str(d), "--tensor-parallel-size", "8"]
    r = vpatch("doctor", *pair, env=env)
    assert r.returncode == 1 and "--vllm RELEASE" in r.stdout, r.stdout  # says how
    r = vpatch("doctor", *pair, "--vllm", PATCHED, "--patched", env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    said = f"vllm     vLLM {PATCHED} (--vllm {PATCHED} --patched, no environment read)"
    assert said in r.stdout
    r = vpatch("doctor", *pair, "--vllm", f"{PATCHED}+cu129", "--format", "json", env=env)
    assert r.returncode == 1, r.stdout + r.stderr
    judged = json.loads(r.stdout)["vllm"]
    assert judged["given"] == f"--vllm {PATCHED}" and judged["python"] is None, judged
    assert judged["version"] == PATCHED and judged["rules"] == PATCHED, judged
    assert judged["eagle3_ready"] is False, judged  # as released: no EAGLE-3 for it
    (bad,) = [f for f in json.loads(r.stdout)["findings"] if f["severity"] == "error"]
    assert bad["check"] == "vllm" and "run `vpatch install --python PY`" in bad["message"]


FULLWIDTH = str.maketrans("0123456789", "０１２３４５６７８９")
# the pinned releases of a minor the lock pins exactly two of (X.Y given: which?)
TWO = next(
    pair
    for m in {v.rsplit(".", 1)[0] for v in PINS.versions()}
    if len(pair := [v for v in PINS.versions() if v.rsplit(".", 1)[0] == m]) == 2
)


@pytest.mark.parametrize(
    "args,phrase",
    [
        (
            ["--vllm", "0.14.0"],
            f"--vllm 0.14.0: unknown release '0.14.0'; pinned: {lock.load().versions()[0]}, ",
        ),
        (["--vllm", TWO[0].rsplit(".", 1)[0]], f"(did you mean {TWO[0]} or {TWO[1]}?)"),
        (["--vllm", "latest"], "--vllm latest: unknown release 'latest'"),
        # one release parser: these were taken as PATCHED, or exited 70
        (["--vllm", "{}.{}.0{}".format(*PATCHED.split("."))], f"(did you mean {PATCHED}?)"),
        (["--vllm", PATCHED.translate(FULLWIDTH)], f"(did you mean {PATCHED}?)"),
        (["--vllm", f"{PATCHED}\n"], f"(did you mean {PATCHED}?)"),
        (["--vllm", f"1!{PATCHED}"], f"unknown release '1!{PATCHED}'"),
        (["--patched"], "--patched goes with --vllm RELEASE"),
        (["--vllm", PATCHED, "--python", sys.executable], "--python PY or --vllm RELEASE"),
    ],
)
def test_cli_a_release_given_badly(tmp_path, args, phrase):
    t, d = F.pair(tmp_path)
    r = vpatch("doctor", "--target", str(t), "--drafter", str(d), *args)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("vpatch: error: ") and phrase in lines[0], lines


def test_cli_a_release_newer_than_vpatch_knows(tmp_path):
    """One line, exit 12: which release vpatch knows up to, the verdict
    refused, and what to run."""
    t, d = F.pair(tmp_path)
    newer = next_release(lock.load())
    r = vpatch("doctor", "--target", str(t), "--drafter", str(d), "--vllm", newer)
    assert r.returncode == NewerRelease.exit_code == 12, r.stderr
    (line,) = r.stderr.strip().splitlines()
    newest = lock.load().newest
    assert f"vLLM {newer} is newer than vpatch knows (it pins up to {newest})" in line
    assert f"`vpatch carry {newer}`" in line and f"`--vllm {newest}`" in line


def test_patched_where_vpatch_has_no_series(tmp_path, like_envs):
    """`vpatch install` has nothing to install on a release without a series
    (it refuses, or there is nothing to do): --patched there is bad input."""
    lock_path, _ = like_envs
    t, d = F.pair(tmp_path)
    upstream = fake_env.LIKE[-1]  # no series
    req = D.Request(target=str(t), drafter=str(d), vllm=upstream, patched=True)
    with pytest.raises(ConfigError, match=rf"no series for vLLM {upstream}.*drop --patched"):
        D.doctor(req, pins=lock.load(lock_path))
    assert D.doctor(replace(req, patched=False), pins=lock.load(lock_path)).findings


# -- --server: the post-flight of a running deployment ------------------------------


@pytest.fixture
def vllm():
    from support import vllm_server as V

    with V.Vllm().running() as v:
        yield v


def test_a_server_tied_to_its_deployment(tmp_path, vllm):
    """--target/--drafter with --server: the preflight on the server's
    release (its readiness unknown: the server says its release only), the
    server against the deployment, its figures; the preflight first."""
    from support import vllm_server as V
    from vpatch.postflight.judge import Postflight

    t, d = F.pair(tmp_path)
    vllm.cards = [V.card(V.MODEL, str(t))]
    req = D.Request(target=str(t), drafter=str(d), servers=(vllm.url,), tensor_parallel_size=8)
    r = D.doctor(req, pins=lock.load())
    assert isinstance(r, Postflight) and r.preflight is not None
    rel = V.NEWEST
    assert (
        f"vllm     vLLM {rel} (the server's /version, no environment read) -> rules of {rel}"
        in r.to_text().splitlines()
    )
    checks = [f.check for f in r.findings]
    assert checks[: len(r.preflight.findings)] == [f.check for f in r.preflight.findings]
    assert checks[len(r.preflight.findings) :] == ["deployment", "position0", "decay"]
    vllm_said = next(f for f in r.findings if f.check == "vllm")
    assert vllm_said.severity == "warning" and "run `vpatch check`" in vllm_said.message
    assert r.to_json()["preflight"]["vllm"]["given"] == "the server's /version"
    assert vllm.asked == ["/version", "/v1/models", "/metrics"]


@pytest.mark.parametrize("version", ["abc", "0.26", "dev"])
def test_a_server_whose_version_names_no_release_tied(tmp_path, vllm, version):
    """Tied to a deployment, a /version of `abc` said "vLLM abc is older
    than <the first release>". Now the vllm finding says the /version names
    no release and what the preflight was checked against; --vllm R names
    the release (not "another release than the server's")."""
    t, d = F.pair(tmp_path)
    vllm.version = version
    default = lock.load().default().version
    req = D.Request(target=str(t), drafter=str(d), servers=(vllm.url,), tensor_parallel_size=8)
    r = D.doctor(req, pins=lock.load())
    text = r.to_text()
    said = next(f for f in r.findings if f.check == "vllm")
    assert said.severity == "warning", said
    assert said.message.startswith(
        f"the server's /version '{version}' names no vLLM release (vLLM's are X.Y.Z; one built "
        "without its version file answers 'dev': vllm/version.py); checked against vLLM "
        f"{default} (vpatch's default release): give the release it runs"
    ), said.message
    assert f"vllm     unknown (the server's /version '{version}') -> rules of {default}" in text
    assert "older than" not in text
    r = D.doctor(replace(req, vllm=default), pins=lock.load())
    assert f"vLLM {default} (--vllm" in next(f for f in r.findings if f.check == "vllm").message


def test_a_servers_environment_is_the_servers_release(tmp_path, py, vllm):
    """--python PY (or --vllm R) with --server: `vpatch check` on it says
    whether the series is installed; another release than the server's is
    bad input, as is a deployment tied to servers of two releases."""
    seen = []

    def ready(env):
        seen.append(env.version)
        return Readiness(True)

    vllm.version = UPSTREAM  # the fake environment's
    r = D.doctor(D.Request(servers=(vllm.url,), python=py), ready=ready, pins=lock.load())
    assert seen == [UPSTREAM]
    series = next(f for f in r.findings if f.check == "series")
    assert series.severity == "info" and series.message.endswith("(`vpatch check`: ready)")
    from support import vllm_server as V

    vllm.version = rel = V.NEWEST
    with pytest.raises(
        ConfigError, match=rf"--python .* is vLLM {UPSTREAM}, the server runs vLLM {rel}"
    ):
        D.doctor(D.Request(servers=(vllm.url,), python=py), ready=ready, pins=lock.load())
    other = lock.load().default().version  # a release of its own, not the server's
    with pytest.raises(ConfigError, match=f"--vllm {other} is vLLM {other}, the server runs"):
        D.doctor(D.Request(servers=(vllm.url,), vllm=other), pins=lock.load())
    r = D.doctor(D.Request(servers=(vllm.url,), vllm=rel, patched=True), pins=lock.load())
    assert next(f for f in r.findings if f.check == "series").severity == "info"
    t, d = F.pair(tmp_path)
    first = V.RELEASES[0]
    with V.Vllm(first).running() as older:
        req = D.Request(target=str(t), drafter=str(d), servers=(vllm.url, older.url))
        with pytest.raises(ConfigError, match=f"the servers run vLLM {first} and {rel}"):
            D.doctor(req, pins=lock.load())


@pytest.mark.parametrize(
    ("req", "phrase"),
    [
        (D.Request(servers=("URL", "ftp://h/")), "http:// and https:// URLs only"),
        (D.Request(servers=("URL",), python="p", vllm="R"), "not both"),
        (D.Request(servers=("URL",), patched=True), "--patched goes with --vllm"),
        (D.Request(servers=("URL",), target="t"), "nothing to check"),
        (D.Request(servers=("URL",), command=("vllm", "serve", "m")), "no --speculative-config"),
        (D.Request(interval=5), "--interval N goes with --server URL"),
    ],
)
def test_bad_server_requests_ask_the_server_nothing(vllm, req, phrase):
    req = replace(req, servers=tuple(vllm.url if u == "URL" else u for u in req.servers))
    with pytest.raises(ConfigError, match=phrase):
        D.doctor(req, pins=lock.load())
    assert vllm.asked == []
