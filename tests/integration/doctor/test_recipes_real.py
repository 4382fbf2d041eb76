"""vLLM's recipes as doctor's test data: every `--speculative-config`
and every flag set of `recipes/models/{moonshotai,deepseek-ai}/*.yaml` in the
newest pinned release's sdist, read from the cache at test time (never copied
here), gets a verdict:

* each speculative config (an argument list's `--speculative-config`, a
  preset's `json_args`, a guide's `vllm serve` command): its keys and values
  as the release reads them (behaviour.speculative, backend_refused), for
  every recipe, whatever its target;
* each flag set of a recipe whose target doctor knows (KNOWN: Kimi-K2.x,
  DeepSeek-V3/V3.1/R1): doctor's whole verdict on the recipe's command
  (its base arguments, the flag set, its speculative config or, where it
  has none, the published drafter KNOWN names) on the release as released,
  the pair as its published shapes (tests/support/pairs.py).

A recipe's own command doctor says vLLM refuses is in REFUSED, each a real
failure read in that release's source; any other error fails the test."""

from __future__ import annotations

import functools
import json
import re
import shlex
from typing import Any

import pytest
import yaml
from support.doctor import PINS, errors, find, published
from support.releases import newest
from vpatch.doctor import behaviour
from vpatch.sources import files

pytestmark = pytest.mark.integration

NEWEST = newest()
GLOBS = {"recipes/models/moonshotai/*.yaml", "recipes/models/deepseek-ai/*.yaml"}

# The targets doctor knows, by a recipe's model_id: their fixture, the drafter a
# flag set is judged with where the recipe names none (the published one for
# the family), and the drafter ids of the recipe's own speculative configs.
KNOWN = {
    "moonshotai/Kimi-K2.5": ("kimi_k25", "lightseekorg_mla"),
    "moonshotai/Kimi-K2.6": ("kimi_k26", "lightseekorg_mla"),
    "moonshotai/Kimi-K2.7-Code": ("kimi_k26", "eagle31_mla"),
    "moonshotai/Kimi-K2-Instruct": ("kimi_k2", "modelopt_mla"),
    "moonshotai/Kimi-K2-Thinking": ("kimi_k2", "modelopt_mla"),
    "deepseek-ai/DeepSeek-V3": ("deepseek_v3", "specforge_dsv3"),
    "deepseek-ai/DeepSeek-V3.1": ("deepseek_v3", "specforge_dsv3"),
    "deepseek-ai/DeepSeek-R1": ("deepseek_v3", "specforge_dsv3"),
}
DRAFTER = "acme/eagle3-drafter"  # the id a flag set's default speculative config names

# A recipe's flag set that has no speculative config, with the published
# drafter added: the errors doctor finds in the pair, each a rule of the
# release read in its source. Kimi-K2-Instruct's TP 8 + PP 2 guide command:
# the V2 runner refuses EAGLE-3 with PP for a DeepseekV2Model target, which
# relays no aux states between PP ranks (v1/worker/gpu/spec_decode/eagle/
# eagle3_utils.py verify_supports_aux_hidden_states_over_pp; rules.toml
# v2_supports_pp), and ModelOpt's drafter has no embed_tokens of its own,
# which the drafter shares with the target only without PP.
WITH_EAGLE3 = {("Kimi-K2-Instruct.yaml", "guide/2/1"): {"pipeline_parallel", "embed_tokens"}}

# A recipe's own speculative config that vLLM refuses, and why: read in the
# release's source (research-54 E).
REFUSED = {
    (
        "DeepSeek-V4-Flash.yaml",
        "features/spec_decoding/modes/dspark/hardware_overrides/dgx_spark_gb10/args",
    ): (
        "Unknown attention backend: 'B12X_MLA_SPARSE'",
        "v1/attention/backends/registry.py AttentionBackendEnum has B12X, no "
        "B12X_MLA_SPARSE, and nothing in vllm/ registers one (register_backend with a "
        "string: none); SpeculativeConfig._parse_attention_backend takes "
        "AttentionBackendEnum[value.upper()], whose metaclass raises ValueError",
    ),
}


