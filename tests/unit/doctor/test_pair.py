"""The pair's derived facts, through real-shaped configs: which ids vLLM
feeds and from where, which states it keeps, drops or refuses, and how many
states the drafter's fc is built for."""

from __future__ import annotations

import pytest
from support import pairs as F
from vpatch import lock
from vpatch.doctor import behaviour, configs, weights
from vpatch.doctor.environment import Readiness, VllmEnv
from vpatch.doctor.pair import Pair, show_ids
from vpatch.doctor.serve import from_options

IDS_KEY = "eagle_aux_hidden_state_layer_ids"


def pair(tmp_path, version: str, **kw) -> Pair:
    t, d = F.pair(tmp_path, **kw)
    target, drafter = configs.read_target(t), configs.read_drafter(d)
    pins = lock.load()
    rules = pins.rules.at(version)
    eff = behaviour.effective(drafter.raw, drafter.format, rules)
    env = VllmEnv("python3", "vllm", version, "/x")
    serve = from_options(str(t), str(d), 8, remote=True)
    return Pair(target, drafter, eff, weights.read(d), rules, env, Readiness(True), serve, {}, pins)


def test_show_ids():
    assert show_ids([2, 30, 58]) == "[2, 30, 58]"


def test_default_ids_when_the_drafter_names_none(tmp_path):
    p = pair(tmp_path, "0.32.0", config={IDS_KEY: None})
    ids, source = p.ids()
    assert ids == list(behaviour.default_ids(p.n)) and "default" in source


@pytest.mark.parametrize(
    "version,runner_env,source",
    [
        ("0.21.0", {}, "the target's default"),  # 0.15-0.21 never read eagle_config
        ("0.22.0", {}, "eagle_config." + IDS_KEY),  # the V1 runner does from 0.22
        ("0.32.0", {}, "the target's default"),  # the V2 runner (the default) does not
    ],
)
def test_nested_ids_by_release_and_runner(tmp_path, version, runner_env, source):
    p = pair(tmp_path, version, config={IDS_KEY: None, "eagle_config": {IDS_KEY: [2, 30, 58]}})
    p.environ.update(runner_env)
    assert p.ids()[1].startswith(source)


@pytest.mark.parametrize(
    "version,kept,dropped,refused",
    [
        ("0.17.1", [0, 2], [], [99]),  # the series refuses out-of-range ids at load
        ("0.24.0", [0, 2], [99], []),  # upstream drops them
    ],
)
def test_states_kept_dropped_refused(tmp_path, version, kept, dropped, refused):
    p = pair(tmp_path, version, config={IDS_KEY: [2, 0, 99]})
    assert p.states() == (kept, dropped, refused)


@pytest.mark.parametrize(
    "version,config,width",
    [
        ("0.17.1", {"num_aux_hidden_states": 4}, 3),  # 0.15-0.21 build fc for 3 states
        ("0.22.0", {"num_aux_hidden_states": 4}, 4),
        ("0.22.0", {"eagle_config": {IDS_KEY: [1, 2, 3, 4]}}, 4),
        ("0.22.0", {}, 3),
    ],
)
def test_fc_states(tmp_path, version, config, width):
    assert pair(tmp_path, version, config=config).fc_states()[0] == width
