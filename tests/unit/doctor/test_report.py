"""doctor's report: ok exactly when no finding is an error; the JSON shape
the README documents; the text's counts and the corrected command last."""

from __future__ import annotations

import json

import pytest
from vpatch.doctor.report import Finding, Report


def report(*severities: str) -> Report:
    found = [Finding(f"c{i}", s, f"message {i}") for i, s in enumerate(severities)]
    return Report(found, "vllm serve M", ["target  T"], ["--foo 1"])


def test_ok_exactly_without_an_error():
    assert report("info", "warning").ok
    assert not report("info", "error").ok


def test_json_shape():
    data = report("info", "warning", "error").to_json()
    json.dumps(data)  # JSON-ready as it is
    assert data == {
        "ok": False,
        "findings": [
            {"check": "c0", "severity": "info", "message": "message 0"},
            {"check": "c1", "severity": "warning", "message": "message 1"},
            {"check": "c2", "severity": "error", "message": "message 2"},
        ],
        "serve": "vllm serve M",
        "uninterpreted": ["--foo 1"],
        "read": [],
        "vllm": {},
    }


def test_a_fix_is_not_part_of_a_findings_identity():
    assert Finding("c", "error", "m", {"max_model_len": 4}) == Finding("c", "error", "m")


def test_text_counts_and_ends_with_the_command():
    lines = report("error", "error", "warning").to_text().splitlines()
    assert lines[0] == "target  T"
    assert "NOT ok: 2 errors, 1 warning" in lines
    assert lines[-1] == "vllm serve M"


@pytest.mark.parametrize(
    ("severities", "verdict"),
    [
        (("error",), "NOT ok: 1 error, 0 warnings"),  # was "1 errors"
        (("warning", "warning"), "ok: 0 errors, 2 warnings"),
        (("info",), "ok: 0 errors, 0 warnings"),
    ],
)
def test_counts_are_said_in_the_singular_too(severities, verdict):
    assert verdict in report(*severities).to_text().splitlines()