@functools.cache
def recipes() -> dict[str, dict[str, Any]]:
    """{file name: the recipe}, from the newest release's sdist in the cache."""
    tree = files.release_files(PINS.get(NEWEST), GLOBS)
    found = {p.name: yaml.safe_load(p.read_text()) for g in GLOBS for p in tree.glob(g)}
    assert found, f"no recipes in vLLM {NEWEST}'s sdist"
    return dict(sorted(found.items()))


def walk(x: Any, path: tuple[str, ...] = ()):
    """(path, value) of every list and dict under x, and x."""
    yield path, x
    items = x.items() if isinstance(x, dict) else enumerate(x) if isinstance(x, list) else ()
    for k, v in items:
        yield from walk(v, (*path, str(k)))


def arg_lists(doc: dict) -> dict[str, list[str]]:
    """{path: words} of every argument list of the recipe (base_args, a
    feature's args, a variant's or an override's extra_args, a strategy's
    vllm_args, a preset's args)."""
    return {
        "/".join(p): v
        for p, v in walk(doc)
        if isinstance(v, list)
        and v
        and all(isinstance(w, str) for w in v)
        and any(w.startswith("--") for w in v)
        and not p[-1].startswith("remove")
    }


ASSIGN = re.compile(r"^(?:export\s+)?([A-Z_][A-Z0-9_]*)=(\S+)$")


def guide_commands(doc: dict) -> dict[str, str]:
    """{where: command} of the `vllm serve` commands in the guide's code
    blocks, continued lines joined and the block's own shell variables
    (`NAME=value` above the command) put in, as the shell would."""
    out = {}
    blocks = re.findall(r"```[a-z]*\n(.*?)```", doc.get("guide") or "", re.S)
    for b, block in enumerate(blocks):
        values: dict[str, str] = {}
        for n, line in enumerate(re.sub(r"\\\n\s*", " ", block).splitlines()):
            line = line.strip()
            if m := ASSIGN.match(line):
                values[m.group(1)] = m.group(2).strip("'\"")
            elif line.startswith("vllm serve"):
                for name, value in values.items():
                    line = re.sub(rf"\$\{{?{name}\b\}}?", value, line)
                # ${NAME:-default}: the default, NAME being set nowhere here
                out[f"guide/{b}/{n}"] = re.sub(r"\$\{\w+:-([^}]*)\}", r"\1", line)
    return out


# A guide's variable no block sets (the guide says who does) for a flag
# doctor reads, and what doctor is given instead: nothing (vLLM's default).
# Other variables stand for flags doctor keeps as written (a node's address).
UNSET = {"MAX_MODEL_LEN": "Kimi-K2.5's benchmark script sets it (>= 9472, its guide says)"}


def unset(words: list[str]) -> list[str]:
    """The words without a flag whose value is a variable UNSET names."""
    out: list[str] = []
    for w in words:
        if "$" in w and re.sub(r"[^A-Z0-9_]", "", w) in UNSET:
            out.pop()  # its flag
            continue
        out.append(w)
    return out


def spec_of(words: list[str]) -> str | None:
    for i, w in enumerate(words):
        if w == "--speculative-config" and i + 1 < len(words):
            return words[i + 1]
        if w.startswith("--speculative-config="):
            return w.split("=", 1)[1]
    return None


def speculative_configs() -> list[tuple[str, str, Any]]:
    """(recipe, where, the config: a JSON text, or a preset's dict of keys)."""
    out = []
    for name, doc in recipes().items():
        for where, words in arg_lists(doc).items():
            if (spec := spec_of(words)) is not None:
                out.append((name, where, spec))
        for where, cmd in guide_commands(doc).items():
            if (spec := spec_of(shlex.split(cmd))) is not None:
                out.append((name, where, spec))
        for p, v in walk(doc):
            keys = v.get("--speculative-config") if isinstance(v, dict) else None
            if p and p[-1] == "json_args" and isinstance(keys, dict):
                out.append((name, "/".join(p), keys))
    return out


