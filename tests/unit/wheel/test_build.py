"""build.py, the source build: its environment, the preflight of the machine
(nvcc, the pinned torch as a CUDA build, build requirements), the plan."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import git, targz, write_tree
from vpatch import quilt
from vpatch.errors import ConfigError, PreflightError, TreeError, WheelError
from vpatch.lock import Artifact, Release
from vpatch.wheel import build


def test_source_env(monkeypatch, tmp_path):
    monkeypatch.setenv("CUDA_HOME", str(tmp_path))
    monkeypatch.setenv("MAX_JOBS", "3")
    monkeypatch.delenv("NVCC_THREADS", raising=False)
    env, home = build.source_env("9.9.1+eagle3.1a2b3c4d")
    assert home == str(tmp_path)
    assert env["TORCH_CUDA_ARCH_LIST"] == "10.0" and env["VLLM_TARGET_DEVICE"] == "cuda"
    assert env["MAX_JOBS"] == "3" and env["NVCC_THREADS"] == "1"
    assert env["CUDA_HOME"] == str(tmp_path)
    assert env["VLLM_VERSION_OVERRIDE"] == "9.9.1+eagle3.1a2b3c4d"


REQS = {"torch": ("requirements/build.txt", "torch==2.10.0")}


def fake_nvcc(root: Path, release: str) -> Path:
    nvcc = root / "bin" / "nvcc"
    nvcc.parent.mkdir(parents=True)
    nvcc.write_text(f"#!/bin/sh\necho 'Cuda compilation tools, release {release}, V{release}.1'\n")
    nvcc.chmod(0o755)
    return root


def test_preflight_old_nvcc(tmp_path):
    checks, problems = build.preflight(REQS, str(fake_nvcc(tmp_path, "12.4")))
    assert problems[0].startswith("nvcc 12.4 at ") and "older than 12.8" in problems[0]
    assert checks[0] == "nvcc 12.4 (>= 12.8, for sm_100): FAIL"


def test_preflight_no_nvcc(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    _, problems = build.preflight(REQS, str(tmp_path / "nowhere"))
    assert problems[0].startswith("nvcc not found")


class FakeDist:
    def __init__(self, root: Path, version: str, cuda: str | None):
        self.version = version
        (root / "torch").mkdir(parents=True, exist_ok=True)
        (root / "torch" / "version.py").write_text(
            f"__version__ = '{version}'\ncuda: Optional[str] = {cuda!r}\n"
        )
        self.root = root

    def locate_file(self, p):
        return self.root / p


@pytest.mark.parametrize(
    ("version", "cuda", "nvcc", "message"),
    [
        (None, None, "13.0", "torch is not installed"),
        ("2.9.1", "12.8", "13.0", "torch 2.9.1 is installed but vLLM's requirements/build.txt "
                                  "pins torch==2.10.0"),
        ("2.10.0+cpu", None, "13.0", "torch 2.10.0+cpu is a CPU-only build"),
        ("2.10.0+cu128", "12.8", "13.0", "built with CUDA 12.8 but nvcc is 13.0"),
        ("2.10.0", "13.0", "13.0", None),
    ],
)  # fmt: skip
def test_preflight_torch(tmp_path, monkeypatch, version, cuda, nvcc, message):
    import importlib.metadata as md

    real = md.distribution

    def distribution(name):
        if name != "torch":
            return real(name)
        if version is None:
            raise md.PackageNotFoundError(name)
        return FakeDist(tmp_path / "site", version, cuda)

    monkeypatch.setattr(md, "distribution", distribution)
    _, problems = build.preflight(REQS, str(fake_nvcc(tmp_path / "cuda", nvcc)))
    if message is None:
        assert problems == []
    else:
        assert len(problems) == 1 and message in problems[0]


def test_preflight_missing_build_requirements(tmp_path, monkeypatch):
    import importlib.metadata as md

    real = md.distribution
    torch = FakeDist(tmp_path / "s", "2.10.0", "13.0")
    monkeypatch.setattr(md, "distribution", lambda n: torch if n == "torch" else real(n))
    reqs = {**REQS, "vpatch-no-such-package": ("requirements/build.txt", "vpatch-no-such-package"),
            "packaging": ("requirements/build.txt", "packaging>=1"),
            "runtime-only": ("requirements/cuda.txt", "runtime-only==1")}  # fmt: skip
    _, problems = build.preflight(reqs, str(fake_nvcc(tmp_path / "cuda", "13.0")))
    assert problems == [
        "build requirements not installed: vpatch-no-such-package; "
        "pip install -r requirements/build.txt"
    ]


def test_requirements_from_a_tree(tmp_path):
    (tmp_path / "requirements").mkdir()
    (tmp_path / "requirements" / "build.txt").write_text(
        "# comment\ncmake>=3.26.1\ntorch==2.10.0\nwheel\n"
    )
    (tmp_path / "requirements" / "cuda.txt").write_text(
        "-r common.txt\ntorch==2.10.0\nnumba == 0.61.2; python_version > '3.0'\n"
    )
    reqs = build._requirements_from_tree(tmp_path)
    assert reqs["torch"] == ("requirements/build.txt", "torch==2.10.0")
    assert reqs["numba"][0] == "requirements/cuda.txt"


# -- the plan ------------------------------------------------------------------------


def release(sdist: bool = True) -> Release:
    arts = {"wheel": Artifact("wheel", "vllm-9.9.1-cp38-abi3-x.whl", "0" * 64)}
    if sdist:
        arts["sdist"] = Artifact("sdist", "vllm-9.9.1.tar.gz", "1" * 64)
    return Release("9.9.1", "v9.9.1", "abc1234", "patched", arts)


def test_plan_reads_the_requirements_of_an_existing_tree(monkeypatch, tmp_path, wheel_series):
    monkeypatch.setenv("CUDA_HOME", str(fake_nvcc(tmp_path / "cuda", "12.4")))
    monkeypatch.setattr(build, "download", lambda *a, **k: pytest.fail("downloaded the sdist"))
    tree = write_tree(tmp_path / "tree", {"requirements/build.txt": "torch==2.10.0\n"})
    out = tmp_path / "dist"
    plan = build.plan_source(release(), wheel_series, "9.9.1+eagle3.1a2b3c4d", out, tree)
    assert (plan.mode, plan.input, plan.tree) == ("source", "vllm-9.9.1.tar.gz", tree)
    assert plan.output.parent == out.resolve()
    assert plan.output.name.startswith("vllm-9.9.1+eagle3.1a2b3c4d-cp38-abi3-")
    assert plan.cmd[1:] == ["setup.py", "bdist_wheel", f"--dist-dir={out.resolve()}",
                            "--py-limited-api=cp38"]  # fmt: skip
    assert plan.env["CUDA_HOME"] == str(tmp_path / "cuda")
    assert plan.checks[0] == "nvcc 12.4 (>= 12.8, for sm_100): FAIL"
    assert plan.problems and "older than 12.8" in plan.problems[0]


def test_plan_needs_an_sdist(wheel_series, tmp_path):
    with pytest.raises(ConfigError, match="vLLM 9.9.1 has no sdist"):
        build.plan_source(release(sdist=False), wheel_series, "9.9.1+x", tmp_path)


def test_requirements_from_an_sdist(tmp_path):
    sdist = tmp_path / "vllm-9.9.1.tar.gz"
    build_txt = b"torch==2.10.0\nninja # a comment\n"
    cuda_txt = b"-r common.txt\nxformers==1; sys_platform == 'win32'\n"
    sdist.write_bytes(
        targz(
            {
                "vllm-9.9.1/requirements/build.txt": build_txt,
                "vllm-9.9.1/requirements/cuda.txt": cuda_txt,
            }
        )
    )
    reqs = build._requirements_from_sdist(sdist, "9.9.1")
    assert reqs == {
        "torch": ("requirements/build.txt", "torch==2.10.0"),
        "ninja": ("requirements/build.txt", "ninja"),
    }  # xformers' marker is false here
    (tmp_path / "bad.tar.gz").write_bytes(b"nope")
    with pytest.raises(WheelError, match="cannot read bad.tar.gz"):
        build._requirements_from_sdist(tmp_path / "bad.tar.gz", "9.9.1")


def test_a_failed_preflight_stops_the_build_with_one_line(tmp_path):
    plan = build.BuildPlan("9.9.1", "cuda", "source", "s", tmp_path / "w.whl", tmp_path, "v", [])
    plan.problems = ["nvcc not found", "torch missing"]
    with pytest.raises(PreflightError, match=r"^nvcc not found \(and 1 more: see --dry-run\)$"):
        build.build_from_source(plan, release(), None)
    assert plan.shell() == ""  # no command planned


def test_the_text_of_an_overlay_plan():
    plan = build.BuildPlan("9.9.1", "cpu", "overlay", "in.whl", Path("dist/out.whl"), Path("s"),
                           "9.9.1+eagle3.1", [])  # fmt: skip
    text = plan.to_text()
    assert text.splitlines()[0] == "vpatch wheel 9.9.1 --variant cpu --mode overlay (dry run)"
    assert "  replaces  nothing" in text and "preflight" not in text


def test_find_cuda_home(monkeypatch, tmp_path):
    monkeypatch.setenv("CUDA_HOME", "/opt/cuda-x")
    assert build.find_cuda_home() == Path("/opt/cuda-x")
    monkeypatch.delenv("CUDA_HOME")
    monkeypatch.setenv("CUDA_PATH", "/opt/cuda-y")
    assert build.find_cuda_home() == Path("/opt/cuda-y")
    monkeypatch.delenv("CUDA_PATH")
    if not Path("/usr/local/cuda/bin/nvcc").exists():
        monkeypatch.setenv("PATH", str(fake_nvcc(tmp_path / "c", "12.8") / "bin"))
        assert build.find_cuda_home() == (tmp_path / "c").resolve()


# -- a tree that is already there ------------------------------------------------------


def test_an_existing_tree_must_be_the_patched_one(patched_tree, pins, good_series):
    series = quilt.load(good_series)
    (patched_tree / "build" / "temp").mkdir(parents=True)  # build outputs are fine
    (patched_tree / "build" / "temp" / "x.o").write_bytes(b"\0")
    build._prepare_tree(pins.get("9.9.0"), series, patched_tree, offline=True)
    with pytest.raises(TreeError, match="is not vLLM 9.8.0 with the whole series"):
        build._prepare_tree(pins.get("9.8.0"), series, patched_tree, offline=True)
    (patched_tree / "README.md").write_text("edited\n")
    with pytest.raises(TreeError, match=r"has edits to tracked files \(README.md\)"):
        build._prepare_tree(pins.get("9.9.0"), series, patched_tree, offline=True)
    git(patched_tree, "checkout", "-q", "README.md")
    git(patched_tree, "reset", "-q", "--hard", "HEAD~1")
    with pytest.raises(TreeError, match="whole series applied"):
        build._prepare_tree(pins.get("9.9.0"), series, patched_tree, offline=True)
