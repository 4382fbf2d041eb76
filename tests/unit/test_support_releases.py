"""tests/support/releases.py: each helper answers from the data it is
given, so an edited copy of the data (a release pinned or taken out, a
fact moved, a fix's span cut) moves its answer; having() fails on a fact
the data does not record; a release no pinned one is skips a test in a
rewound copy and fails it anywhere else (tests/conftest.py)."""

from __future__ import annotations

import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest
import tomllib
from packaging.version import Version
from support import REWOUND, next_release
from support import releases as R
from vpatch import lock, resources, rules

PINS = R.PINS


def copy(tmp_path: Path) -> Path:
    """A copy of vpatch's data (VERSIONS.lock, rules.toml, patches/): its lock's path."""
    root = Path(shutil.copytree(resources.root(), tmp_path / "data"))
    return root / "VERSIONS.lock"


def pin(path: Path, release: str, status: str) -> lock.Lock:
    with path.open("a") as f:
        f.write(
            f'\n[releases."{release}"]\ntag = "v{release}"\ncommit = "c"\nstatus = "{status}"\n'
        )
    return lock.load(path)


def test_the_ends_follow_the_lock(tmp_path):
    assert R.newest() == R.last_pin() == PINS.versions()[-1]
    assert R.oldest() == PINS.versions()[0]
    assert R.newest_patched() == PINS.default().version
    assert R.with_status("patched") == PINS.versions("patched")
    new = next_release(PINS)
    edited = pin(copy(tmp_path), new, "patched")
    assert R.last_pin(edited) == R.newest_patched(edited) == new
    assert R.oldest(edited) == R.oldest() and R.last_pin() != new
    # pinned, its facts not written: doctor's rules still end before it
    assert R.newest(edited) == R.newest() != new


def merge_back(path: Path, release: str) -> rules.Table:
    """rules.toml with the table of `release` merged into the table before it
    (its header line taken out): its facts change a table earlier."""
    toml = path.parent / rules.FILE
    header = f'[releases."{release}"]\n'
    text = toml.read_text()
    assert text.count(header) == 1
    head, tail = text.split(header)
    later = set(tomllib.loads(header + tail.split("\n[")[0])["releases"][release])
    # the table before loses the keys the merged one sets (TOML has one value a key)
    start = head.rindex("\n[") + 1
    toml.write_text(head[:start] + _without(head[start:], later) + tail)
    return lock.load(path).rules


def _without(table: str, keys: set[str]) -> str:
    """A table's text without the assignments of `keys` (one line, or an
    array over several)."""
    out, skipping = [], False
    for line in table.splitlines(keepends=True):
        if not skipping and line.split("=")[0].strip() in keys and "=" in line:
            skipping = line.count("[") > line.count("]")
            continue
        if skipping:
            skipping = "]" not in line
            continue
        out.append(line)
    return "".join(out)


def test_where_first_where_last_where_and_edge_follow_rules_toml(tmp_path):
    gone = R.first_where(R.v1_gone)
    assert gone == PINS.rules.first_where(R.v1_gone)  # rules.toml's own answer
    earlier = R.before(gone)
    assert R.edge(R.v1_gone) == (earlier, gone)
    assert R.last_where(lambda r: not R.v1_gone(r)) == earlier
    assert R.where(R.v1_gone) == [v for v in R.covered() if Version(v) >= Version(gone)]
    path = copy(tmp_path)
    table = PINS.rules.releases()[PINS.rules.releases().index(gone) - 1]
    merge_back(path, gone)  # the data now says the V1 runner went with the table before
    edited = lock.load(path)
    assert R.first_where(R.v1_gone, edited) == table != gone
    assert R.edge(R.v1_gone, edited) == (R.before(table), table)
    assert R.last_where(lambda r: not R.v1_gone(r), edited) == R.before(table)


