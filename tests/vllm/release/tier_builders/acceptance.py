"""What served speculative decoding must accept, predicted by the float64
reference drafter (eagle3_reference.py) from the plain engine's greedy tokens
and the target's aux states hooked in that engine (plain_generate.py); and
the stated test that sampled outputs come from the target's distribution.

Greedy, a request of prompt P and plain tokens G (past max_tokens: the last
verify step checks drafts beyond the output) runs as vLLM's scheduler runs it
(v1/core/sched/scheduler.py): the prefill emits G[0]; then each step the
drafter proposes k drafts from the context P + G[:n] (n tokens emitted), the
target verifies them, the longest prefix equal to G[n:] is accepted and one
more token emitted (the bonus token when all k are), until n reaches
max_tokens. vLLM's spec-decode metrics count, per step, k draft tokens and
the accepted ones, by position (``num_accepted_tokens_per_pos``), before the
output is cut at max_tokens.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch


@dataclass
class Steps:
    """One request's predicted steps: each step's context length (tokens
    emitted), drafts and accepted count."""

    emitted: list[int] = field(default_factory=list)
    drafts: list[list[int]] = field(default_factory=list)
    accepted: list[int] = field(default_factory=list)


def predict(ref, prompt: list[int], tokens: list[int], aux: torch.Tensor, k: int, max_tokens: int):
    """The steps of one request (``aux``: the aux states at every position of
    prompt + tokens, [T, n * hidden])."""
    seq = [*prompt, *tokens]
    out = Steps()
    n = 1
    while n < max_tokens:
        t = len(prompt) + n  # the context: seq[:t]; its last token not yet a target input
        if t + k > len(seq):
            raise ValueError(f"{len(tokens)} plain tokens: too few to verify a step at {n}")
        drafts = ref.drafts(aux[: t - 1], seq[1:t], k)
        a = 0
        while a < k and drafts[a] == seq[t + a]:
            a += 1
        out.emitted.append(n)
        out.drafts.append(drafts)
        out.accepted.append(a)
        n += a + 1
    return out


def predict_all(ref, run: dict, k: int, max_tokens: int) -> list[Steps]:
    """The steps of every request of a plain engine's ``run``
    (plain_generate.py's output: prompts, greedy tokens and aux states)."""
    return [
        predict(ref, p, t, aux, k, max_tokens)
        for p, t, aux in zip(run["prompt_token_ids"], run["tokens"], run["states"], strict=True)
    ]


# vLLM's counter of accepted tokens by draft position: a vector, which
# helpers.spec_counters names PER_POS[i]
PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos"


def counters(steps: list[Steps], k: int) -> dict[str, float]:
    """vLLM's spec-decode counters (helpers.spec_counters' names) of these
    requests' steps."""
    per_pos = [sum(a > i for s in steps for a in s.accepted) for i in range(k)]
    drafts = sum(len(s.accepted) for s in steps)
    return {
        "vllm:spec_decode_num_drafts": float(drafts),
        "vllm:spec_decode_num_draft_tokens": float(k * drafts),
        "vllm:spec_decode_num_accepted_tokens": float(sum(per_pos)),
        **{f"{PER_POS}[{i}]": float(v) for i, v in enumerate(per_pos)},
    }


# ------------------------------------------------------------------ sampled

# The false-alarm rate of the whole family of tests below (Bonferroni: each
# test at ALPHA / their number), for two engines that sample the same
# distribution, and the least expected count of a category (rarer tokens
# are pooled into one).
ALPHA = 0.001
POOL_BELOW = 10


def chi2_homogeneity(a: list[int], b: list[int]) -> tuple[float, int, float]:
    """Pearson's chi-squared test that two samples of categories come from
    one distribution (a 2 x c contingency table: the counts of each category
    in ``a`` and in ``b``, categories seen fewer than POOL_BELOW times in all
    pooled into one). (statistic, degrees of freedom, p-value)."""
    cats = sorted(set(a) | set(b))
    both = {c: a.count(c) + b.count(c) for c in cats}
    big = [c for c in cats if both[c] >= POOL_BELOW]
    rows = []
    for sample in (a, b):
        row = [sample.count(c) for c in big]
        row.append(len(sample) - sum(row))
        rows.append(row)
    cols = [j for j in range(len(rows[0])) if rows[0][j] + rows[1][j] > 0]
    table = [[r[j] for j in cols] for r in rows]
    total = sum(map(sum, table))
    stat = 0.0
    for r in table:
        for j, observed in enumerate(r):
            expected = sum(r) * (table[0][j] + table[1][j]) / total
            stat += (observed - expected) ** 2 / expected
    df = len(cols) - 1
    if df < 1:
        return 0.0, 0, 1.0
    # the chi-squared survival function: the regularized upper incomplete gamma
    f64 = torch.float64
    p = float(
        torch.special.gammaincc(
            torch.tensor(df / 2.0, dtype=f64), torch.tensor(stat / 2.0, dtype=f64)
        )
    )
    return stat, df, p


def same_distribution(
    spec: list[list[int]], plain: list[list[int]], nxt: list[int]
) -> list[tuple[str, float, int, float]]:
    """The family of tests: for each generated position, the token's
    distribution; and over all positions but the first, how often a token is
    the target's greedy one after the token before (``nxt``: the accepting
    target's next word; accepting a draft too often or too rarely moves this
    first). Each as (what, statistic, df, p)."""
    out = []
    for j in range(len(plain[0])):
        stat, df, p = chi2_homogeneity([s[j] for s in spec], [s[j] for s in plain])
        out.append((f"token {j}", stat, df, p))

    def chained(samples: list[list[int]]) -> list[int]:
        return [int(s[j] == nxt[s[j - 1]]) for s in samples for j in range(1, len(s))]

    stat, df, p = chi2_homogeneity(chained(spec), chained(plain))
    out.append(("greedy continuations", stat, df, p))
    return out


def level(tests: int) -> float:
    """Each test's level, so that the family's false-alarm rate is ALPHA."""
    return ALPHA / tests
