"""env/readiness.py: which patches are reported for a release, wheel labels,
and what the patch set alone says of a release (expected).

One answer about readiness: `vpatch check`, `vpatch
install` and `vpatch doctor` on one environment say the same thing, because
they call the same function (env.readiness.readiness) and print the same
verdict; `doctor --vllm R --patched` gives it from the patch set alone.

The environment is shaped like the vLLM release without the V1 runner
(support/env.py releases_gone, GONE[-1]):
its upstream removed the V1 proposer a patch of the EAGLE-3 series changes,
so that patch is in no series of the release and its probe cannot hold.
Before the fix, on such an environment with its series installed, `check`
said NOT ready ("run vpatch install"), `install` said "already installed;
nothing to do", and doctor said ok with eagle3_ready false."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from support import env as fake_env
from support import known, make_series, minor_after, next_release, publish
from support import pairs as F
from support.cli import vpatch
from vpatch import lock, quilt, rules
from vpatch.env import check, readiness
from vpatch.env.dist import Dist
from vpatch.errors import NewerRelease

V1 = f"0002-{fake_env.GONE_V1}"  # its name in the EAGLE-3 series (GONE[0]'s)
LAYER0 = "0001-layer-fix-aux-state-at-layer-0"  # GONE[-1]'s own series
GONE = fake_env.GONE[-1]
READY = "EAGLE-3 for DeepSeek-V3 / Kimi-K2.5 targets: ready"
GONE_NEWEST = fake_env.GONE[-1]


class World:
    """A data root pinning GONE and a fake GONE[-1] environment of it."""

    def __init__(self, where: Path, decided: bool, files: dict[str, str] | None = None):
        (where / "root").mkdir(parents=True)
        known(GONE)  # the release whose V1 runner went: its facts, its rules
        self.lock_path = fake_env.releases_gone(where / "root", decided)
        files = files or fake_env.gone_files(GONE)
        self.py = fake_env.build_env(where / "venv", version=GONE, files=files)
        self.target, self.drafter = F.pair(where / "pair")

    def run(self, *args: str) -> subprocess.CompletedProcess:
        env = {**fake_env.root_env(self.lock_path), "HF_HUB_OFFLINE": "1"}
        return vpatch(*args, env=env, timeout=120)

    def check(self) -> tuple[int, str, dict[str, str]]:
        """(exit code, the verdict line, the patches) of `vpatch check`."""
        text = self.run("check", "--python", str(self.py))
        js = self.run("check", "--python", str(self.py), "--format", "json")
        assert text.returncode == js.returncode, (text.stdout, js.stdout)
        return (
            text.returncode,
            text.stdout.strip().splitlines()[-1],
            json.loads(js.stdout)["patches"],
        )

    def install(self, *flags: str) -> list[str]:
        r = self.run("install", "--python", str(self.py), *flags)
        assert r.returncode == 0, r.stderr
        return r.stdout.strip().splitlines()

    def doctor(self, *where: str) -> dict:
        r = self.run(
            "doctor",
            *(where or ("--python", str(self.py))),
            "--target",
            str(self.target),
            "--drafter",
            str(self.drafter),
            "--format",
            "json",
        )
        assert r.returncode in (0, 1), r.stderr
        return json.loads(r.stdout)


def finding(report: dict, check: str) -> dict:
    (f,) = [f for f in report["findings"] if f["check"] == check]
    return f


@pytest.fixture
def decided(tmp_path) -> World:
    return World(tmp_path, decided=True)


@pytest.fixture
def undecided(tmp_path) -> World:
    return World(tmp_path, decided=False)


def test_w6_a_patch_whose_code_upstream_removed_is_gone_and_all_three_say_ready(decided):
    """patches.toml records that the V1 fix's code is gone from GONE; the
    environment's files agree (no class Proposer under vllm/v1/). With
    GONE's own series installed, check, install and doctor say ready, and
    `doctor --vllm GONE --patched` says what check says."""
    w = decided
    # released: not ready, for the patch `vpatch install` installs; all three say so
    code, verdict, patches = w.check()
    assert code == 1 and patches == {
        LAYER0: "missing",
        "0001-config-allow-eagle3-for-deepseek": "upstream",
        V1: "gone",
    }, patches
    assert verdict.endswith(f"NOT ready ({LAYER0}); run `vpatch install --python {w.py}`"), verdict
    assert f"would install series {GONE}" in w.install("--dry-run")[0]
    doc = w.doctor()
    assert doc["vllm"]["eagle3_ready"] is False
    assert verdict in finding(doc, "vllm")["message"], finding(doc, "vllm")
    # installed: ready, all three
    w.install()
    code, verdict, patches = w.check()
    assert code == 0 and verdict == READY and patches[V1] == "gone" and patches[LAYER0] == "applied"
    again = w.install()
    assert again[0].endswith("is already installed; nothing to do") and again[-1] == READY, again
    doc = w.doctor()
    assert doc["vllm"]["eagle3_ready"] is True and doc["ok"] is True, doc
    # doctor's rules cover GONE (rules.toml): no warning, the release's verdict
    said = finding(doc, "vllm")["message"]
    assert finding(doc, "vllm")["severity"] == "info" and "NOT ready" not in said, said
    assert "not a pinned release" not in said, said
    # the release given instead of the environment: the same patches, the same answer
    pins = lock.load(w.lock_path)
    assert readiness.expected(pins, GONE, True) == patches
    assert w.doctor("--vllm", GONE, "--patched")["vllm"]["eagle3_ready"] is True


def test_w6_undecided_the_three_still_agree_and_none_sends_the_user_to_install(undecided):
    """The same environment while patches.toml says nothing of the V1 fix:
    the probe's anchor is absent, but no maintainer has read the release
    and decided the defect cannot occur, so the patch is missing. All three
    say NOT ready, in the same words; none says `vpatch install` would help,
    as install has nothing more to install."""
    w = undecided
    w.install()
    code, verdict, patches = w.check()
    assert code == 1 and patches[V1] == "missing" and patches[LAYER0] == "applied", patches
    assert f"NOT ready ({V1})" in verdict and "run `vpatch install" not in verdict, verdict
    assert f"vpatch's {GONE} series does not carry it" in verdict, verdict
    again = w.install()
    assert again[0].endswith("is already installed; nothing to do") and again[-1] == verdict
    doc = w.doctor()
    assert doc["vllm"]["eagle3_ready"] is False
    assert verdict in finding(doc, "vllm")["message"], finding(doc, "vllm")


def test_gone_needs_the_files_to_agree(tmp_path):
    """patches.toml says the V1 fix's code is gone from GONE, but this
    environment's files still have its anchor (class Proposer, unfixed: a
    build that kept the V1 proposer, or code put back): the decision is not
    taken on trust, the patch is missing, and all three say NOT ready."""
    files = {**fake_env.gone_files(GONE), "vllm/v1/proposer.py": fake_env.PROPOSER}
    w = World(tmp_path, decided=True, files=files)
    w.install()
    code, verdict, patches = w.check()
    assert code == 1 and patches[V1] == "missing", patches
    assert w.install()[-1] == verdict and f"NOT ready ({V1})" in verdict, verdict
    doc = w.doctor()
    assert doc["vllm"]["eagle3_ready"] is False and verdict in finding(doc, "vllm")["message"]


def test_a_vllm_newer_than_vpatch_knows_is_said_alike_by_all_three(tmp_path):
    """`check`, `install` and `doctor --python` on a vLLM newer than the
    newest release vpatch pins: one line each, exit 12 (NewerRelease),
    naming the release vpatch knows up to and `vpatch carry`; nothing
    installed."""
    pins = lock.load()
    newer = next_release(pins)
    py = fake_env.build_env(tmp_path / "venv", version=newer)
    t, d = F.pair(tmp_path / "pair")
    before = fake_env.snapshot(py)
    for args in (
        ("check", "--python", str(py)),
        ("install", "--python", str(py)),
        ("doctor", "--python", str(py), "--target", str(t), "--drafter", str(d)),
    ):
        r = vpatch(*args, env={**fake_env.root_env(pins.path), "HF_HUB_OFFLINE": "1"}, timeout=120)
        assert r.returncode == NewerRelease.exit_code, (args, r.stdout, r.stderr)
        (line,) = r.stderr.strip().splitlines()[-1:]
        assert f"vLLM {newer} is newer than vpatch knows" in line, line
        assert f"`vpatch carry {newer}`" in line, line
    assert fake_env.snapshot(py) == before


def test_newest_beyond_the_lock_is_refused_by_check_and_doctor_alike(tmp_path):
    """Rules.toml's `newest` at a release the lock does not pin
    was accepted everywhere, and doctor then judged a newer vLLM ("checked
    as" the lock's newest, exit 0 or 1) where check said exit 12. Refused
    at load now: exit 2, one line, by both (and doctor --vllm too)."""
    root = tmp_path / "root"
    shutil.copytree(lock.load().root, root)
    pins = lock.load(root / "VERSIONS.lock")
    beyond = minor_after(next_release(pins))
    f = root / rules.FILE
    f.write_text(rules.with_newest(f.read_text(), beyond))
    py = fake_env.build_env(tmp_path / "venv", version=next_release(pins))
    t, d = F.pair(tmp_path / "pair")
    env = {**fake_env.root_env(pins.path), "HF_HUB_OFFLINE": "1"}
    for args in (
        ("check", "--python", str(py)),
        ("doctor", "--python", str(py), "--target", str(t), "--drafter", str(d)),
        ("doctor", "--vllm", pins.newest, "--target", str(t), "--drafter", str(d)),
    ):
        r = vpatch(*args, env=env, timeout=120)
        assert r.returncode == 2, (args, r.stdout, r.stderr)
        line = fake_env.one_error_line(r)
        assert f"newest {beyond!r} is not a release VERSIONS.lock pins" in line, line


def test_a_post_release_is_its_release_for_check_install_and_doctor(tmp_path):
    """On vllm X.Y.Z.post1 (a pinned X.Y.Z's code plus fixes, the
    lock not pinning it), check said not pinned (exit 1), install exit 2
    ("not a release vpatch knows") and doctor judged it as X.Y.Z without a
    word. One answer now: all three take it as X.Y.Z, and say so."""
    w = World(tmp_path, decided=True)
    post = f"{GONE_NEWEST}.post1"
    w.py = fake_env.build_env(
        tmp_path / "post", version=post, files=fake_env.gone_files(GONE_NEWEST)
    )
    code, verdict, patches = w.check()
    assert code == 1 and patches[LAYER0] == "missing", patches
    assert verdict.endswith(f"run `vpatch install --python {w.py}`"), verdict
    r = w.run("check", "--python", str(w.py))
    assert f"vLLM {post} is a post release of {GONE_NEWEST}" in r.stdout, r.stdout
    said = w.install()
    assert f"installed series {GONE_NEWEST}" in said[0], said
    code, verdict, patches = w.check()
    assert code == 0 and verdict == READY and patches[LAYER0] == "applied", patches
    doc = w.doctor()
    assert doc["vllm"]["eagle3_ready"] is True, doc
    msg = finding(doc, "vllm")["message"]
    assert f"a post release of {GONE_NEWEST}: checked as {GONE_NEWEST}" in msg, msg
    doc = w.doctor("--vllm", post, "--patched")
    assert doc["vllm"]["eagle3_ready"] is True, doc


like_envs = fake_env.like_envs


def dist(version: str) -> Dist:
    return Dist("py", "vllm", version, None, None, "cpython-311")


def test_wheel_series_and_hash_normalization():
    assert readiness.wheel_series(dist("9.9.1+eagle3.1a2b3c4d")) == "1a2b3c4d"
    assert readiness.wheel_series(dist("9.9.1+cu129.eagle3.1a2b3c4d")) == "1a2b3c4d"
    assert readiness.wheel_series(dist("9.9.1+cu129")) is None
    assert readiness.wheel_series(dist("9.9.1")) is None
    assert readiness.same_hash("1a2b3c4d", "1a2b3c4d" + "0" * 56)
    # an all-digit chunk loses its leading zeros in PEP 440 normalization
    assert readiness.same_hash("1234567", "01234567" + "0" * 56)
    assert not readiness.same_hash("1a2b3c4e", "1a2b3c4d" + "0" * 56)


def test_subjects_own_series_first_then_the_newest_patched_then_upstream_fixes(tmp_path):
    base = {"vllm/a.py": "a\n", "vllm/b.py": "b\n"}

    def s(name, steps):
        """A series whose patch files are named after their subjects."""
        (tmp_path / name).mkdir()
        d = make_series(tmp_path / name, base, steps)
        names = []
        for i, (subject, _) in enumerate(steps, 1):
            slug = quilt.slug_of(subject)
            (d / f"{i:04d}-step-{i}.patch").rename(d / f"{i:04d}-{slug}.patch")
            names.append(f"{i:04d}-{slug}.patch")
        (d / "series").write_text("\n".join(names) + "\n")
        return d

    old = s("old", [("a: one", {"vllm/a.py": "a1\n"})])
    new = s("new", [("a: one", {"vllm/a.py": "a1\n"}), ("b: two", {"vllm/b.py": "b2\n"})])
    fix = s("fix", [("b: layer zero", {"vllm/b.py": "b0\n"})])
    rel = lambda v, st: lock.Release(v, f"v{v}", "c", st)  # noqa: E731
    for v, folder in (("1.0.0", old), ("1.1.0", new), ("2.1.0", fix)):
        publish(tmp_path, v, folder)
    pins = lock.Lock(
        {
            r.version: r
            for r in [
                rel("1.0.0", "patched"),
                rel("1.1.0", "patched"),
                rel("2.0.0", "upstream"),
                rel("2.1.0", "upstream"),
            ]
        },
        tmp_path / "L",
    )

    subs = readiness.subjects(pins, quilt.load(old))
    assert [(x.name, x.own) for x in subs] == [("0001-a-one", True), ("0002-b-two", False)]
    subs = readiness.subjects(pins, None)  # a release without a series
    assert [(x.name, x.own) for x in subs] == [
        ("0001-a-one", False),
        ("0002-b-two", False),
        ("0001-b-layer-zero", False),
    ]
    assert readiness.ready({"a": "applied", "b": "upstream"})
    assert not readiness.ready({"a": "applied", "b": "missing"}) and not readiness.ready({})


def test_expected_is_what_check_reports_on_each_release_installed(like_envs):
    """`vpatch doctor --vllm R [--patched]` takes `vpatch check`'s report of R
    installed from the patch set alone (readiness.expected): it is the report
    of R's fake vLLM as released and with its series installed by `vpatch
    install`, on releases of every kind (support/env.py LIKE): a patched one,
    one whose series fixes what upstream lacks (the EAGLE-3 change upstream
    there) and one without a series (one fix upstream, one not)."""
    lock_path, envs = like_envs
    pins = lock.load(lock_path)
    seen = set()
    for (release, patched), py in envs.items():
        got = check.inspect(py, pins=pins).patches
        assert readiness.expected(pins, release, patched) == got, (release, patched)
        seen |= set(got.values())
    assert seen == {"applied", "upstream", "missing"}
