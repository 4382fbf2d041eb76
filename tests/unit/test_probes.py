"""probes.py: patches/patches.toml's checks that a release's own source
already does what a patch does, read with `ast`; PR titles."""

import json

import pytest
from support import text_file, write_tree
from vpatch import probes
from vpatch.errors import ConfigError


def toml(tmp_path, text: str):
    return text_file(tmp_path / "patches.toml", text)


CODE = """
class Config:
    def check(self):
        allowed = ["llama", "qwen", "deepseek_v2"]
        if name == "Kimi":
            self.token = cfg.media_id
        if 0 in self.ids:
            aux.append(embedding)
        if idx + 1 in self.ids:
            aux.append(state)
        elif name == "eagle":
            self.mla = cfg.inner in ("deepseek_v3", "kimi_k2") and cfg.rank
        else:
            self.token = cfg.image_id
"""


@pytest.mark.parametrize(
    "check, expected",
    [
        ({"list": "allowed", "includes": ["llama", "deepseek_v2"]}, True),
        ({"list": "allowed", "includes": ["kimi_k2"]}, False),
        ({"list": "gone", "includes": ["kimi_k2"], "or_absent": True}, True),
        ({"list": "allowed", "includes": ["kimi_k2"], "or_absent": True}, False),
        ({"guard": ["name"], "uses": "media_id"}, True),
        ({"guard": ["cfg", "inner"], "uses": "mla"}, False),  # inner is in the body, not a test
        ({"guard": ["name", "cfg"], "uses": "media_id"}, False),  # no test mentions both
        ({"guard": [0, "ids"], "uses": "embedding"}, True),
        ({"guard": [0, "ids"], "uses": "state"}, False),  # its test holds 1, not 0
        ({"guard": [1, "ids"], "uses": "state"}, True),
        ({"guard": [2, "ids"], "uses": "aux"}, False),  # no test holds 2
        ({"when": "Kimi", "uses": "media_id"}, True),
        ({"when": "Kimi", "uses": "image_id"}, False),  # only in the else branch
        ({"when": "eagle", "includes": ["kimi_k2", "deepseek_v3"]}, True),
        ({"when": "eagle", "includes": ["kimi_k2", "deepseek_v2"]}, False),  # not in one literal
        ({"when": "Kimi", "includes": ["kimi_k2"]}, False),  # another branch's literal
        ({"function": "Config.check", "lacks": "image_id"}, False),
        ({"function": "Config.check", "lacks": "rope_scaling"}, True),
        ({"function": "Config.gone", "lacks": "rope_scaling"}, False),  # no such scope
        ({"function": "Config.check", "uses": "media_id"}, True),
        ({"function": "Config.other", "uses": "media_id"}, False),
        ({"class": "Config", "defines": "check"}, True),
        ({"class": "Config", "has_base": "object"}, False),
    ],
)
def test_check_kinds(tmp_path, check, expected):
    items = ", ".join(f"{k} = {json.dumps(v)}" for k, v in check.items())
    path = toml(tmp_path, f'[p]\nprobe = [{{ file = "pkg/*.py", {items} }}]\n')
    files = {"pkg/config.py": CODE, "pkg/sub/other.py": CODE.replace("Kimi", "Other")}
    assert probes.holds(probes.load(path)["p"], files) is expected


def test_globs_stay_in_one_folder():
    assert probes.matches("vllm/v1/spec_decode/eagle.py", "vllm/v1/spec_decode/*.py")
    assert not probes.matches("vllm/v1/spec_decode/dynamic/x.py", "vllm/v1/spec_decode/*.py")


