"""The serve command as vLLM reads it: its forms, the flags doctor reads,
what it does not, bad input, and the command printed back."""

from __future__ import annotations

import json
import shlex
import subprocess

import pytest
from vpatch.doctor import serve as S
from vpatch.errors import ConfigError

SPEC = json.dumps({"method": "eagle3", "model": "acme/drafter", "num_speculative_tokens": 3})


def parse(cmd: str) -> S.Serve:
    return S.parse(shlex.split(cmd))


def test_vllm_serve():
    s = parse(
        f"vllm serve moonshotai/Kimi-K2.5 --tensor-parallel-size 8 --speculative-config '{SPEC}'"
    )
    assert (s.model, s.drafter, s.tensor_parallel_size, s.num_speculative_tokens) == (
        "moonshotai/Kimi-K2.5",
        "acme/drafter",
        8,
        3,
    )
    assert s.program == ("vllm", "serve") and s.uninterpreted == () and s.given


@pytest.mark.parametrize(
    "cmd",
    [
        "python -m vllm.entrypoints.openai.api_server --model M",
        "/opt/venv/bin/python3.11 -m vllm.entrypoints.openai.api_server --model=M",
        "python3 -m vllm.entrypoints.cli.main serve M",
        "/usr/local/bin/vllm serve M",
        "env VLLM_USE_V2_MODEL_RUNNER=0 vllm serve M",
    ],
)
def test_forms(cmd):
    s = parse(f"{cmd} --speculative-config '{SPEC}'")
    assert s.model == "M" and s.drafter == "acme/drafter"
    again = S.parse(shlex.split(s.command()))
    assert (again.model, again.spec, again.assigned) == (s.model, s.spec, s.assigned)


@pytest.mark.parametrize(
    "flags,field,value",
    [
        ("--tensor-parallel-size 4", "tensor_parallel_size", 4),
        ("--tensor-parallel-size=4", "tensor_parallel_size", 4),
        ("--tensor_parallel_size 4", "tensor_parallel_size", 4),
        ("-tp 4", "tensor_parallel_size", 4),
        ("-pp 2", "pipeline_parallel_size", 2),
        ("--pipeline-parallel-size=2", "pipeline_parallel_size", 2),
        ("--max-model-len 32768", "max_model_len", 32768),
        ("--max-model-len=32k", "max_model_len", 32000),
        ("--max-model-len 32K", "max_model_len", 32768),
        ("--max-model-len 1M", "max_model_len", 2**20),
        ("--max-model-len auto", "max_model_len", None),
        ("--max-model-len -1", "max_model_len", None),
        # vLLM's human_readable_int: a decimal suffix takes decimals and truncates
        ("--max-model-len 25.6k", "max_model_len", 25600),
        ("--max-model-len 1.0005k", "max_model_len", 1000),
        ("--max-model-len 2g", "max_model_len", 2 * 10**9),
        ("--enforce-eager", "enforce_eager", True),
        ("--enforce-eager --no-enforce-eager", "enforce_eager", False),
        ("--trust-remote-code", "trust_remote_code", True),
        ("--attention-backend FLASHMLA", "attention_backend", "FLASHMLA"),
        ("--attention-config.backend=TRITON_MLA", "attention_backend", "TRITON_MLA"),
        ('--attention-config \'{"backend": "CUTLASS_MLA"}\'', "attention_backend", "CUTLASS_MLA"),
    ],
)
def test_flags_read(flags, field, value):
    s = parse(f"vllm serve M {flags} --speculative-config '{SPEC}'")
    assert getattr(s, field) == value and s.uninterpreted == ()


def test_dotted_speculative_config_keys():
    s = parse(
        "vllm serve M --speculative-config.method eagle3 --speculative-config.model=D "
        "--speculative-config.num_speculative_tokens 5 "
        "--speculative-config.draft-tensor-parallel-size 1"
    )
    assert s.spec == {
        "method": "eagle3",
        "model": "D",
        "num_speculative_tokens": 5,
        "draft_tensor_parallel_size": 1,
    }
    assert json.loads(s.command().split("--speculative-config ")[1].strip("'")) == s.spec


