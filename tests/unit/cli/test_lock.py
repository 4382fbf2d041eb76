"""cli/lock.py: `vpatch lock` lists the pinned releases, the default marked."""

from vpatch import cli, lock


def test_lock_lists_releases(capsys):
    assert cli.main(["lock"]) == 0
    out = capsys.readouterr().out.splitlines()
    pins = lock.load()
    assert [ln.split()[0] for ln in out] == pins.versions()
    marked = [ln.split()[0] for ln in out if ln.endswith("  (default)")]
    assert marked == [pins.default().version]
    default = next(ln for ln in out if ln.endswith("(default)")).split()
    assert default[1] == "patched"


def test_refresh_saves_the_lock_and_says_so(monkeypatch, capsys):
    from vpatch.sources import refresh

    saved = []
    monkeypatch.setattr(refresh, "refresh", lambda pins, say: pins)
    monkeypatch.setattr(lock, "save", saved.append)
    assert cli.main(["lock", "--refresh"]) == 0
    (pins,) = saved
    assert capsys.readouterr().out == f"VERSIONS.lock: {len(pins.releases)} releases refreshed\n"