@pytest.mark.parametrize(
    "text, message",
    [
        ('[p]\nprobe = [{ file = "a.py", uses = "x", typo = 1 }]\n', "unknown check keys typo"),
        ('[p]\nprobe = [{ file = "a.py" }]\n', "one of"),
        ('[p]\nprobe = [{ file = "a.py", has_base = "B" }]\n', "needs a class"),
        ('[p]\nprobe = [{ file = "a.py", when = "S" }]\n', "when needs uses or includes"),
        ('[p]\nprobe = [{ file = "a.py", when = "S", lacks = "x" }]\n', "when needs"),
        ("[p]\nprobes = []\n", "unknown keys probes"),
        ("[p\n", "not valid TOML"),
    ],
)
def test_bad_declarations_are_config_errors(tmp_path, text, message):
    with pytest.raises(ConfigError, match=message):
        probes.load(toml(tmp_path, text))


def test_no_probe_is_no_claim():
    assert not probes.holds([], {"a.py": "anything"})


def test_is_none_probe_reads_the_scope_only():
    check = probes.Check("m.py", function="Model.forward", is_none="residual")
    code = """
class Layer:
    def forward(self, h, residual):
        if residual is None:
            residual = h
class Model:
    def forward(self, h, residual=None):
        aux = {fix}
"""
    crash = {"m.py": code.format(fix="h + residual")}
    fixed = {"m.py": code.format(fix="h if residual is None else h + residual")}
    also = {"m.py": code.format(fix="h + residual if residual is not None else h")}
    assert not probes.holds([check], crash)  # Layer.forward's test is not Model's
    assert probes.holds([check], fixed) and probes.holds([check], also)


def test_unconditional_probe_leaves_out_reads_under_an_if_on_the_name():
    check = probes.Check("m.py", function="load", unconditional="attention_backend")
    code = """
def load(cfg, spec):
{body}
    return cfg
"""
    never = "    cfg = cfg.other"
    only_when_set = (
        "    if spec.attention_backend is not None:\n"
        "        cfg = replace(cfg, backend=spec.attention_backend)\n"
        "    else:\n"
        "        cfg = replace(cfg, backend=spec.attention_backend or cfg.backend)"
    )
    always = "    cfg = replace(cfg, backend=spec.attention_backend)"
    under_another_if = "    if spec.kv:\n        cfg = replace(cfg, backend=spec.attention_backend)"
    assert not probes.holds([check], {"m.py": code.format(body=never)})
    assert not probes.holds([check], {"m.py": code.format(body=only_when_set)})
    assert probes.holds([check], {"m.py": code.format(body=always)})
    assert probes.holds([check], {"m.py": code.format(body=only_when_set + "\n" + always)})
    # an if that does not test the name does not make the read conditional on it
    assert probes.holds([check], {"m.py": code.format(body=under_another_if)})


def test_a_missing_file_declares_nothing(tmp_path):
    missing = tmp_path / "nowhere.toml"
    assert probes.load(missing) == {}
    assert probes.pr_titles(missing) == {}


def test_load_keeps_only_tables_with_a_probe_and_reads_every_key(tmp_path):
    path = toml(
        tmp_path,
        '["a"]\nprobe = [{ file = "x/*.py", class = "C", function = "C.f", when = "K", '
        'uses = "u" }]\n["b"]\nreleases = ["1.0"]\n'
        '["c"]\nprobe = [{ file = "y.py", list = "n", includes = ["p", "q"], or_absent = true }]\n',
    )
    got = probes.load(path)
    assert list(got) == ["a", "c"]
    assert got["a"] == [probes.Check("x/*.py", cls="C", function="C.f", when="K", uses="u")]
    assert got["c"] == [probes.Check("y.py", list_name="n", includes=("p", "q"), or_absent=True)]
    assert probes.patterns(got) == {"x/*.py", "y.py"}


@pytest.mark.parametrize(
    "text, message",
    [
        ("p = 1\n", "not a table"),
        ('[p]\nprobe = [{ file = "a/**/b.py", uses = "x" }]\n', "'\\*\\*' is not supported"),
        ('[p]\nprobe = [{ file = "a.py", guard = ["n"], lacks = "x" }]\n', "guard takes"),
        ('[p]\nprobe = [{ file = "a.py", guard = [], uses = "x" }]\n', "guard takes"),
        ('[p]\nprobe = [{ file = "a.py", guard = [true], uses = "x" }]\n', "guard takes"),
        ('[p]\nprobe = [{ file = "a.py", guard = [0.5], uses = "x" }]\n', "guard takes"),
    ],
)
def test_more_bad_declarations(tmp_path, text, message):
    with pytest.raises(ConfigError, match=message):
        probes.load(toml(tmp_path, text))


