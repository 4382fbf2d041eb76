"""Hostile numbers: every whole number vpatch reads from
the command line, a serve command, an environment variable or a config is
read with a bound (settings.whole). A number too long for int() (5000
digits), one too large for a float (309 digits, and with a `k` suffix), one
out of range and one that is no number are each bad input: exit 2, one
`vpatch: error:` line, no traceback, never the internal error's 70.

Each case runs `python -m vpatch.cli` in a child process, as a user runs it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from support import pairs as F
from support.cli import vpatch
from support.releases import newest

HUGE = "9" * 5000  # over int()'s 4300-digit limit: ValueError
WIDE = "9" * 309  # under it, over a float's range: inf, then OverflowError
SPEC = json.dumps({"method": "eagle3", "model": "DRAFTER", "num_speculative_tokens": 3})


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    """No number here is worth asking the hub for: each vpatch runs offline."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def one_line(r: subprocess.CompletedProcess, code: int = 2) -> str:
    lines = r.stderr.strip().splitlines()
    assert r.returncode == code, (r.returncode, r.stderr[-600:])
    assert len(lines) == 1 and lines[0].startswith("vpatch: error: "), r.stderr[-600:]
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr
    return lines[0]


@pytest.fixture(scope="module")
def pair(tmp_path_factory) -> tuple[Path, Path]:
    return F.pair(tmp_path_factory.mktemp("pair"))


# -- doctor --vllm RELEASE -------------------------------------------------------


@pytest.mark.parametrize("release", [HUGE, f"0.{HUGE}", f"v{HUGE}", f"{newest()}+{HUGE}"])
def test_w8_a_release_of_5000_digits_is_bad_input(pair, release):
    t, d = pair
    line = one_line(vpatch("doctor", "--target", str(t), "--drafter", str(d), "--vllm", release))
    assert "--vllm" in line and len(line) < 400, line


# -- a serve command's numbers ------------------------------------------------


@pytest.mark.parametrize(
    "flags",
    [
        ["--max-model-len", WIDE],
        ["--max-model-len", WIDE + "k"],
        ["--max-model-len", WIDE + "K"],
        ["--max-model-len", HUGE],
        ["--max-model-len", HUGE + "k"],
        ["--max-model-len", "1" + "0" * 30],  # within a float, beyond any length
        ["--max-model-len=" + WIDE + ".5k"],
        ["-tp", HUGE],
        ["-tp", "1" + "0" * 30],
        ["--pipeline-parallel-size", HUGE],
        ["--pipeline-parallel-size", "4294967297"],
    ],
    ids=lambda f: " ".join(w if len(w) < 20 else f"<{len(w)} chars>" for w in f),
)
def test_w9_a_serve_command_number_out_of_bounds_is_bad_input(pair, flags):
    t, d = pair
    spec = SPEC.replace("DRAFTER", str(d))
    cmd = ["vllm", "serve", str(t), *flags, "--speculative-config", spec]
    line = one_line(vpatch("doctor", "--python", sys.executable, "--", *cmd))
    flag = flags[0].split("=")[0]
    assert flag.lstrip("-") in line.replace("tensor-parallel-size", "tp"), line
    assert len(line) < 400, line


@pytest.mark.parametrize(
    "value", ["0", "-4", HUGE, "1" + "0" * 30, "eight"], ids=["0", "-4", "huge", "1e30", "word"]
)
@pytest.mark.parametrize(
    "flag", ["--tensor-parallel-size", "--pipeline-parallel-size", "--num-speculative-tokens"]
)
def test_doctor_options_are_bounded(pair, flag, value):
    t, d = pair
    line = one_line(vpatch("doctor", "--target", str(t), "--drafter", str(d), flag, value))
    assert flag in line and len(line) < 400, line


@pytest.mark.parametrize("value", ["0", "-3", HUGE, "1" + "0" * 30])
def test_matrix_jobs_is_bounded(value):
    line = one_line(vpatch("matrix", "--offline", "--jobs", value))
    assert "--jobs" in line and len(line) < 400, line


# -- numbers in a config -----------------------------------------------------------


@pytest.mark.parametrize(
    "rope",
    [
        {"rope_type": "yarn", "factor": 1e308, "original_max_position_embeddings": 4096},
        {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 10**400},
    ],
    ids=["factor-1e308", "original-10e400"],
)
def test_a_drafter_yarn_range_beyond_a_float_is_no_crash(tmp_path, rope):
    """A YaRN drafter's range is original_max_position_embeddings x factor:
    from a config that is a number of any size. doctor judges the pair
    (exit 0 or 1); it does not fail reading it."""
    t, d = F.pair(tmp_path, config={"rope_scaling": rope})
    r = vpatch("doctor", "--target", str(t), "--drafter", str(d), "--vllm", newest())
    assert r.returncode in (0, 1), r.stderr[-600:]
    assert "rope_range" in r.stdout or "YaRN" in r.stdout, r.stdout


def test_a_pp_partition_of_5000_digits_is_said_as_vllm_refuses_it(pair):
    """VLLM_PP_LAYER_PARTITION from the serve command: vLLM's get_pp_indices
    reads it with int() and refuses what does not split the layers; doctor
    says so in a finding, in its own words, not int()'s."""
    t, d = pair
    spec = SPEC.replace("DRAFTER", str(d))
    cmd = [f"VLLM_PP_LAYER_PARTITION={HUGE},1", "vllm", "serve", str(t), "-pp", "2"]
    r = vpatch(
        "doctor", "--vllm", newest(), "--format", "json", "--", *cmd, "--speculative-config", spec
    )
    assert r.returncode == 1, r.stderr[-600:]
    (pp,) = [f for f in json.loads(r.stdout)["findings"] if f["check"] == "pipeline_parallel"]
    assert pp["severity"] == "error" and "VLLM_PP_LAYER_PARTITION" in pp["message"], pp
    assert "4300" not in pp["message"] and len(pp["message"]) < 400, pp


def _root(tmp_path: Path, lock_text: str, patches_toml: str = "") -> dict[str, str]:
    root = tmp_path / "root"
    (root / "patches").mkdir(parents=True)
    (root / "patches" / "patches.toml").write_text(patches_toml)
    (root / "VERSIONS.lock").write_text(lock_text)
    return {"VPATCH_ROOT": str(root)}


RELEASE = '[releases."9.9.1"]\ntag = "v9.9.1"\ncommit = "a"\nstatus = "upstream"\n'


@pytest.mark.parametrize("size", ['"big"', HUGE, "-1"], ids=["word", "huge", "negative"])
def test_a_lock_artifact_size_is_bounded(tmp_path, size):
    art = '\n[releases."9.9.1".artifacts.sdist]\nfilename = "v.tar.gz"\nsha256 = "ab"\n'
    art += f"size = {size}\n"
    line = one_line(vpatch("lock", env=_root(tmp_path, RELEASE + art)))
    assert "VERSIONS.lock" in line and len(line) < 400, line


@pytest.mark.parametrize(
    "lock_text, toml",
    [
        (f'[releases."{HUGE}"]\ntag = "v"\ncommit = "a"\nstatus = "upstream"\n', ""),
        (RELEASE, f'["a-patch"]\nreleases = ["9.9.1:{HUGE}"]\n'),
    ],
    ids=["lock", "patches.toml"],
)
def test_a_release_of_5000_digits_in_the_data_is_bad_input(tmp_path, lock_text, toml):
    line = one_line(
        vpatch(
            "series", "9.9.1", "--out", str(tmp_path / "s"), env=_root(tmp_path, lock_text, toml)
        )
    )
    assert len(line) < 400, line
