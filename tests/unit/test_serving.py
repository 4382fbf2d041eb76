"""serving.py: serving.toml read once and validated (each refusal one line,
exit 2), a route folded per platform, a file's facts per release, and the
flat facts of a release that the probes are compared with."""

from __future__ import annotations

import pytest
from packaging.version import Version
from support import releases as R
from vpatch import lock, serving
from vpatch.errors import ConfigError

PINS = lock.load()
T = PINS.serving
TEXT = T.path.read_text()


def write(tmp_path, text: str):
    p = tmp_path / serving.FILE
    p.write_text(text)
    return p


def test_the_committed_table_reads_and_every_route_names_a_file_with_facts():
    for changes in T.routes.values():
        for release, table in changes:
            for target in table.values():
                path = target.partition(":")[0]
                assert not path or path == serving.GENERIC or T.files[path].at(release), target
    assert set(T.routes) == {a for f in T.families.values() for a in f.architectures}


def test_a_route_folds_per_platform():
    """A later table changes only the platforms it names; "*" serves the rest
    (bites: a fold that replaces the whole table loses ROCm's route when CUDA
    changes)."""
    for arch, changes in T.routes.items():
        acc: dict[str, str] = {}
        for release, table in changes:
            acc.update(table)
            for platform in serving.PLATFORMS:
                want = acc.get(platform, acc[serving.ANY]).partition(":")[::2]
                assert T.route(arch, release, platform) == want, (arch, release, platform)


def test_a_file_has_facts_from_its_first_table_until_it_is_gone():
    for entry in T.files.values():
        before = [v for v in R.covered() if Version(v) < Version(entry.first)]
        assert all(entry.at(v) is None for v in before), entry.path
        assert entry.at(entry.first) is not None
        if entry.gone:
            assert entry.at(entry.gone) is None and entry.at(R.newest()) is None


def test_served_names_the_family_and_none_outside_it():
    s = T.served("DeepseekV4ForCausalLM", R.newest(), "cuda")
    assert s is not None and s.family.key == "deepseek_v4" and s.code is not None
    assert s.capture_cls == T.files[s.path].capture_class
    assert T.served("DeepseekV3ForCausalLM", R.newest(), "cuda") is None
    first = T.since("DeepseekV4ForCausalLM")
    assert first is not None
    assert not T.served("DeepseekV4ForCausalLM", R.before(first), "cuda").registered


def test_expected_has_every_fact_of_a_release():
    """The flat facts the probes are compared with: every release fact, each
    family's drafters, each architecture on each platform, and each file the
    release has, all its facts."""
    got = T.expected(R.newest())
    assert {k for k in got if k.startswith("release ")} == {
        f"release {f}" for f in serving.Release.__dataclass_fields__
    }
    routes = [k for k in got if k.startswith("route ")]
    assert len(routes) == len(T.routes) * len(serving.PLATFORMS)
    files = {k.split(" ")[1] for k in got if k.startswith("file ")}
    assert files == {p for p, e in T.files.items() if e.at(R.newest()) is not None}


# what the edits below change, read off the committed table
GONE = next(f for f in T.files.values() if f.gone)
V32_NVIDIA = "vllm/models/deepseek_v32/nvidia/model.py"
OWN_ROUTE = next(
    v for v, t in T.routes["DeepseekV32ForCausalLM"] if t.get("cuda", "").startswith(V32_NVIDIA)
)
_K3 = T.files["vllm/models/kimi_k3/nvidia/model.py"]
LAST = next(
    line + "\n"
    for line in TEXT.splitlines()
    if line.startswith(f'"{_K3.changes[-1][0]}" = {{ pp_relay')
)

FIRST_FILE = """
[files."x/a.py"]
family = "deepseek_v4"
class = "A"
capture = "M"
"0.1.0" = { eagle3 = true, id0 = "dropped", id_n = true, partial_sum = false, \
pp_relay = false, mixin = true, aux_env = "" }
"""


@pytest.mark.parametrize(
    ("edit", "says"),
    [
        (lambda s: s + "\n[nonsense]\n", "unknown keys nonsense"),
        (lambda s: s.replace("mixin_sorts = false\n", "", 1), "missing mixin_sorts"),
        (lambda s: s.replace("mixin_sorts = false", "mixin_sorts = 1", 1), "true or false"),
        (lambda s: s.replace('allowlist = ["gpt_oss"', 'allowlist = ["qwen", "qwen"', 1), "twice"),
        (lambda s: s.replace('id0 = "dropped"', 'id0 = "gone"', 1), "id0 must be one of"),
        (lambda s: s.replace("= { pp_relay = true }", "= { pp_relay = false }", 1), "as before"),
        # a table added after the file's last, at a release before its first
        (
            lambda s: s.replace(LAST, LAST + f'"{R.oldest()}" = {{ pp_relay = true }}\n'),
            "oldest first",
        ),
        (
            lambda s: s.replace(
                '{ "*" = "vllm/model_executor/models/deepseek_v2.py:DeepseekV3ForCausalLM" }',
                '{ cuda = "vllm/model_executor/models/deepseek_v2.py:DeepseekV3ForCausalLM" }',
                1,
            ),
            "the first table routes every platform",
        ),
        (
            lambda s: s.replace(
                'rocm = "vllm/models/deepseek_v32/amd/', 'tpu = "vllm/models/deepseek_v32/amd/', 1
            ),
            "'tpu' is no platform",
        ),
        (
            lambda s: s.replace('model.py:DeepseekV32ForCausalLM" }', 'model.py:Other" }', 1),
            "is no [files] entry",
        ),
        (
            lambda s: s.replace(f'gone = "{GONE.gone}"', f'gone = "{GONE.first}"', 1),
            "gone must be a release after",
        ),
        (
            lambda s: s.replace(
                'architectures = ["DeepseekV41ForCausalLM"]',
                'architectures = ["DeepseekV4ForCausalLM"]',
                1,
            ),
            "an architecture is in two families",
        ),
        (lambda s: s + FIRST_FILE.replace("deepseek_v4", "nope"), "no family 'nope'"),
        (
            lambda s: s.replace('fixes = { id0 = "v4_id0" }', 'fixes = { nothing = "v4_id0" }', 1),
            "fixes maps",
        ),
        (
            lambda s: s.replace("[routes.KimiK31ForConditionalGeneration]", "[routes.Other]", 1),
            "one table per family architecture",
        ),
        # a route to a file before its facts begin
        (
            lambda s: s.replace(
                f'"{OWN_ROUTE}" = {{ cuda = "{V32_NVIDIA}',
                f'"{R.before(T.files[V32_NVIDIA].first)}" = {{ cuda = "{V32_NVIDIA}',
                1,
            ),
            "has no facts there",
        ),
    ],
)
def test_a_bad_table_is_refused_with_one_line(tmp_path, edit, says):
    text = edit(TEXT)
    assert text != TEXT, says
    with pytest.raises(ConfigError, match=".*") as e:
        serving.load(write(tmp_path, text))
    assert says in str(e.value) and "\n" not in str(e.value)


def test_a_missing_or_broken_file_is_bad_input(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        serving.load(tmp_path / serving.FILE)
    with pytest.raises(ConfigError, match="not valid TOML"):
        serving.load(write(tmp_path, "[releases\n"))
