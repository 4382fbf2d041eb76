"""cli/fetch.py: `vpatch fetch` passes its options to commands/apply.fetch
and prints where the source went."""

from support.cli import vpatch
from vpatch import cli, lock
from vpatch.commands import apply


def test_offline_with_empty_cache(tmp_path):
    env = {"VPATCH_CACHE": str(tmp_path)}
    r = vpatch("fetch", lock.load().default().version, "--offline", env=env)
    assert r.returncode == 3 and "--offline" in r.stderr


def test_prints_the_cache_path_or_the_tree(monkeypatch, capsys, tmp_path):
    seen = []

    def fetch(version, source, dest, offline, remote, say, pins):
        seen.append((version, source, dest, offline, remote))
        assert pins.versions()  # the lock, loaded by the CLI
        release = lock.Release("9.9.0", "v9.9.0", "c", "patched")
        return apply.Fetched(release, dest or tmp_path / "sdist.tar.gz", "the sdist", bool(dest))

    monkeypatch.setattr(apply, "fetch", fetch)
    assert cli.main(["fetch", "9.9.0", "--source", "git", "--remote", "R"]) == 0
    assert capsys.readouterr().out == f"{tmp_path / 'sdist.tar.gz'}\n"
    assert cli.main(["fetch", "--dest", str(tmp_path / "t"), "--offline"]) == 0
    assert capsys.readouterr().out == f"vLLM 9.9.0 from the sdist -> {tmp_path / 't'}\n"
    assert seen == [("9.9.0", "git", None, False, "R"), (None, "auto", tmp_path / "t", True, None)]