def test_serving_follows_the_patch_set(tmp_path):
    slug = R.defects.fix(PINS, "layer0")
    assert R.serving("layer0") == PINS.patchset.serving(slug, R.covered())
    path = copy(tmp_path)
    toml = path.parent / "patches" / "patches.toml"
    last = R.serving("layer0")[-1]
    cut = R.before(last)
    text = toml.read_text()
    assert f':{last}"' in text
    toml.write_text(text.replace(f':{last}"', f':{cut}"'))  # the fix's span ends earlier
    assert R.serving("layer0", lock.load(path))[-1] == cut


def test_having_is_the_release_where_the_data_says_so_and_fails_elsewhere(tmp_path):
    v = R.newest()
    runners = set(PINS.rules.at(v).runners)
    assert R.having(v, runners=runners, v2_env=PINS.rules.at(v).v2_env) == v
    with pytest.raises(AssertionError, match=f"rules.toml says runners = .* at {v}"):
        R.having(v, runners=runners ^ {"v1"})
    with pytest.raises(AssertionError, match=f"rules.toml's archs at {v} is"):
        R.having(v, archs=lambda archs: "NoSuchArch" in archs)
    # a typed release checked against data that says otherwise: the test fails
    earlier = R.before(R.first_where(R.v1_gone))
    assert R.having(earlier, runners={"v1", "v2"}) == earlier
    path = copy(tmp_path)
    merge_back(path, R.first_where(R.v1_gone))
    with pytest.raises(AssertionError, match=f"rules.toml says runners = .* at {earlier}"):
        R.having(earlier, lock.load(path), runners={"v1", "v2"})


def test_no_release_holds(monkeypatch):
    def nothing(r):
        """no release has this"""
        return False

    with pytest.raises(AssertionError, match="no pinned release where no release has this"):
        R.first_where(nothing)
    with pytest.raises(AssertionError, match=r"<lambda> \(test_support_releases.py:\d+\) holds"):
        R.last_where(lambda r: False)
    with pytest.raises(AssertionError, match="is not pinned"):
        R.having(next_release(PINS))
    monkeypatch.setenv(REWOUND, "1")
    with pytest.raises(pytest.skip.Exception, match="rewound before it"):
        R.first_where(nothing)
    # at collection (no test running), a Missing for tests/conftest.py
    monkeypatch.delenv("PYTEST_CURRENT_TEST")
    m = R.first_where(nothing)
    assert isinstance(m, R.Missing) and m.why == "no pinned release where no release has this"
    assert R.edge(nothing) == (m, m)


@pytest.mark.parametrize("rewound", [False, True])
def test_a_test_given_a_missing_release_is_failed_or_skipped(monkeypatch, rewound):
    """setup(), tests/conftest.py's setup hook: a parameter that is (or
    holds) a Missing fails the test, or skips it in a rewound copy."""
    if rewound:
        monkeypatch.setenv(REWOUND, "1")
    m = R.Missing("no pinned release where it holds")
    for params in ({"version": m}, {"pair": ("0.0.0", m)}):
        item = SimpleNamespace(callspec=SimpleNamespace(params=params))
        kind = pytest.skip.Exception if rewound else AssertionError
        with pytest.raises(kind, match="no pinned release where it holds"):
            R.setup(item)
    R.setup(SimpleNamespace(callspec=SimpleNamespace(params={"v": "x"})))
    R.setup(SimpleNamespace())  # not parametrized
    # a module constant the test's body reads (NEWEST = having(...)) alike
    scope = {"NEWEST": m, "OTHER": "0.0.0"}
    body = eval("lambda: NEWEST", scope)  # noqa: S307 - a body naming the constant
    with pytest.raises(kind, match="no pinned release where it holds"):
        R.setup(SimpleNamespace(function=body))
    R.setup(SimpleNamespace(function=eval("lambda: OTHER", scope)))  # noqa: S307


def test_known_takes_a_missing_release(monkeypatch):
    from support import known

    with pytest.raises(AssertionError, match="no pinned release where it holds"):
        known(R.Missing("no pinned release where it holds"))
