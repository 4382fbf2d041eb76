"""`vpatch wheel --mode source`: the real build of the patched tree.

`python setup.py bdist_wheel` in a tree with the series applied, as vLLM's
release Dockerfile does, with TORCH_CUDA_ARCH_LIST="10.0" (sm_100) and the
local version of the overlay; before it, a preflight of the machine: nvcc
(>= 12.8), the torch the release pins (a CUDA build whose CUDA major matches
nvcc's) and the rest of requirements/build.txt. `plan_source()` makes the
plan (command, environment, preflight) that `--dry-run` prints;
`build_from_source()` carries it out. `BuildPlan` also describes an
overlay's dry run.
"""

from __future__ import annotations

import importlib.metadata as md
import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tarfile
from dataclasses import dataclass, field
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from .. import checkout, gitutil
from ..errors import ConfigError, PreflightError, TreeError, WheelError
from ..lock import Release
from ..quilt import Series
from ..shown import Shown
from ..sources.cache import download
from ..sources.extract import ARCHIVE_ERRORS

SOURCE_ARCH_LIST = "10.0"
MIN_NVCC = Version("12.8")


@dataclass
class BuildPlan(Shown):
    """What `vpatch wheel` would do (returned for --dry-run)."""

    version: str
    variant: str
    mode: str
    input: str  # the artifact it starts from (file name)
    output: Path  # the wheel it writes (source mode: the expected name)
    series: str
    local_version: str
    files: list[str]
    tree: Path | None = None
    cmd: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)  # set on top of the caller's
    checks: list[str] = field(default_factory=list)  # preflight lines
    problems: list[str] = field(default_factory=list)  # preflight failures

    def shell(self) -> str:
        """The build as one shell command line."""
        if not self.cmd:
            return ""
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in self.env.items())
        return f"cd {shlex.quote(str(self.tree))} && env {env} {shlex.join(self.cmd)}"

    def lines(self) -> list[str]:
        """Text for `vpatch wheel --dry-run`."""
        lines = [
            f"vpatch wheel {self.version} --variant {self.variant} --mode {self.mode} (dry run)",
            f"  input     {self.input}",
            f"  series    {self.series} ({len(self.files)} files) -> {self.local_version}",
            f"  output    {self.output}",
        ]
        if self.mode == "overlay":
            lines.append("  replaces  " + (", ".join(self.files) or "nothing"))
            return lines
        lines.append(f"  tree      {self.tree} (the series is applied there first)")
        for i, c in enumerate(self.checks):
            lines.append(("  preflight " if i == 0 else "            ") + c)
        lines.append("  environment")
        lines += [f"    {k}={v}" for k, v in self.env.items()]
        lines.append("  command")
        lines.append(f"    {self.shell()}")
        if self.problems:
            lines.append("  the build would stop (preflight):")
            lines += [f"    - {p}" for p in self.problems]
        return lines


def plan_source(
    release: Release,
    series: Series,
    new_version: str,
    out: Path,
    tree: Path | None = None,
    offline: bool = False,
) -> BuildPlan:
    """The source build's plan: command, environment, preflight. Nothing is
    built; the sdist is read (downloaded if needed) for the torch pin unless
    the tree already holds requirements/."""
    if "sdist" not in release.artifacts:
        raise ConfigError(
            f"vLLM {release.version} has no sdist (only wheels were published for it), "
            "so --mode source has nothing to build from; use --mode overlay"
        )
    sdist = release.artifact("sdist")
    tree = Path(tree) if tree else Path("build") / f"vllm-{release.version}-wheel"
    out = Path(out).resolve()
    plat = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    plan = BuildPlan(
        release.version,
        "cuda",
        "source",
        sdist.filename,
        out / f"vllm-{new_version}-cp38-abi3-{plat}.whl",
        series.name,
        new_version,
        series.files,
        tree=tree,
    )
    plan.env, cuda_home = source_env(new_version)
    plan.cmd = [
        sys.executable,
        "setup.py",
        "bdist_wheel",
        f"--dist-dir={out}",
        "--py-limited-api=cp38",
    ]
    if tree.is_dir() and (tree / "requirements").is_dir():
        reqs = _requirements_from_tree(tree)
    else:
        reqs = _requirements_from_sdist(download(sdist, offline=offline), release.version)
    plan.checks, plan.problems = preflight(reqs, cuda_home)
    return plan


