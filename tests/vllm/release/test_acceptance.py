"""acceptance.py, on data whose answer is known: the scheduler's steps the
greedy prediction walks, the counters it gives, and the chi-squared test's
p-values and false-alarm rate (the served tests trust all three)."""

from __future__ import annotations

import random

import torch
from tier_builders import acceptance


class _Drafter:
    """A reference stand-in whose drafts are a given function of the context."""

    def __init__(self, fn):
        self.fn = fn
        self.asked: list[int] = []

    def drafts(self, aux, next_ids, k):
        # aux holds every position fed to the target before the last token
        assert aux.shape[0] == len(next_ids)
        self.asked.append(len(next_ids) + 1)
        return self.fn([0, *next_ids], k)


def test_each_step_accepts_the_longest_agreeing_prefix_then_one_more():
    tokens = list(range(100, 140))
    prompt = [1, 2, 3]
    seq = prompt + tokens

    # right twice then wrong, at every step: 2 accepted, 3 tokens a step
    def fn(context, k):
        n = len(context)
        return [seq[n], seq[n + 1], -1][:k]

    ref = _Drafter(fn)
    aux = torch.zeros(len(seq), 4)
    steps = acceptance.predict(ref, prompt, tokens, aux, 3, 12)
    assert steps.accepted == [2, 2, 2, 2]
    assert steps.emitted == [1, 4, 7, 10]  # the prefill emits the first token
    assert ref.asked == [len(prompt) + n for n in steps.emitted]
    counters = acceptance.counters([steps, steps], 3)
    assert counters["vllm:spec_decode_num_drafts"] == 8
    assert counters["vllm:spec_decode_num_draft_tokens"] == 24
    assert counters["vllm:spec_decode_num_accepted_tokens"] == 16
    per_pos = [counters[f"vllm:spec_decode_num_accepted_tokens_per_pos[{i}]"] for i in range(3)]
    assert per_pos == [8, 8, 0]


def test_a_whole_acceptance_takes_the_bonus_token_and_the_last_step_checks_past_the_end():
    tokens = list(range(100, 140))
    prompt = [7]
    seq = prompt + tokens
    ref = _Drafter(lambda context, k: seq[len(context) : len(context) + k])
    steps = acceptance.predict(ref, prompt, tokens, torch.zeros(len(seq), 2), 3, 10)
    # 3 accepted + the bonus: 4 tokens a step, from 1 to 5 to 9, then past 10
    assert steps.emitted == [1, 5, 9] and steps.accepted == [3, 3, 3]


def test_too_few_plain_tokens_to_verify_is_an_error():
    ref = _Drafter(lambda context, k: [0] * k)
    try:
        acceptance.predict(ref, [1], [5, 6, 7], torch.zeros(4, 2), 3, 3)
    except ValueError as e:
        assert "too few" in str(e)
    else:
        raise AssertionError("no error")


def test_the_chi_squared_p_value_is_the_textbook_one():
    # 2 x 2: [[30, 10], [20, 20]]: chi2 = 5.333 (no continuity correction),
    # df 1, p = 0.0209
    a = [0] * 30 + [1] * 10
    b = [0] * 20 + [1] * 20
    stat, df, p = acceptance.chi2_homogeneity(a, b)
    assert abs(stat - 16 / 3) < 1e-9 and df == 1
    assert abs(p - 0.020921335337794) < 1e-9
    # the same sample twice: no evidence at all
    assert acceptance.chi2_homogeneity(a, a)[2] == 1.0


def test_rare_categories_are_pooled():
    a = [0] * 50 + list(range(10, 20))
    b = [0] * 50 + list(range(20, 30))
    stat, df, p = acceptance.chi2_homogeneity(a, b)
    assert df == 1 and p == 1.0  # {0} and "the rest": the same counts


def test_the_family_keeps_its_false_alarm_rate():
    """Samples of one distribution, 400 times: the family of tests the
    served test runs rejects at about ALPHA (0.001), never far above."""
    rng = random.Random(0)
    words = list(range(4, 40))
    nxt = {w: words[(i + 1) % len(words)] for i, w in enumerate(words)}
    weights = [2.0 ** -(i % 7) for i in range(len(words))]

    def sample():
        out = [rng.choices(words, weights)[0]]
        for _ in range(3):
            out.append(nxt[out[-1]] if rng.random() < 0.5 else rng.choices(words, weights)[0])
        return out

    alarms = 0
    for _ in range(400):
        tests = acceptance.same_distribution(
            [sample() for _ in range(120)], [sample() for _ in range(120)], nxt
        )
        alarms += any(p < acceptance.level(len(tests)) for *_, p in tests)
    assert alarms <= 3, alarms  # expected 0.4 at ALPHA; 3 or more has chance 0.008


def test_the_family_sees_a_sampler_that_follows_the_drafter():
    rng = random.Random(1)
    words = list(range(4, 40))
    nxt = {w: words[(i + 1) % len(words)] for i, w in enumerate(words)}

    def sample(follow):
        out = [rng.choice(words)]
        for _ in range(3):
            chained = rng.random() < (0.9 if follow else 0.5)
            out.append(nxt[out[-1]] if chained else rng.choice(words))
        return out

    tests = acceptance.same_distribution(
        [sample(True) for _ in range(120)], [sample(False) for _ in range(120)], nxt
    )
    assert any(p < acceptance.level(len(tests)) for *_, p in tests), tests
