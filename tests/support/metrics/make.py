"""Writes vllm-<release>.txt here: the /metrics page a vLLM release's
OpenAI server answers, made by prometheus_client itself (its text format,
`generate_latest`, as vLLM's /metrics route calls it), with the metrics
the release's PrometheusStatLogger registers, in its order, read from
the release's own source. Not run by the tests (it needs vLLM's source
and prometheus_client, neither a dependency): they read its output.

    python tests/support/metrics/make.py SDIST_TREE RELEASE

SDIST_TREE is the unpacked vllm-RELEASE sdist (`vpatch fetch RELEASE`
puts one in the cache). Read from it (v1/metrics/loggers.py): every
`self._counter_cls` / `_gauge_cls` / `_histogram_cls` call, its name,
documentation and labels (model_name, engine, and the extra label some
add); from v1/spec_decode/metrics.py the four spec-decode counters,
registered where PrometheusStatLogger builds SpecDecodingProm (before its
gauges); v1/engine/__init__.py's FINISH_REASON_STRINGS. Metrics a
release registers only under an option are there too (LoRA's are not). Every per-engine
child exists from the start, as vLLM creates them. The counts are the
tier's trained pair's (docs/measurements.md, `make bench-spec`: 651 of 1503
draft tokens accepted in 501 drafts, mean acceptance length 2.30) for 8
requests, one engine, k = 3; their split over the three positions
(PER_POSITION) is made up (the tier has not measured it), one that sums to
651 and never rises: the page a working pair gives. Histograms get
prometheus_client's default buckets (doctor reads none of them)."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import prometheus_client as pc

MODEL = "tiny-deepseek-v3"
ENGINE = "0"
K = 3
REQUESTS = 8
COUNTS = {  # the tier's trained pair (docs/measurements.md)
    "vllm:spec_decode_num_drafts": 501,
    "vllm:spec_decode_num_draft_tokens": 1503,
    "vllm:spec_decode_num_accepted_tokens": 651,
    # each request's first token from prefill, then 1 + accepted tokens a draft
    "vllm:generation_tokens": REQUESTS + 501 + 651,
    "vllm:prompt_tokens": REQUESTS * 8,
}
PER_POSITION = (301, 211, 139)  # made up: sums to 651, never rises
EXTRA = {  # the values of an extra label, as the release writes them
    "sleep_state": ("awake", "weights_offloaded", "discard_all"),
    "source": ("local_compute", "local_cache_hit", "external_kv_transfer"),
    "reason": ("capacity", "deferred"),
    "stage": ("waiting", "fetching"),
}


def main(tree: Path, release: str, out: Path) -> None:
    loggers = (tree / "vllm/v1/metrics/loggers.py").read_text()
    spec = (tree / "vllm/v1/spec_decode/metrics.py").read_text()
    engine = (tree / "vllm/v1/engine/__init__.py").read_text()
    reasons = ast.literal_eval(re.search(r"FINISH_REASON_STRINGS = (\(.*?\))", engine).group(1))
    docs = dict(re.findall(r'"(vllm:spec_decode_num_\w+)",\s*(?:documentation=)?"([^"]+)"', spec))

    registry = pc.CollectorRegistry()
    # vLLM serves the default registry: the process and Python collectors come first
    pc.ProcessCollector(registry=registry)
    pc.PlatformCollector(registry=registry)
    pc.GCCollector(registry=registry)
    for name in ("drafts", "draft_tokens", "accepted_tokens"):
        metric = f"vllm:spec_decode_num_{name}"
        c = pc.Counter(metric, docs[metric], ["model_name", "engine"], registry=registry)
        c.labels(MODEL, ENGINE).inc(COUNTS[metric])
    metric = "vllm:spec_decode_num_accepted_tokens_per_pos"
    c = pc.Counter(metric, docs[metric], ["model_name", "engine", "position"], registry=registry)
    for pos, n in enumerate(PER_POSITION):
        c.labels(MODEL, ENGINE, str(pos)).inc(n)
    assert len(PER_POSITION) == K
    for kind, kw in _calls(loggers):
        name, doc = kw["name"].value, kw["documentation"].value
        labels = kw["labelnames"]
        if isinstance(labels, ast.List):  # its own list, no engine: not per engine
            if not all(isinstance(e, ast.Constant) for e in labels.elts):
                continue  # LoRA's, registered only with --enable-lora
            names = [e.value for e in labels.elts]
        else:  # labelnames [+ ["extra"]]
            extra = [e.value for e in labels.right.elts] if isinstance(labels, ast.BinOp) else []
            names = ["model_name", "engine", *extra]
        cls = {"counter": pc.Counter, "gauge": pc.Gauge, "histogram": pc.Histogram}[kind]
        mode = {"multiprocess_mode": "mostrecent"} if kind == "gauge" else {}
        m = cls(name, doc, names, registry=registry, **mode)
        values = {"model_name": [MODEL], "engine": [ENGINE], "finished_reason": list(reasons)}
        children = [[]]
        for n in names:
            children = [c + [v] for c in children for v in values.get(n, EXTRA.get(n, ("x",)))]
        for labels_ in children:
            child = m.labels(*labels_)
            if kind == "counter" and name in COUNTS:
                child.inc(COUNTS[name])
            if name == "vllm:request_success" and labels_[-1] == "length":
                child.inc(REQUESTS)
    out.write_bytes(pc.generate_latest(registry))
    print(f"{out}: {len(out.read_bytes())} bytes")


def _calls(source: str) -> list[tuple[str, dict[str, ast.expr]]]:
    """Each `self._counter_cls(...)` / `_gauge_cls` / `_histogram_cls` call
    with a literal name, in the source's order: its kind and keywords."""
    out = []
    for node in ast.walk(ast.parse(source)):
        f = getattr(node, "func", None)
        kind = getattr(f, "attr", "").removeprefix("_").removesuffix("_cls")
        if kind in ("counter", "gauge", "histogram"):
            kw = {k.arg: k.value for k in node.keywords}
            if isinstance(kw.get("name"), ast.Constant):
                out.append((node.lineno, kind, kw))
    return [(kind, kw) for _, kind, kw in sorted(out, key=lambda t: t[0])]


if __name__ == "__main__":
    tree, release = Path(sys.argv[1]), sys.argv[2]
    main(tree, release, Path(__file__).with_name(f"vllm-{release}.txt"))
