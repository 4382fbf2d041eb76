"""Local folders and hub ids from the local Hugging Face cache, offline."""

from __future__ import annotations

import pytest
from vpatch.doctor import hub
from vpatch.errors import ConfigError


def cached_repo(cache, repo, files, rev="0123abcd", ref="main"):
    base = cache / f"models--{repo.replace('/', '--')}"
    snap = base / "snapshots" / rev
    snap.mkdir(parents=True)
    for name, text in files.items():
        (snap / name).write_text(text)
    (base / "refs").mkdir(exist_ok=True)
    (base / "refs" / ref).write_text(rev)
    return snap


def test_local_folder(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    m = hub.resolve(str(tmp_path))
    assert m.path == tmp_path.resolve() and not m.hub and m.ref == str(tmp_path)


def test_folder_without_config(tmp_path):
    with pytest.raises(ConfigError, match="no config.json"):
        hub.resolve(str(tmp_path))


def test_a_file_is_not_a_model(tmp_path):
    (tmp_path / "f").write_text("x")
    with pytest.raises(ConfigError, match="not a folder"):
        hub.resolve(str(tmp_path / "f"))


def test_hub_id_from_the_cache(tmp_path):
    snap = cached_repo(tmp_path, "moonshotai/Kimi-K2.5", {"config.json": "{}"})
    m = hub.resolve("moonshotai/Kimi-K2.5", cache_dir=tmp_path)
    assert m.hub and m.path == snap and m.ref == "moonshotai/Kimi-K2.5"


def test_hub_id_at_a_revision(tmp_path):
    snap = cached_repo(tmp_path, "acme/drafter", {"config.json": "{}"}, rev="feedbeef", ref="v2")
    assert hub.resolve("acme/drafter@v2", cache_dir=tmp_path).path == snap
    with pytest.raises(ConfigError, match="at revision main"):
        hub.resolve("acme/drafter@main", cache_dir=tmp_path)


@pytest.mark.parametrize(
    "ref,phrase",
    [
        ("acme/missing", "not in the local Hugging Face cache"),
        ("not a hub id", "not a hub id"),
        ("/abs/missing/dir", "no such folder"),
    ],
)
def test_not_found(tmp_path, ref, phrase):
    with pytest.raises(ConfigError, match=phrase):
        hub.resolve(ref, cache_dir=tmp_path)