def test_pr_titles(tmp_path):
    path = toml(
        tmp_path,
        '["a"]\nreleases = ["1.0:1.1", "2.0"]\npr_title = "A: fix"\n'
        '["b"]\npr_prefix = "[Bugfix]"\n["c"]\nreleases = []\n',
    )
    assert probes.pr_titles(path) == {"a": {"pr_title": "A: fix"}, "b": {"pr_prefix": "[Bugfix]"}}
    with pytest.raises(ConfigError, match="unknown keys variants"):
        probes.load(toml(tmp_path, '["a"]\nvariants = [["1.0"]]\n'))
    with pytest.raises(ConfigError, match="pr_prefix and pr_title are strings"):
        probes.pr_titles(toml(tmp_path, '["a"]\npr_title = " "\n'))


def test_folder_files_reads_what_the_globs_match(tmp_path):
    root = write_tree(
        tmp_path / "rel",
        {"vllm/a.py": "a\n", "vllm/b.txt": "b\n", "vllm/sub/c.py": "c\n", "top.py": "t\n"},
    )
    (root / "vllm/dir.py").mkdir()  # a folder that matches is no file
    assert probes.folder_files(root, {"vllm/*.py", "top.py", "gone.py"}) == {
        "vllm/a.py": "a\n",
        "top.py": "t\n",
    }


@pytest.mark.parametrize(
    "check, files, anchored",
    [
        # the class is in a file the glob matches
        ({"class": "Proposer", "uses": "x"}, {"v1/a.py": "class Proposer:\n    pass\n"}, True),
        # the folder keeps other files, the class went (as vLLM's vllm/v1/spec_decode/
        # did where its V1 proposer was removed: patches.toml's `gone`)
        ({"class": "Proposer", "uses": "x"}, {"v1/__init__.py": "", "v1/m.py": "P = 1\n"}, False),
        # named in a comment is no class
        ({"class": "Proposer", "uses": "x"}, {"v1/a.py": "# class Proposer was here\n"}, False),
        # moved to a folder the glob does not reach: absent, for the glob
        ({"class": "Proposer", "uses": "x"}, {"v2/a.py": "class Proposer:\n    pass\n"}, False),
        # a function scope: the class alone is not enough
        (
            {"function": "Proposer.load", "uses": "x"},
            {"v1/a.py": "class Proposer:\n  pass\n"},
            False,
        ),
        (
            {"function": "Proposer.load", "uses": "x"},
            {"v1/a.py": "class Proposer:\n    def load(self):\n        pass\n"},
            True,
        ),
        # no scope: any file the glob matches is the anchor
        ({"when": "Kimi", "uses": "x"}, {"v1/m.py": "P = 1\n"}, True),
        ({"when": "Kimi", "uses": "x"}, {}, False),
        # a file that is not Python we can parse is not shown to lack it
        ({"class": "Proposer", "uses": "x"}, {"v1/a.py": "class Proposer(:\n"}, True),
    ],
)
def test_an_anchor_is_the_file_and_scope_a_check_reads(tmp_path, check, files, anchored):
    items = ", ".join(f"{k} = {json.dumps(v)}" for k, v in check.items())
    checks = probes.load(toml(tmp_path, f'[p]\nprobe = [{{ file = "v1/*.py", {items} }}]\n'))["p"]
    assert probes.anchored(checks[0], files) is anchored
    assert probes.gone(checks, files) is not anchored
    assert not probes.holds(checks, files)  # absent or not, these hold nothing
    assert not probes.gone([], files)  # no checks, no claim
