"""postflight/metrics.py: vLLM's /metrics page read into typed counters. The
pages are those prometheus_client writes for the vLLM releases of
tests/support/metrics (made from each release's metric definitions:
tests/support/metrics/make.py), and pages of given counters in
its format (support.vllm_server.render, held to those)."""

from __future__ import annotations

import pytest
from support import vllm_server as V
from vpatch.errors import ConfigError
from vpatch.postflight import metrics
from vpatch.postflight.metrics import Counters
from vpatch.postflight.server import Reading

WHERE = "http://h:1/metrics"
TWO = {
    ("a", "0"): Counters(10, 30, 12, (7, 4, 1), 50, 2, 1),
    ("a", "1"): Counters(20, 60, 30, (15, 10, 5), 80, 3, 0),
    ("b", "0"): Counters(5, 25, 5, (3, 1, 1, 0, 0), None, None, None),
}


@pytest.mark.parametrize("release", V.RELEASES)
def test_a_release_page_reads_as_its_counters(release):
    """vLLM's own page: the spec-decode family, generation tokens, finished
    requests (every finished_reason), running requests; `_created` samples,
    HELP/TYPE lines, histograms and the process collector's lines skipped."""
    assert metrics.parse(V.page(release), WHERE, release) == {(V.MODEL, "0"): V.WORKING}


def test_the_stand_in_writes_what_prometheus_client_writes():
    """render() is held to prometheus_client's own output: the same lines
    as the newest release's page for the same counters (its `_created` times
    aside)."""
    mine = V.ours(V.render({(V.MODEL, "0"): V.WORKING}))
    real = V.ours(V.page(V.NEWEST))
    assert len(mine) == len(real) > 20
    for a, b in zip(mine, real, strict=True):
        assert a == b or (a.split()[0] == b.split()[0] and "_created" in a)


def test_engines_and_models():
    got = metrics.parse(V.render(TWO), WHERE)
    assert got == TWO
    r = Reading("u", V.NEWEST, (), got)
    assert r.models() == {
        "a": Counters(30, 90, 42, (22, 14, 6), 130, 5, 1),
        "b": TWO[("b", "0")],
    }
    assert (r.engine_count("a"), r.engine_count("b")) == (2, 1)


def test_counters_without_total_as_old_prometheus_client_wrote_them():
    page = V.render(TWO, total=False)
    assert b"_total" not in page and b"_created" not in page
    assert metrics.parse(page, WHERE) == TWO


def test_label_values_are_unescaped():
    name = 'a "quoted"\\path\nname'
    page = V.render({(name, "0"): V.WORKING})
    assert b'model_name="a \\"quoted\\"\\\\path\\nname"' in page
    assert metrics.parse(page, WHERE) == {(name, "0"): V.WORKING}


def sample(line: str) -> bytes:
    """A page of the working pair whose drafts line is `line` instead."""
    good = V.render({(V.MODEL, "0"): V.WORKING}).decode()
    drafts = next(ln for ln in good.splitlines() if ln.startswith("vllm:spec_decode_num_drafts_"))
    return good.replace(drafts + "\n", line + "\n").encode()


LABELS = '{engine="0",model_name="tiny-deepseek-v3"}'


