"""env.status: which patches are reported for a release, and wheel labels."""

from __future__ import annotations

from support import env as fake_env
from support import make_series, publish
from vpatch import lock, quilt
from vpatch.env import report, status
from vpatch.env.dist import Dist

like_envs = fake_env.like_envs


def dist(version: str) -> Dist:
    return Dist("py", "vllm", version, None, None, "cpython-311")


def test_wheel_series_and_hash_normalization():
    assert status.wheel_series(dist("0.17.1+eagle3.1a2b3c4d")) == "1a2b3c4d"
    assert status.wheel_series(dist("0.17.1+cu129.eagle3.1a2b3c4d")) == "1a2b3c4d"
    assert status.wheel_series(dist("0.17.1+cu129")) is None
    assert status.wheel_series(dist("0.17.1")) is None
    assert status.same_hash("1a2b3c4d", "1a2b3c4d" + "0" * 56)
    # an all-digit chunk loses its leading zeros in PEP 440 normalization
    assert status.same_hash("1234567", "01234567" + "0" * 56)
    assert not status.same_hash("1a2b3c4e", "1a2b3c4d" + "0" * 56)


def test_subjects_own_series_first_then_the_newest_patched_then_upstream_fixes(tmp_path):
    base = {"vllm/a.py": "a\n", "vllm/b.py": "b\n"}

    def s(name, steps):
        """A series whose patch files are named after their subjects."""
        (tmp_path / name).mkdir()
        d = make_series(tmp_path / name, base, steps)
        names = []
        for i, (subject, _) in enumerate(steps, 1):
            slug = quilt.slug_of(subject)
            (d / f"{i:04d}-step-{i}.patch").rename(d / f"{i:04d}-{slug}.patch")
            names.append(f"{i:04d}-{slug}.patch")
        (d / "series").write_text("\n".join(names) + "\n")
        return d

    old = s("old", [("a: one", {"vllm/a.py": "a1\n"})])
    new = s("new", [("a: one", {"vllm/a.py": "a1\n"}), ("b: two", {"vllm/b.py": "b2\n"})])
    fix = s("fix", [("b: layer zero", {"vllm/b.py": "b0\n"})])
    rel = lambda v, st: lock.Release(v, f"v{v}", "c", st)  # noqa: E731
    for v, folder in (("1.0.0", old), ("1.1.0", new), ("2.1.0", fix)):
        publish(tmp_path, v, folder)
    pins = lock.Lock(
        {
            r.version: r
            for r in [
                rel("1.0.0", "patched"),
                rel("1.1.0", "patched"),
                rel("2.0.0", "upstream"),
                rel("2.1.0", "upstream"),
            ]
        },
        tmp_path / "L",
    )

    subs = status.subjects(pins, quilt.load(old))
    assert [(x.name, x.own) for x in subs] == [("0001-a-one", True), ("0002-b-two", False)]
    subs = status.subjects(pins, None)  # a release without a series
    assert [(x.name, x.own) for x in subs] == [
        ("0001-a-one", False),
        ("0002-b-two", False),
        ("0001-b-layer-zero", False),
    ]
    assert status.ready({"a": "applied", "b": "upstream"})
    assert not status.ready({"a": "applied", "b": "missing"}) and not status.ready({})


def test_expected_is_what_check_reports_on_each_release_installed(like_envs):
    """`vpatch doctor --vllm R [--patched]` takes `vpatch check`'s report of R
    installed from the patch set alone (status.expected): it is the report
    of R's fake vLLM as released and with its series installed by `vpatch
    install`, on releases of every kind: a patched one (0.17.1), one whose
    series fixes what upstream lacks (0.26.0, the EAGLE-3 change upstream
    there) and one without a series (0.33.0: one fix upstream, one not)."""
    lock_path, envs = like_envs
    pins = lock.load(lock_path)
    seen = set()
    for (release, patched), py in envs.items():
        got = report.inspect(py, pins=pins).patches
        assert status.expected(pins, release, patched) == got, (release, patched)
        seen |= set(got.values())
    assert seen == {"applied", "upstream", "missing"}
