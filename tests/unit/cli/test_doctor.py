"""cli/doctor.py: `vpatch doctor`'s options become a Request; exit 1 when
doctor found an error."""

import json

import pytest
from vpatch import cli
from vpatch.commands import doctor


class Report:
    def __init__(self, ok):
        self.ok = ok

    def to_json(self):
        return {"ok": self.ok}

    def to_text(self):
        return f"ok: {self.ok}"


@pytest.mark.parametrize(("ok", "code"), [(True, 0), (False, 1)])
def test_the_request_and_the_exit_code(monkeypatch, capsys, ok, code):
    seen = []
    monkeypatch.setattr(doctor, "doctor", lambda req, say: seen.append(req) or Report(ok))
    argv = ["doctor", "--drafter", "d", "--tensor-parallel-size", "8", "--offline"]
    assert cli.main([*argv, "--", "vllm", "serve", "t", "--seed", "1"]) == code
    assert capsys.readouterr().out == f"ok: {ok}\n"
    (req,) = seen
    assert req.command == ("vllm", "serve", "t", "--seed", "1")
    assert (req.drafter, req.target, req.python) == ("d", None, "python3")
    assert (req.tensor_parallel_size, req.pipeline_parallel_size) == (8, 1)
    assert req.num_speculative_tokens == 3 and req.offline is True
    assert cli.main(["doctor", "--format", "json"]) == code
    assert json.loads(capsys.readouterr().out) == {"ok": ok}