@pytest.mark.parametrize(
    ("line", "said"),
    [
        (f"vllm:spec_decode_num_drafts_total{LABELS} x", "the value 'x' is no number"),
        (f"vllm:spec_decode_num_drafts_total{LABELS} 1_000", "the value '1_000' is no number"),
        (f"vllm:spec_decode_num_drafts_total{LABELS} NaN", "the value 'NaN' is no number"),
        (f"vllm:spec_decode_num_drafts_total{LABELS} +Inf", "the value '+Inf' is no number"),
        (f"vllm:spec_decode_num_drafts_total{LABELS} -1.0", "the value -1.0 is no count"),
        (f"vllm:spec_decode_num_drafts_total{LABELS} 1.5", "the value 1.5 is no count"),
        (f"vllm:spec_decode_num_drafts_total{LABELS} 1e300", "the value 1e300 is no count"),
        (f"vllm:spec_decode_num_drafts_total{LABELS}", "no value"),
        (f"vllm:spec_decode_num_drafts_total{LABELS} 1 2 3", "no value"),
        (f"vllm:spec_decode_num_drafts_total{LABELS}1.0", "no value"),
        ('vllm:spec_decode_num_drafts_total{engine="0"} 1.0', "no model_name and engine labels"),
        ("vllm:spec_decode_num_drafts_total 1.0", "no model_name and engine labels"),
        ('vllm:spec_decode_num_drafts_total{engine="0",model_name="t} 1.0', "does not end"),
        ('vllm:spec_decode_num_drafts_total{engine="0",model_name="\\t"} 1.0', "a bad escape"),
        ('vllm:spec_decode_num_drafts_total{engine=0,model_name="t"} 1.0', "do not parse"),
        ('vllm:spec_decode_num_drafts_total{engine="0" model_name="t"} 1.0', "do not parse"),
        ('vllm:spec_decode_num_drafts_total{engine="0",engine="1"} 1.0', "the label engine twice"),
        ("vllm:spec_decode_num_drafts_total{" + "x" * 70000 + "} 1", "a line of 70037 characters"),
    ],
)
def test_a_malformed_sample_is_one_line_exit_2(line, said):
    with pytest.raises(ConfigError) as e:
        metrics.parse(sample(line), WHERE)
    message = str(e.value)
    assert message.startswith(f"{WHERE}: ") and said in message, message
    assert message.endswith(": a malformed page") and "\n" not in message
    assert len(message) < 400


def test_a_malformed_page():
    good = V.render({(V.MODEL, "0"): V.WORKING})
    with pytest.raises(ConfigError, match="the same series twice"):
        metrics.parse(good + good, WHERE)
    with pytest.raises(ConfigError, match="the same series twice"):
        metrics.parse(good + V.render({(V.MODEL, "0"): V.WORKING}, total=False), WHERE)
    with pytest.raises(ConfigError, match=r"not UTF-8 text \(byte 3\): a malformed page"):
        metrics.parse(b"vll\xff", WHERE)
    pos = b'position="1"'
    for bad, said in [(b'position="x"', "no whole number"), (b'position="7"', r"\[0, 2, 7\]")]:
        with pytest.raises(ConfigError, match=said):
            metrics.parse(good.replace(pos, bad), WHERE)
    no_pos = good.replace(b',position="1"', b"")
    with pytest.raises(ConfigError, match="no position label in"):
        metrics.parse(no_pos, WHERE)
    lines = good.decode().splitlines()
    without = "\n".join(ln for ln in lines if "num_draft_tokens" not in ln).encode()
    with pytest.raises(ConfigError, match="has no vllm:spec_decode_num_draft_tokens: a malformed"):
        metrics.parse(without, WHERE)


def test_a_page_that_is_not_vllms_or_has_no_spec_decode():
    with pytest.raises(ConfigError, match="no vllm: metric on the page: not a vLLM server's"):
        metrics.parse(b"# HELP up\nup 1\n<html>", WHERE)
    page = V.page(V.NEWEST).decode()
    plain = "\n".join(ln for ln in page.splitlines() if "spec_decode" not in ln).encode()
    with pytest.raises(ConfigError) as e:
        metrics.parse(plain, WHERE, V.NEWEST)
    assert str(e.value) == (
        f"{WHERE}: vLLM {V.NEWEST} serves without speculative decoding: no vllm:spec_decode_* "
        "counters (vLLM registers them only when started with --speculative-config)"
    )


def test_counters_since_a_read():
    now, before = TWO[("a", "1")], TWO[("a", "0")]
    assert now.since(before) == Counters(10, 30, 18, (8, 6, 4), 30, 1, 0)  # running: now
    assert before.since(now) is None  # went back: the server restarted
    assert Counters(1, 1, 1, (1,)).since(Counters(0, 0, 0, (0, 0))) is None  # k changed: restarted
    assert now + Counters() == now