def test_the_environment_the_command_gives():
    s = parse(
        "VLLM_USE_V2_MODEL_RUNNER=0 VLLM_ATTENTION_BACKEND=FLASHMLA VLLM_FOO=1 "
        f"vllm serve M --speculative-config '{SPEC}'"
    )
    assert s.environ({"VLLM_USE_V2_MODEL_RUNNER": "1", "HOME": "/h"}) == {
        "VLLM_USE_V2_MODEL_RUNNER": "0",
        "VLLM_ATTENTION_BACKEND": "FLASHMLA",
        "VLLM_FOO": "1",
        "HOME": "/h",
    }
    assert s.attention_backend == "FLASHMLA" and s.attention_from == "VLLM_ATTENTION_BACKEND"
    assert s.uninterpreted == ("VLLM_FOO (environment)",)
    assert "VLLM_ATTENTION_BACKEND" not in s.command(attention_backend=None)
    assert s.command().startswith("VLLM_USE_V2_MODEL_RUNNER=0 VLLM_ATTENTION_BACKEND=FLASHMLA ")


def test_doctors_own_environment_forces_a_backend(monkeypatch):
    monkeypatch.setenv("VLLM_ATTENTION_BACKEND", "FLASHINFER")
    assert parse(f"vllm serve M --speculative-config '{SPEC}'").attention_backend == "FLASHINFER"
    s = parse(f"vllm serve M --attention-backend FLASHMLA --speculative-config '{SPEC}'")
    assert s.attention_backend == "FLASHMLA"  # the flag wins


def test_what_is_not_interpreted_is_listed_and_kept():
    s = parse(
        "vllm serve M --gpu-memory-utilization=0.9 --enable-prefix-caching "
        f"--served-model-name kimi --config c.yaml --speculative-config '{SPEC}' "
        """--attention-config '{"backend": "X", "k": 1}'"""
    )
    assert s.uninterpreted == (
        "--gpu-memory-utilization",
        "--enable-prefix-caching",
        "--served-model-name",
        "--config",
        "--attention-config (keys k)",
    )
    out = s.command()
    assert (
        "--gpu-memory-utilization=0.9 --enable-prefix-caching "
        "--served-model-name kimi --config c.yaml" in out
    )
    # every key of the speculative config is read (checks/command.py judges
    # each against the release's SpeculativeConfig)
    s = parse(
        "vllm serve M --speculative-config "
        + shlex.quote(json.dumps({"method": "eagle3", "model": "D", "quantization": "fp8"}))
    )
    assert s.uninterpreted == () and s.spec["quantization"] == "fp8"


# The flags of the published Kimi-K2.6 commands (support.pairs.KIMI_K26_COMMAND):
# read for what they do to EAGLE-3, printed as written.
@pytest.mark.parametrize(
    ("words", "field", "value"),
    [
        ("--data-parallel-size 8", "data_parallel_size", 8),
        ("--data-parallel-size=8", "data_parallel_size", 8),
        ("-dp 4", "data_parallel_size", 4),
        ("--enable-expert-parallel", "expert_parallel", True),
        ("-ep", "expert_parallel", True),
        ("--enable-expert-parallel --no-enable-expert-parallel", "expert_parallel", False),
        ("--language-model-only", "language_model_only", True),
        ("--kv-cache-dtype fp8", "kv_cache_dtype", "fp8"),
        ("--max-num-batched-tokens 4096", "max_num_batched_tokens", 4096),
        (
            """--kv-transfer-config '{"kv_connector": "NixlConnector", "kv_role": "kv_both"}'""",
            "kv_transfer",
            {"kv_connector": "NixlConnector", "kv_role": "kv_both"},
        ),
        (
            "--kv-transfer-config.kv_connector NixlConnector",
            "kv_transfer",
            {"kv_connector": "NixlConnector"},
        ),
    ],
)
def test_the_flags_people_serve_these_targets_with_are_read_and_kept(words, field, value):
    s = parse(f"vllm serve M {words} --max-num-seqs 32 --speculative-config '{SPEC}'")
    assert getattr(s, field) == value and s.uninterpreted == ("--max-num-seqs",)
    assert shlex.join(shlex.split(words)) in s.command()


def test_spec_flags_are_kept_apart_and_printed_as_given():
    s = parse("vllm serve M --spec-method eagle3 --spec-model acme/d --spec-tokens 3")
    assert s.spec == {} and s.drafter == "acme/d" and s.num_speculative_tokens == 3
    assert s.spec_flags == (
        ("--spec-method", "method", "eagle3"),
        ("--spec-model", "model", "acme/d"),
        ("--spec-tokens", "num_speculative_tokens", 3),
    )
    out = s.command()
    assert "--speculative-config" not in out
    assert out.endswith("--spec-method eagle3 --spec-model acme/d --spec-tokens 3")
    merged = s.command(merge_spec_flags=True)
    assert "--spec-" not in merged
    spec = {"method": "eagle3", "model": "acme/d", "num_speculative_tokens": 3}
    assert merged.endswith(f"--speculative-config '{json.dumps(spec)}'")


