"""A stand-in vLLM OpenAI server for `vpatch doctor --server`: support/hub.py's
StandIn (an HTTP server on 127.0.0.1, an ephemeral port) answering the three
paths doctor reads as vLLM answers them (postflight/server.py's docstring cites
vLLM's source):

  GET /version     {"version": RELEASE}
  GET /v1/models   {"object": "list", "data": [a ModelCard]}
  GET /metrics     prometheus_client's text: `metrics/vllm-<release>.txt` (made
                   by prometheus_client from the release's own metric
                   definitions: metrics/make.py), or a page `render` writes

A test changes what it answers (`Vllm.version`, `.cards`, `.metrics`), or
hands a path to one of hub.py's hostile answers, or this module's
(`trickle`, `stream`, `redirect`, `status`), by its pattern (VERSION,
MODELS, METRICS) in `Vllm.hub.answer`.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterator, Mapping
from pathlib import Path

from packaging.version import Version
from vpatch.postflight.metrics import Counters

from support import hub as H

PAGES = Path(__file__).with_name("metrics")
# the releases whose page metrics/make.py wrote, oldest first
RELEASES = tuple(
    sorted((p.stem.removeprefix("vllm-") for p in PAGES.glob("vllm-*.txt")), key=Version)
)
NEWEST = RELEASES[-1]
MODEL = "tiny-deepseek-v3"  # the model name of those pages
# what those pages count (metrics/make.py's COUNTS: the tier's trained pair's
# totals; their split over the positions made up)
WORKING = Counters(501, 1503, 651, (301, 211, 139), 1160, 8, 0)
VERSION, MODELS, METRICS = r"^/version$", r"^/v1/models$", r"^/metrics$"
TEXT = "text/plain; version=1.0.0; charset=utf-8"  # prometheus_client 0.26's CONTENT_TYPE_LATEST


def page(release: str) -> bytes:
    return (PAGES / f"vllm-{release}.txt").read_bytes()


class Vllm:
    """A stand-in vLLM server: `with Vllm().running() as v:` serves at v.url."""

    def __init__(self, release: str = NEWEST, metrics: bytes | None = None) -> None:
        self.version = release
        self.cards = [card(MODEL)]
        self.metrics = (
            page(release if release in RELEASES else NEWEST) if metrics is None else metrics
        )
        self.hub = H.StandIn()
        self.hub.answer[VERSION] = lambda h, p: self._json(h, {"version": self.version})
        self.hub.answer[MODELS] = lambda h, p: self._json(h, {"object": "list", "data": self.cards})
        self.hub.answer[METRICS] = lambda h, p: h._send(200, self.metrics, {"Content-Type": TEXT})

    @staticmethod
    def _json(h: H._Handler, value: object) -> None:
        h._send(200, json.dumps(value).encode(), {"Content-Type": "application/json"})

    @property
    def url(self) -> str:
        return self.hub.url

    @property
    def asked(self) -> list[str]:
        return [p for _, p, _ in self.hub.log]

    @contextlib.contextmanager
    def running(self) -> Iterator[Vllm]:
        with self.hub.running():
            yield self


def card(model: str, root: str | None = None, max_model_len: int = 256) -> dict[str, object]:
    """A ModelCard as vLLM writes it (entrypoints/openai/engine/protocol.py)."""
    return {
        "id": model,
        "object": "model",
        "created": 1796398202,
        "owned_by": "vllm",
        "root": root or f"/models/{model}",
        "parent": None,
        "max_model_len": max_model_len,
        "permission": [],
    }


# -- a page of given counters, in prometheus_client's text format -----------------------

HELP = {
    "vllm:spec_decode_num_drafts": "Number of spec decoding drafts.",
    "vllm:spec_decode_num_draft_tokens": "Number of draft tokens.",
    "vllm:spec_decode_num_accepted_tokens": "Number of accepted tokens.",
    "vllm:spec_decode_num_accepted_tokens_per_pos": "Accepted tokens per draft position.",
    "vllm:num_requests_running": "Number of requests in model execution batches.",
    "vllm:generation_tokens": "Number of generation tokens processed.",
    "vllm:request_success": "Count of successfully processed requests.",
}
CREATED = 1796398202.4771824
REASONS = ("stop", "length", "abort", "error", "repetition")  # FINISH_REASON_STRINGS


def render(engines: Mapping[tuple[str, str], Counters], total: bool = True) -> bytes:
    """The samples of these counters as prometheus_client writes them
    (generate_latest: HELP and TYPE, NAME_total and NAME_created for a
    counter, labels sorted, floats as Go prints them), in vLLM's order;
    `total` false: NAME alone, as prometheus_client before 0.4 wrote a
    counter. request_success: a child per finished_reason, as vLLM makes
    them, the count under "length"."""
    out: list[str] = []

    def family(name: str, kind: str, samples: list[tuple[dict[str, str], float]]) -> None:
        shown = f"{name}_total" if kind == "counter" and total else name
        out.extend([f"# HELP {shown} {HELP[name]}", f"# TYPE {shown} {kind}"])
        out.extend(f"{shown}{{{_labels(lab)}}} {_go(v)}" for lab, v in samples)
        if kind == "counter" and total:
            created = f"{name}_created"
            out.extend([f"# HELP {created} {HELP[name]}", f"# TYPE {created} gauge"])
            out.extend(f"{created}{{{_labels(lab)}}} {_go(CREATED)}" for lab, _ in samples)

    def each(value: object) -> list[tuple[dict[str, str], float]]:
        return [
            ({"model_name": m, "engine": e}, getattr(c, str(value)))
            for (m, e), c in engines.items()
            if getattr(c, str(value)) is not None
        ]

    family("vllm:spec_decode_num_drafts", "counter", each("drafts"))
    family("vllm:spec_decode_num_draft_tokens", "counter", each("draft_tokens"))
    family("vllm:spec_decode_num_accepted_tokens", "counter", each("accepted"))
    family(
        "vllm:spec_decode_num_accepted_tokens_per_pos",
        "counter",
        [
            ({"model_name": m, "engine": e, "position": str(i)}, a)
            for (m, e), c in engines.items()
            for i, a in enumerate(c.per_position)
        ],
    )
    if any(c.running is not None for c in engines.values()):
        family("vllm:num_requests_running", "gauge", each("running"))
    if any(c.generated is not None for c in engines.values()):
        family("vllm:generation_tokens", "counter", each("generated"))
    if any(c.finished is not None for c in engines.values()):
        family(
            "vllm:request_success",
            "counter",
            [
                ({**lab, "finished_reason": r}, v if r == "length" else 0)
                for lab, v in each("finished")
                for r in REASONS
            ],
        )
    return ("\n".join(out) + "\n").encode()


def _labels(labels: dict[str, str]) -> str:
    def esc(v: str) -> str:
        return v.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")

    return ",".join(f'{k}="{esc(v)}"' for k, v in sorted(labels.items()))


def _go(d: float) -> str:
    """prometheus_client's floatToGoString (utils.py)."""
    s = repr(float(d))
    dot = s.find(".")
    if d > 0 and dot > 6:
        mantissa = f"{s[0]}.{s[1:dot]}{s[dot + 1 :]}".rstrip("0.")
        return f"{mantissa}e+0{dot - 1}"
    return s