CONFIGS = speculative_configs()


def test_the_recipes_are_read():
    """The newest sdist has the recipes this file means, and their configs."""
    ids = {doc["model"]["model_id"] for doc in recipes().values()}
    assert set(KNOWN) <= ids
    assert len(CONFIGS) > 40
    assert {(r, w) for r, w, _ in CONFIGS} >= set(REFUSED)
    assert {(r, w) for r, w, _ in FLAG_SETS} >= set(WITH_EAGLE3)


@pytest.mark.parametrize("recipe,where,given", CONFIGS, ids=[f"{r}:{w}" for r, w, _ in CONFIGS])
def test_every_speculative_config_of_the_recipes_gets_a_verdict(recipe, where, given):
    """Each key and value as the newest release reads it: no recipe's config
    is refused but those REFUSED says, each with its reason."""
    r = PINS.rules.at(NEWEST)
    if isinstance(given, str):
        if "$" in given:  # a guide's shell variable stands for a value: its keys still count
            given = re.sub(r"\$\{?\w+\}?", "0", given)
        spec = json.loads(given)
    else:
        spec = given
    read = behaviour.speculative(spec, (), r)
    refused = list(read.refused)
    if said := behaviour.backend_refused(read.config.get("attention_backend"), r):
        refused.append(said)
    if (recipe, where) in REFUSED:
        phrase, _ = REFUSED[(recipe, where)]
        assert refused and phrase in refused[0], refused
    else:
        assert refused == [], refused
    assert read.ignored == ()


def flag_sets() -> list[tuple[str, str, str]]:
    """(recipe, where, the command) for each flag set of a known target's
    recipe: its base arguments and the set, and each guide command."""
    out = []
    for name, doc in recipes().items():
        model = doc["model"]["model_id"]
        if model not in KNOWN:
            continue
        base = list(doc["model"].get("base_args") or [])
        for where, words in arg_lists(doc).items():
            if where == "model/base_args":
                continue
            out.append((name, where, shlex.join(["vllm", "serve", model, *base, *words])))
        out.append((name, "model/base_args", shlex.join(["vllm", "serve", model, *base])))
        out += [(name, where, cmd) for where, cmd in guide_commands(doc).items()]
    return out


FLAG_SETS = flag_sets()


@pytest.mark.parametrize(
    "recipe,where,command", FLAG_SETS, ids=[f"{r}:{w}" for r, w, _ in FLAG_SETS]
)
def test_every_flag_set_of_a_known_target_gets_doctors_verdict(tmp_path, recipe, where, command):
    """doctor's verdict on the recipe's command, on the newest release as
    released: ok (warnings aside), its speculative config judged as the
    recipe gives it, or the family's published drafter where it gives none."""
    doc = recipes()[recipe]
    target, fmt = KNOWN[doc["model"]["model_id"]]
    words = unset(shlex.split(command))
    spec = spec_of(words)
    if spec is None:
        default = {"method": "eagle3", "model": DRAFTER, "num_speculative_tokens": 3}
        words += ["--speculative-config", json.dumps(default)]
        drafter = DRAFTER
    else:
        drafter = json.loads(spec)["model"]
        fmt = "eagle31_mla" if "eagle3.1" in drafter else fmt
    if "--trust-remote-code" not in words and target.startswith("kimi"):
        # a recipe's base arguments give it; a guide block that shows a
        # variant's flags only leaves it to them
        words.append("--trust-remote-code")
    r = published(
        tmp_path, shlex.join(words), NEWEST, fmt=fmt, target=target, drafter=drafter, ready=False
    )
    want = WITH_EAGLE3.get((recipe, where), set()) if spec is None else set()
    assert errors(r) == want, f"{recipe} {where}: {command}\n{r.to_text()}"
    assert find(r, "speculative_config").severity == "info"