def test_spec_flags_with_the_json_merge_where_it_lacks_the_key():
    spec = json.dumps({"method": "eagle3", "model": "acme/drafter"})
    s = parse(f"vllm serve M --spec-tokens 5 --spec-model other --speculative-config '{spec}'")
    assert s.drafter == "acme/drafter"  # the JSON's, which vLLM would refuse to pair with it
    assert s.given_spec["num_speculative_tokens"] == 5
    with pytest.raises(ConfigError, match="--spec-tokens"):
        parse("vllm serve M --spec-model d --spec-tokens three")


def test_no_drafter_at_all_is_bad_input():
    with pytest.raises(ConfigError, match="nor --spec-model"):
        parse("vllm serve M --spec-method eagle3 --spec-tokens 3")


def test_one_word_holding_the_whole_command():
    s = S.parse([f"vllm serve M -tp 2 --speculative-config '{SPEC}'"])
    assert s.tensor_parallel_size == 2 and s.drafter == "acme/drafter"


def test_command_with_changes():
    s = parse(f"vllm serve M -tp 4 -pp 2 --attention-backend X --speculative-config '{SPEC}'")
    out = s.command(
        pipeline_parallel_size=1,
        tensor_parallel_size=8,
        attention_backend=None,
        max_model_len=131072,
        spec_num_speculative_tokens=2,
    )
    assert out == (
        "vllm serve M --tensor-parallel-size 8 --max-model-len 131072 --speculative-config "
        + shlex.quote(
            json.dumps({"method": "eagle3", "model": "acme/drafter", "num_speculative_tokens": 2})
        )
    )


@pytest.mark.parametrize(
    "cmd,phrase",
    [
        ("", "no serve command"),
        ("ls -l", "not a vLLM serve command"),
        ("vllm chat M", "not a vLLM serve command"),
        ("python -m http.server", "not a vLLM serve command"),
        ("vllm serve M", "no --speculative-config"),
        ("vllm serve M --speculative-config '{not json'", "not valid JSON"),
        ("vllm serve M --speculative-config '[1]'", "not a JSON object"),
        ('vllm serve M --speculative-config \'{"method": "eagle3"}\'', 'has no "model"'),
        (f"vllm serve --speculative-config '{SPEC}'", "names no model"),
        (f"vllm serve M -tp zero --speculative-config '{SPEC}'", "whole number from 1 to"),
        (f"vllm serve M -tp 0 --speculative-config '{SPEC}'", "from 1 to 2147483647, got '0'"),
        (f"vllm serve M --max-model-len lots --speculative-config '{SPEC}'", "a length: 32768"),
        (f"vllm serve M --speculative-config '{SPEC}' --max-model-len", "needs a value"),
        (f"vllm serve M --max-model-len 1.5K --speculative-config '{SPEC}'", "did you mean 1.5k"),
        (f"vllm serve M --max-model-len 3g --speculative-config '{SPEC}'", "got 3000000000"),
        (f"vllm serve M --max-model-len 32x --speculative-config '{SPEC}'", "got '32x'"),
        (f"vllm serve M --attention-config '{{x' --speculative-config '{SPEC}'", "not valid JSON"),
    ],
)
def test_bad_input(cmd, phrase):
    with pytest.raises(ConfigError, match=phrase.replace("(", r"\(")):
        S.parse(shlex.split(cmd))


def test_unbalanced_quotes_in_one_word():
    with pytest.raises(ConfigError, match="cannot split"):
        S.parse(["vllm serve M --speculative-config '{"])


def test_from_options():
    s = S.from_options("T", "D", 8, 1, 3, remote=True)
    assert not s.given and s.command() == (
        "vllm serve T --tensor-parallel-size 8 --trust-remote-code --speculative-config "
        + shlex.quote(json.dumps({"method": "eagle3", "model": "D", "num_speculative_tokens": 3}))
    )


