"""cli/wheel.py: `vpatch wheel`'s choices and what it prints."""

from pathlib import Path

from vpatch import cli
from vpatch.commands import wheel
from vpatch.wheel import build


def test_the_wheel_choices_are_the_commands_own():
    """The parser lists what commands/wheel.py accepts (one rule, two places
    only so that `vpatch --help` need not import the wheel code)."""
    opts = {a.dest: a.choices for a in cli.parser().commands["wheel"]._actions}
    assert tuple(opts["variant"]) == wheel.VARIANTS and tuple(opts["mode"]) == wheel.MODES


def test_prints_the_built_wheel(monkeypatch, capsys):
    seen = []

    def build(version, **kw):
        seen.append((version, kw["variant"], kw["mode"], kw["out"], kw["dry_run"]))
        return wheel.Built(Path("dist/vllm-9.9.0+eagle3-py3-none-any.whl"))

    monkeypatch.setattr(wheel, "build", build)
    assert cli.main(["wheel", "9.9.0", "--variant", "cpu"]) == 0
    assert capsys.readouterr().out == "dist/vllm-9.9.0+eagle3-py3-none-any.whl\n"
    assert seen == [("9.9.0", "cpu", "overlay", Path("dist"), False)]


def test_prints_the_plan_of_a_dry_run(monkeypatch, capsys):
    plan = build.BuildPlan("9.9.0", "cuda", "overlay", "in.whl", Path("out.whl"), "s", "v", [])
    monkeypatch.setattr(wheel, "build", lambda version, **kw: plan)
    assert cli.main(["wheel", "9.9.0", "--dry-run"]) == 0
    assert capsys.readouterr().out == plan.to_text() + "\n"
