"""cli/verify_wheel.py: `vpatch verify-wheel` prints the report; problems
are exit 8 (WheelError)."""

from pathlib import Path

from vpatch import cli
from vpatch.commands import verify_wheel
from vpatch.errors import WheelError
from vpatch.wheel.verify import Verified


def test_problems_are_exit_8(monkeypatch, capsys):
    res = Verified(Path("w.whl"), "vllm", "9.9.0", "cpu", None, [], problems=["p1", "p2"])
    seen = []

    def fake(w, pins, **kw):
        seen.append((w, kw))
        return res

    monkeypatch.setattr(verify_wheel, "verify_wheel", fake)
    assert cli.main(["verify-wheel", "w.whl", "--tree", "t"]) == WheelError.exit_code == 8
    out, err = capsys.readouterr()
    assert out.startswith("w.whl: vllm 9.9.0 (cpu)\n") and "  - p2\n" in out
    assert err == "vpatch: error: verify-wheel found 2 problems (listed above)\n"
    assert seen == [(Path("w.whl"), {"arch": None, "tree": Path("t"), "offline": False})]
    res.problems = []
    assert cli.main(["verify-wheel", "w.whl"]) == 0