def ours(text: bytes) -> list[str]:
    """The lines of a page that are of the families `render` writes."""
    names = tuple(HELP)
    return [
        ln
        for ln in text.decode().splitlines()
        if re.sub(r"^# (HELP|TYPE) ", "", ln).startswith(names)
    ]


# -- hostile answers (besides hub.py's never, drip, body, redirect_loop) ----------------


def _unsized(h: H._Handler) -> None:
    """A 200's head with no Content-Length: the body ends when the connection does."""
    h.send_response(200)
    h.send_header("Content-Type", TEXT)
    h.send_header("Connection", "close")
    h.end_headers()
    h.close_connection = True


def trickle(every: float = 0.2) -> H.Answer:
    """200, no length, a byte every `every` seconds until the server stops:
    each read answers in time, the whole never ends."""

    def answer(h: H._Handler, path: str) -> None:
        _unsized(h)
        while not h.stand_in.closing.wait(every):
            h.wfile.write(b"#")
            h.wfile.flush()

    return answer


def stream(size: int, piece: bytes = b"# " + b"x" * 1022 + b"\n") -> H.Answer:
    """200 and `size` bytes with no Content-Length (a page that does not say
    how long it is), written fast."""

    def answer(h: H._Handler, path: str) -> None:
        _unsized(h)
        left = size
        while left > 0:
            h.wfile.write(piece[:left])
            left -= len(piece)

    return answer


def redirect(to: str, code: int = 302) -> H.Answer:
    def answer(h: H._Handler, path: str) -> None:
        h._send(code, b"", {"Location": to})

    return answer


def status(code: int, body: bytes = b"", ctype: str = "text/html") -> H.Answer:
    def answer(h: H._Handler, path: str) -> None:
        h._send(code, body, {"Content-Type": ctype})

    return answer


def cut_short(data: bytes, missing: int = 2, ctype: str = TEXT) -> H.Answer:
    """Raw bytes on the socket: a 200 that declares Content-Length len(data)
    and sends all but its last `missing` bytes, then closes the connection
    (a server or proxy that died midway)."""

    def answer(h: H._Handler, path: str) -> None:
        head = f"HTTP/1.1 200 OK\r\nContent-Type: {ctype}\r\nContent-Length: {len(data)}\r\n\r\n"
        h.wfile.write(head.encode() + data[: len(data) - missing])
        h.wfile.flush()
        h.close_connection = True

    return answer


def chunks_cut(data: bytes, ctype: str = TEXT) -> H.Answer:
    """Raw bytes on the socket: a chunked 200 that sends `data` as one chunk
    and closes without the last, empty chunk that ends a chunked body."""

    def answer(h: H._Handler, path: str) -> None:
        head = f"HTTP/1.1 200 OK\r\nContent-Type: {ctype}\r\nTransfer-Encoding: chunked\r\n\r\n"
        h.wfile.write(head.encode() + b"%x\r\n" % len(data) + data + b"\r\n")
        h.wfile.flush()
        h.close_connection = True

    return answer