def build_from_source(
    plan: BuildPlan, release: Release, series: Series, offline: bool = False
) -> Path:
    """Carry out plan_source's plan: stop at a failed preflight, apply the
    series in the tree (or check it is the patched tree), build. The wheel."""
    if plan.problems:
        more = len(plan.problems) - 1
        raise PreflightError(
            plan.problems[0] + (f" (and {more} more: see --dry-run)" if more else "")
        )
    assert plan.tree is not None
    _prepare_tree(release, series, plan.tree, offline)
    out = plan.output.parent
    out.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    env.pop("VLLM_PRECOMPILED_WHEEL_LOCATION", None)
    env.update(plan.env)
    res = subprocess.run(plan.cmd, cwd=plan.tree, env=env)
    if res.returncode != 0:
        raise WheelError(f"the source build failed (exit {res.returncode}); see its output above")
    if not plan.output.is_file():
        found = sorted(out.glob(f"vllm-{plan.local_version}-*.whl"))
        if not found:
            raise WheelError(
                f"the build finished but wrote no vllm-{plan.local_version} wheel to {out}"
            )
        return found[-1]
    return plan.output


def _prepare_tree(release: Release, series: Series, tree: Path, offline: bool) -> None:
    """A fresh tree gets the series applied; an existing one must be the
    fully patched series (build outputs in it are fine, edits are not)."""
    if not tree.exists() or not any(tree.iterdir()):
        checkout.apply(release, series, tree, offline=offline)
        return
    repo, version = checkout.open_tree(tree)
    st = checkout.status(tree, repo, version, series)
    if st.version != release.version or st.extra or not all(p.applied for p in st.patches):
        raise TreeError(
            f"{tree} is not vLLM {release.version} with the whole series applied; "
            "remove it or pass another tree"
        )
    edited = gitutil.dirty(repo, untracked=False)
    if edited:
        raise TreeError(f"{tree} has edits to tracked files ({edited[0]}); commit or discard them")


def find_cuda_home() -> Path | None:
    """CUDA_HOME / CUDA_PATH, else /usr/local/cuda, else nvcc on PATH."""
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            return Path(os.environ[var])
    if Path("/usr/local/cuda/bin/nvcc").exists():
        return Path("/usr/local/cuda")
    nvcc = shutil.which("nvcc")
    return Path(nvcc).resolve().parent.parent if nvcc else None


