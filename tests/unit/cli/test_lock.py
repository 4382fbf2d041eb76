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