@pytest.mark.parametrize(
    ("flags", "repeated", "tp"),
    [
        ("-tp 2 --tensor-parallel-size 4", (("-tp 2", "--tensor-parallel-size 4"),), 4),
        ("--tp=2 --tensor_parallel_size=8", (("--tp=2", "--tensor_parallel_size=8"),), 8),
        ("--enforce-eager --no-enforce-eager", (("--enforce-eager", "--no-enforce-eager"),), 1),
        ("-tp 2", (), 2),
    ],
)
def test_a_setting_given_twice_is_named_with_both(flags, repeated, tp):
    """vLLM's parser keeps the last value; doctor kept it too, and
    said nothing of the first."""
    s = parse(f"vllm serve M {flags} --speculative-config '{SPEC}'")
    assert s.repeated == repeated and s.tensor_parallel_size == tp


def test_speculative_config_given_twice():
    other = json.dumps({"method": "eagle3", "model": "acme/other", "num_speculative_tokens": 5})
    s = parse(f"vllm serve M --speculative-config '{SPEC}' --speculative-config '{other}'")
    assert s.drafter == "acme/other"
    [(first, last)] = s.repeated
    assert first.startswith("--speculative-config '{") and first.endswith("…'")  # cut
    assert last.startswith("--speculative-config '{")
    s = parse(
        f"vllm serve M --speculative-config '{SPEC}' --speculative-config.model a "
        "--speculative-config.model b"
    )
    assert s.repeated == (("--speculative-config.model a", "--speculative-config.model b"),)
    assert s.drafter == "b"


def test_revisions_are_vllms_flags():
    """The target's revision is --revision, the drafter's the speculative
    config's "revision": read, and printed back where vLLM reads them."""
    spec = json.dumps({"method": "eagle3", "model": "acme/d", "revision": "v2"})
    s = parse(f"vllm serve M --revision=abc --speculative-config '{spec}'")
    assert (s.revision, s.drafter_revision, s.uninterpreted) == ("abc", "v2", ())
    assert s.command().startswith("vllm serve M --revision abc --tensor-parallel-size 1 ")
    assert '"revision": "v2"' in s.command()
    s = S.from_options("T", "D", revision="v1", drafter_revision="main")
    assert "vllm serve T --revision v1 " in s.command()
    assert '"model": "D", "revision": "main"' in s.command()
    assert parse(f"vllm serve M --speculative-config '{SPEC}'").revision is None


@pytest.mark.parametrize("value", ["a b", "x'y", "", "$HOME", "1;echo hi"])
def test_an_assignment_prints_as_the_shell_reads_one(tmp_path, value):
    """`VAR='a b' vllm serve ...`: the printed command pastes into a shell as
    an assignment (it once printed `'VAR=a b' vllm serve`, which a
    shell runs as a program named `VAR=a b`), and reads back the same."""
    s = S.parse(["env", f"VLLM_FOO={value}", "vllm", "serve", "M", "--speculative-config", SPEC])
    out = s.command()
    assert out.startswith(f"VLLM_FOO={shlex.quote(value)} vllm serve M "), out
    # what a POSIX shell makes of it: the assignment, then the program
    script = tmp_path / "show.sh"
    script.write_text('printf "%s\\n" "$VLLM_FOO" "$1"\n')
    got = subprocess.run(
        ["sh", "-c", out.replace("vllm serve", f"sh {script}", 1)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split("\n")
    assert got[:2] == [value, "M"], got
    assert S.parse(shlex.split(out)).assigned == {"VLLM_FOO": value}


@pytest.mark.parametrize(
    "words, phrase",
    [
        # vLLM's parser (FlexibleArgumentParser, then argparse) takes every word
        # after a bare `--` as a positional argument; `vllm serve` takes one
        ("vllm serve M --speculative-config SPEC -- --enforce-eager", "--enforce-eager"),
        ("vllm serve M --speculative-config SPEC -- -tp 8", "-tp 8"),
        ("vllm serve --speculative-config SPEC -- M extra", "extra"),
        (
            "python -m vllm.entrypoints.openai.api_server --model M --speculative-config SPEC -- N",
            "N",
        ),
    ],
)
def test_words_after_a_bare_double_dash_are_no_flags(words, phrase):
    cmd = [SPEC if w == "SPEC" else w for w in shlex.split(words)]
    with pytest.raises(ConfigError) as e:
        S.parse(cmd)
    msg = str(e.value)
    assert "after `--`" in msg and phrase in msg and "positional" in msg, msg


def test_the_model_after_a_bare_double_dash_is_the_model():
    s = S.parse(["vllm", "serve", "-tp", "2", "--speculative-config", SPEC, "--", "M"])
    assert (s.model, s.tensor_parallel_size, s.enforce_eager) == ("M", 2, False)
    assert s.command().startswith("vllm serve M --tensor-parallel-size 2 ")