def source_env(new_version: str) -> tuple[dict[str, str], str]:
    """The variables the source build sets (on top of the caller's
    environment) and CUDA_HOME. MAX_JOBS / NVCC_THREADS / CMAKE_BUILD_TYPE
    keep a value the caller set."""
    cuda_home = str(find_cuda_home() or "/usr/local/cuda")
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    try:
        mem_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / (1 << 30)
    except (ValueError, OSError, AttributeError):
        mem_gib = 16
    # one nvcc job of vLLM's kernels peaks at several GiB
    jobs = max(1, min(cpus, int(mem_gib // 6)))
    env = {
        "VLLM_TARGET_DEVICE": "cuda",
        "TORCH_CUDA_ARCH_LIST": SOURCE_ARCH_LIST,
        "CUDA_HOME": cuda_home,
        "MAX_JOBS": os.environ.get("MAX_JOBS") or str(jobs),
        # a single arch gives nvcc nothing to run in parallel
        "NVCC_THREADS": os.environ.get("NVCC_THREADS") or "1",
        "CMAKE_BUILD_TYPE": os.environ.get("CMAKE_BUILD_TYPE") or "Release",
        "VLLM_USE_PRECOMPILED": "0",
        # setup.py turns this into SETUPTOOLS_SCM_PRETEND_VERSION
        "VLLM_VERSION_OVERRIDE": new_version,
        "PATH": f"{Path(cuda_home) / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    return env, cuda_home


def _req_lines(text: str) -> list[str]:
    return [
        ln.split("#", 1)[0].strip()
        for ln in text.splitlines()
        if ln.strip() and not ln.lstrip().startswith(("#", "-"))
    ]


def _requirements_from_tree(tree: Path) -> dict[str, tuple[str, str]]:
    out: dict[str, tuple[str, str]] = {}
    for name in ("build.txt", "cuda.txt"):
        p = tree / "requirements" / name
        if p.is_file():
            for ln in _req_lines(p.read_text()):
                out.setdefault(ln, (f"requirements/{name}", ln))
    return _reqs(out)


def _requirements_from_sdist(sdist: Path, version: str) -> dict[str, tuple[str, str]]:
    out: dict[str, tuple[str, str]] = {}
    try:
        with tarfile.open(sdist) as tar:
            for name in ("build.txt", "cuda.txt"):
                try:
                    f = tar.extractfile(f"vllm-{version}/requirements/{name}")
                except KeyError:
                    continue
                if f is not None:
                    for ln in _req_lines(f.read().decode()):
                        out.setdefault(ln, (f"requirements/{name}", ln))
    except (*ARCHIVE_ERRORS, OSError, UnicodeDecodeError) as e:
        raise WheelError(f"cannot read {sdist.name}: {e}") from None
    return _reqs(out)


def _reqs(lines: dict[str, tuple[str, str]]) -> dict[str, tuple[str, str]]:
    """{canonical name: (file, requirement)} for build.txt, then cuda.txt."""
    reqs: dict[str, tuple[str, str]] = {}
    for ln, (src, _) in lines.items():
        try:
            r = Requirement(ln)
        except InvalidRequirement:
            continue
        if r.marker is not None and not r.marker.evaluate():
            continue
        reqs.setdefault(canonicalize_name(r.name), (src, str(r)))
    return reqs


def _nvcc_version(cuda_home: str) -> tuple[str | None, Version | None]:
    nvcc: str | None = str(Path(cuda_home) / "bin" / "nvcc")
    if not Path(str(nvcc)).exists():
        nvcc = shutil.which("nvcc")
        if not nvcc:
            return None, None
    try:
        res = subprocess.run([str(nvcc), "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return str(nvcc), None
    m = re.search(r"release (\d+\.\d+)", res.stdout)
    return str(nvcc), Version(m.group(1)) if m else None


def _torch_cuda(dist: md.Distribution) -> str | None:
    """torch.version.cuda, read from torch/version.py without importing torch."""
    try:
        text = Path(str(dist.locate_file("torch/version.py"))).read_text()
    except OSError:
        return None
    m = re.search(r"^cuda\s*(?::[^=]*)?=\s*['\"]?([\w.]+)", text, re.M)
    return None if not m or m.group(1) == "None" else m.group(1)


def preflight(reqs: dict[str, tuple[str, str]], cuda_home: str) -> tuple[list[str], list[str]]:
    """(lines for the plan, problems): nvcc >= 12.8; the torch the release
    pins, installed as a CUDA build whose CUDA major matches nvcc's; the
    rest of requirements/build.txt installed; cmake and ninja runnable.
    Each problem is one line that says what to do."""
    checks: list[str] = []
    problems: list[str] = []

    def check(ok: bool, text: str, problem: str) -> None:
        checks.append(f"{text}: {'ok' if ok else 'FAIL'}")
        if not ok:
            problems.append(problem)

    nvcc, nv = _nvcc_version(cuda_home)
    if nv is None:
        check(
            False,
            "nvcc",
            f"nvcc not found (CUDA_HOME={cuda_home}); install CUDA >= {MIN_NVCC} and set CUDA_HOME"
            if nvcc is None
            else f"cannot read the version of {nvcc}",
        )
    else:
        check(
            nv >= MIN_NVCC,
            f"nvcc {nv} (>= {MIN_NVCC}, for sm_100)",
            f"nvcc {nv} at {nvcc} is older than {MIN_NVCC}, which sm_100 needs; install CUDA "
            f">= {MIN_NVCC} and set CUDA_HOME",
        )
    src, torch_req = reqs.get("torch", ("requirements/build.txt", ""))
    if not torch_req:
        check(False, "torch pin", "the release's requirements pin no torch; cannot check the build")
    else:
        spec = Requirement(torch_req).specifier
        dist: md.Distribution | None
        tv: Version | None
        try:
            dist = md.distribution("torch")
            tv = Version(dist.version)
        except md.PackageNotFoundError:
            dist = tv = None
        if dist is None or tv is None:
            check(
                False,
                f"{torch_req} ({src})",
                f"torch is not installed for {sys.executable}; the build needs {torch_req} "
                f"({src}) with CUDA",
            )
        elif not spec.contains(tv, prereleases=True):
            check(
                False,
                f"{torch_req} ({src}), found {tv}",
                f"torch {tv} is installed but vLLM's {src} pins {torch_req}; install that torch",
            )
        else:
            tc = _torch_cuda(dist)
            if tc is None:
                check(
                    False,
                    f"{torch_req} ({src}), found {tv}",
                    f"torch {tv} is a CPU-only build; install {torch_req} built with CUDA",
                )
            elif nv is not None and Version(tc).major != nv.major:
                check(
                    False,
                    f"{torch_req}, found {tv} (CUDA {tc})",
                    f"torch {tv} is built with CUDA {tc} but nvcc is {nv}; "
                    "their major versions must match",
                )
            else:
                check(True, f"{torch_req} ({src}), found {tv} (CUDA {tc})", "")
    missing = []
    for name, (rsrc, req) in sorted(reqs.items()):
        if name == "torch" or not rsrc.endswith("build.txt"):
            continue  # cuda.txt is what vLLM needs at run time, not to build
        r = Requirement(req)
        try:
            have = md.version(r.name)
        except md.PackageNotFoundError:
            if not (name in ("cmake", "ninja") and shutil.which(name)):  # a system binary will do
                missing.append(req)
            continue
        if not r.specifier.contains(have, prereleases=True):
            missing.append(f"{req} (found {have})")
    check(
        not missing,
        "the rest of requirements/build.txt",
        f"build requirements not installed: {', '.join(missing[:4])}"
        + (" ..." if len(missing) > 4 else "")
        + "; pip install -r requirements/build.txt",
    )
    return checks, problems
