"""vLLM's /metrics page (Prometheus text, as prometheus_client writes it)
read into typed counters per model name and engine, for `vpatch doctor
--server` (server.py reads the page; judge.py judges the counts).

What the page holds, read from vLLM's source (0.17.1, 0.26.0, 0.34.0 alike;
names and labels unchanged between them): v1/spec_decode/metrics.py
`SpecDecodingProm` registers, only when the server was started with a
speculative config, the counters `vllm:spec_decode_num_drafts`,
`_num_draft_tokens`, `_num_accepted_tokens` (labels model_name, engine) and
`_num_accepted_tokens_per_pos` (and position, "0" to "k-1");
v1/metrics/loggers.py registers `vllm:generation_tokens`,
`vllm:request_success` (and finished_reason) and the gauge
`vllm:num_requests_running`. A counter's samples are NAME_total, with
NAME_created beside (ignored); prometheus_client before 0.4 wrote NAME
alone: both are read. Everything else on the page is skipped."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, fields, replace
from typing import Any

from .. import settings
from ..errors import ConfigError

LINE = 1 << 16  # the longest sample line of a counter read (a model name is a path at most)
POSITIONS = 1024  # draft positions at most (num_speculative_tokens: a few in practice)
# metric -> the Counters field it adds to; counters are read as NAME_total or NAME
COUNTERS = {
    "vllm:spec_decode_num_drafts": "drafts",
    "vllm:spec_decode_num_draft_tokens": "draft_tokens",
    "vllm:spec_decode_num_accepted_tokens": "accepted",
    "vllm:spec_decode_num_accepted_tokens_per_pos": "per_position",
    "vllm:generation_tokens": "generated",
    "vllm:request_success": "finished",
}
GAUGES = {"vllm:num_requests_running": "running"}
_NAMES = {**{f"{n}_total": f for n, f in COUNTERS.items()}, **COUNTERS, **GAUGES}
_METRIC = {f: n for n, f in COUNTERS.items()}  # a Counters field -> its metric
_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
_LABEL = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_ESCAPES = {"\\": "\\", '"': '"', "n": "\n"}


@dataclass(frozen=True)
class Counters:
    """The counters of one engine (or their sum over a model's engines).
    per_position[i]: drafts whose first i + 1 tokens were accepted."""

    drafts: int = 0
    draft_tokens: int = 0
    accepted: int = 0
    per_position: tuple[int, ...] = ()
    generated: int | None = None  # vllm:generation_tokens (None: not on the page)
    finished: int | None = None  # vllm:request_success, every finished_reason
    running: int | None = None  # vllm:num_requests_running: a gauge, now

    def __add__(self, other: Counters) -> Counters:
        k = max(len(self.per_position), len(other.per_position))
        pos = tuple(_at(self.per_position, i) + _at(other.per_position, i) for i in range(k))
        return Counters(
            self.drafts + other.drafts,
            self.draft_tokens + other.draft_tokens,
            self.accepted + other.accepted,
            pos,
            *(
                _plus(getattr(self, f), getattr(other, f))
                for f in ("generated", "finished", "running")
            ),
        )

    def since(self, before: Counters) -> Counters | None:
        """What was counted after `before` (running: now, as at this read);
        None when a count went back or the draft positions changed (the
        server restarted between)."""
        if len(self.per_position) != len(before.per_position):
            return None
        pairs = [
            (getattr(self, f.name), getattr(before, f.name))
            for f in fields(self)
            if f.name not in ("per_position", "running")
        ]
        pairs += [
            (_at(self.per_position, i), _at(before.per_position, i))
            for i in range(max(len(self.per_position), len(before.per_position)))
        ]
        if any(a is not None and b is not None and a < b for a, b in pairs):
            return None
        k = len(self.per_position)
        return replace(
            self,
            drafts=self.drafts - before.drafts,
            draft_tokens=self.draft_tokens - before.draft_tokens,
            accepted=self.accepted - before.accepted,
            per_position=tuple(
                self.per_position[i] - _at(before.per_position, i) for i in range(k)
            ),
            generated=_minus(self.generated, before.generated),
            finished=_minus(self.finished, before.finished),
        )


def _at(xs: tuple[int, ...], i: int) -> int:
    return xs[i] if i < len(xs) else 0


def _plus(a: int | None, b: int | None) -> int | None:
    return None if a is None and b is None else (a or 0) + (b or 0)


def _minus(a: int | None, b: int | None) -> int | None:
    return None if a is None or b is None else a - b


def parse(page: bytes, where: str, version: str = "") -> dict[tuple[str, str], Counters]:
    """Prometheus text (`where`: its URL, for errors) -> (model_name, engine)
    -> its counters. Only the samples of COUNTERS and GAUGES are read (the
    rest is skipped, `# ` lines too); each must be a whole number at least 0,
    once per label set, a counter of the spec-decode family with
    model_name and engine, per position "0" to "k-1". A page with no
    `vllm:` sample is not vLLM's; one with none of the spec-decode family
    is a server without speculative decoding: both ConfigError."""
    try:
        text = page.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ConfigError(f"{where}: not UTF-8 text (byte {e.start}): a malformed page") from None
    seen: set[tuple[str, tuple[tuple[str, str], ...]]] = set()
    values: dict[tuple[str, str], dict[str, Any]] = {}
    any_vllm = False
    for line in text.splitlines():
        if not line.startswith("vllm:"):
            continue
        any_vllm = True
        name = line.split("{", 1)[0].split(None, 1)[0]
        what = _NAMES.get(name)
        if what is None:
            continue
        if len(line) > LINE:
            raise _malformed(where, line, f"a line of {len(line)} characters")
        labels, value = _sample(line, name, where)
        series = (name.removesuffix("_total"), tuple(sorted(labels.items())))
        if series in seen:
            raise _malformed(where, line, "the same series twice")
        seen.add(series)
        model, engine = labels.get("model_name"), labels.get("engine")
        if model is None or engine is None:
            raise _malformed(where, line, "no model_name and engine labels")
        slot = values.setdefault((model, engine), {})
        if what == "per_position":
            if "position" not in labels:
                raise _malformed(where, line, "no position label")
            try:
                pos = settings.whole(labels["position"], "", 0, POSITIONS - 1)
            except ConfigError:
                raise _malformed(where, line, "a position that is no whole number") from None
            slot.setdefault("per_position", {})[pos] = value
        else:
            slot[what] = slot.get(what, 0) + value  # request_success: per finished_reason
    if not any_vllm:
        raise ConfigError(f"{where}: no vllm: metric on the page: not a vLLM server's metrics")
    spec = ("drafts", "draft_tokens", "accepted", "per_position")
    if not any(s in slot for slot in values.values() for s in spec):
        release = f"vLLM {version}" if version else "the server"
        raise ConfigError(
            f"{where}: {release} serves without speculative decoding: no vllm:spec_decode_* "
            "counters (vLLM registers them only when started with --speculative-config)"
        )
    out = {}
    for key, slot in values.items():
        missing = [s for s in spec if s not in slot]
        if missing:
            said = ", ".join(_METRIC[m] for m in missing)
            raise ConfigError(
                f"{where}: model {settings.shown(key[0])} engine {settings.shown(key[1])} has "
                f"no {said}: a malformed page (vLLM writes the four together)"
            )
        pos = slot["per_position"]
        if sorted(pos) != list(range(len(pos))):
            raise ConfigError(
                f"{where}: model {settings.shown(key[0])} engine {settings.shown(key[1])}: draft "
                f"positions {sorted(pos)[:8]}, not 0 to k-1 as vLLM writes them: a malformed page"
            )
        out[key] = Counters(
            slot["drafts"],
            slot["draft_tokens"],
            slot["accepted"],
            tuple(pos[i] for i in range(len(pos))),
            slot.get("generated"),
            slot.get("finished"),
            slot.get("running"),
        )
    return out


def _sample(line: str, name: str, where: str) -> tuple[dict[str, str], int]:
    """A sample line's labels and value (a whole number at least 0)."""
    rest = line[len(name) :]
    labels: dict[str, str] = {}
    if rest.startswith("{"):
        i = 1
        while True:
            while i < len(rest) and rest[i] in " \t":
                i += 1
            if i < len(rest) and rest[i] == "}":
                i += 1
                break
            m = _LABEL.match(rest, i)
            if not m or rest[m.end() : m.end() + 2] != '="':
                raise _malformed(where, line, "labels that do not parse")
            key, i = m.group(), m.end() + 2
            chars = []
            while i < len(rest) and rest[i] != '"':
                if rest[i] == "\\":
                    if i + 1 >= len(rest) or rest[i + 1] not in _ESCAPES:
                        raise _malformed(where, line, "a label value with a bad escape")
                    chars.append(_ESCAPES[rest[i + 1]])
                    i += 2
                else:
                    chars.append(rest[i])
                    i += 1
            if i >= len(rest):
                raise _malformed(where, line, "a label value that does not end")
            if key in labels:
                raise _malformed(where, line, f"the label {key} twice")
            labels[key] = "".join(chars)
            i += 1
            if i < len(rest) and rest[i] == ",":
                i += 1
            elif i < len(rest) and rest[i] != "}":
                raise _malformed(where, line, "labels that do not parse")
        rest = rest[i:]
    parts = rest.split()
    if not rest[:1].isspace() or not 1 <= len(parts) <= 2:
        raise _malformed(where, line, "no value")
    text = parts[0]
    if not _NUMBER.fullmatch(text):
        raise _malformed(where, line, f"the value {settings.shown(text)} is no number")
    value = float(text)
    if not math.isfinite(value) or value < 0 or value != int(value) or value > 2**53:
        raise _malformed(where, line, f"the value {text} is no count (a whole number from 0)")
    return labels, int(value)


def _malformed(where: str, line: str, why: str) -> ConfigError:
    return ConfigError(f"{where}: {why} in {settings.shown(line, 100)}: a malformed page")
