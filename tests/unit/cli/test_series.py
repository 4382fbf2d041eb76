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


def test_an_empty_out_is_refused_not_the_current_folder(tmp_path, monkeypatch, capsys):
    """`vpatch series --out ''` wrote the series into the current folder
    (Path('') is '.'). Now: exit 2, one line, nothing written."""
    import pytest

    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as e:
        cli.main(["series", "--out", ""])
    assert e.value.code == 2 and list(tmp_path.iterdir()) == []
    err = capsys.readouterr().err.splitlines()
    assert err == [
        "vpatch: error: argument --out: an empty path (`.` names the current folder) "
        "(see `vpatch series --help`)"
    ]
