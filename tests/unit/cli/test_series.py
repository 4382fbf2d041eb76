"""cli/series.py: `vpatch series V --out DIR` writes the release's series
and says how many patches it holds."""

from vpatch import cli, lock


def test_the_default_releases_series(tmp_path, capsys):
    pins = lock.load()
    default = pins.default().version
    assert cli.main(["series", "--out", str(tmp_path / "s")]) == 0
    n = len(pins.patchset.named(default))
    assert capsys.readouterr().out == f"{tmp_path / 's'}: {n} patches for vLLM {default} (series)\n"
    names = [name for name, _ in pins.patchset.named(default)]
    assert (tmp_path / "s" / "series").read_text().split() == names
