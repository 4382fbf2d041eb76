"""commands/doctor.py: the adapter gives deploy.doctor's report for the pair."""

from vpatch.commands import doctor
from vpatch.deploy import doctor as engine


def test_the_command_is_the_engine(tmp_path, monkeypatch):
    seen = {}

    def run(target, drafter, python=None, opts=None):
        seen.update(target=target, drafter=drafter, python=python, opts=opts)
        return engine.Report([], "vllm serve T")

    monkeypatch.setattr(doctor, "run", run)
    opts = doctor.Options(tensor_parallel_size=8)
    report = doctor.doctor("T", "D", python="/py", opts=opts)
    assert isinstance(report, engine.Report) and report.ok
    assert seen == {"target": "T", "drafter": "D", "python": "/py", "opts": opts}
