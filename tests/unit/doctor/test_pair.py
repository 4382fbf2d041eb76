"""The pair's derived facts, through real-shaped configs: which ids vLLM
feeds and from where, which states it keeps, drops or refuses, and how many
states the drafter's fc is built for."""

from __future__ import annotations

import pytest
from support import pairs as F
from support.releases import edge, last_where, newest, newest_patched, v2_by_default
from vpatch import lock
from vpatch.doctor import behaviour, configs, weights
from vpatch.doctor.environment import Readiness, VllmEnv
from vpatch.doctor.pair import Pair, show_ids
from vpatch.doctor.serve import from_options

IDS_KEY = "eagle_aux_hidden_state_layer_ids"
NESTED = edge(lambda r: r.v1_reads_nested_ids)  # the V1 runner reads eagle_config's ids
FC = edge(lambda r: r.fc_width == "config")  # fc sized by num_aux_hidden_states


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
    p = pair(tmp_path, newest(), config={IDS_KEY: None})
    ids, source = p.ids()
    assert ids == list(behaviour.default_ids(p.n)) and "default" in source


@pytest.mark.parametrize(
    "version,runner_env,source",
    [
        (NESTED[0], {}, "the target's default"),  # the V1 runner reads no eagle_config yet
        (NESTED[1], {}, "eagle_config." + IDS_KEY),  # ... and from here does
        (last_where(v2_by_default), {}, "the target's default"),  # the V2 runner does not
    ],
)
def test_nested_ids_by_release_and_runner(tmp_path, version, runner_env, source):
    p = pair(tmp_path, version, config={IDS_KEY: None, "eagle_config": {IDS_KEY: [2, 30, 58]}})
    p.environ.update(runner_env)
    assert p.ids()[1].startswith(source)


@pytest.mark.parametrize(
    "version,kept,dropped,refused",
    [
        (newest_patched(), [0, 2], [], [99]),  # the series refuses out-of-range ids at load
        (newest(), [0, 2], [99], []),  # upstream drops them
    ],
)
def test_states_kept_dropped_refused(tmp_path, version, kept, dropped, refused):
    p = pair(tmp_path, version, config={IDS_KEY: [2, 0, 99]})
    assert p.states() == (kept, dropped, refused)


@pytest.mark.parametrize(
    "version,config,width",
    [
        (FC[0], {"num_aux_hidden_states": 4}, 3),  # fc built for 3 states
        (FC[1], {"num_aux_hidden_states": 4}, 4),  # ... for as many as the config says
        (FC[1], {"eagle_config": {IDS_KEY: [1, 2, 3, 4]}}, 4),
        (FC[1], {}, 3),
    ],
)
def test_fc_states(tmp_path, version, config, width):
    assert pair(tmp_path, version, config=config).fc_states()[0] == width
