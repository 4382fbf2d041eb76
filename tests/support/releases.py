"""The releases a test means, asked of vpatch's data, as cibuildwheel's
tests ask one helper (`expected_wheels()`) what a build makes: "the newest
release", "a release with the V1 runner", "the first release of a fix's
span" are questions to VERSIONS.lock, rules.toml and patches.toml, never a
typed number, so that a new release changes the data and the tests follow.

- newest(), last_pin(), newest_patched(), oldest(): the lock's ends;
- where(holds), first_where(holds), last_where(holds): the pinned releases
  doctor's rules cover whose `Rules` (src/vpatch/rules.py) `holds` is true of;
- serving(key): the releases whose series carry the fix of doctor's defect
  `key` (patches.toml);
- having(release, **facts): a release typed where it is the point (its own
  fact, as "this release removed the V1 runner"), checked against rules.toml:
  the test fails when the data says otherwise. A typed release in a test's
  code stands only in such a table (tests/unit/test_release_literals.py).

Where no pinned release is the one asked for (a copy rewound to before the
release that has it, support.REWOUND), the test is skipped there and failed
anywhere else: inside a test at once; at collection (a parametrize list)
the helper returns a `Missing`, and tests/conftest.py skips or fails each
test given one."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from packaging.version import Version
from vpatch import lock
from vpatch.doctor import defects
from vpatch.rules import Rules

from support import REWOUND

PINS = lock.load()


class Missing(str):
    """No pinned release is the one asked for: a test given this is skipped
    in a rewound copy and failed anywhere else (tests/conftest.py)."""

    why: str

    def __new__(cls, why: str) -> Missing:
        m = super().__new__(cls, "missing")
        m.why = why
        return m


def unknown(why: str) -> None:
    """Skip the running test in a rewound copy (REWOUND), fail it elsewhere."""
    if os.environ.get(REWOUND):
        import pytest

        pytest.skip(why + " (rewound before it)")
    raise AssertionError(why + ": the test needs a release the data has")


def missing_in(value: Any) -> Missing | None:
    """The Missing in a test's parameter (or in a tuple or list of them)."""
    if isinstance(value, Missing):
        return value
    if isinstance(value, (tuple, list)):
        return next((m for v in value if (m := missing_in(v)) is not None), None)
    return None


def setup(item: Any) -> None:
    """tests/conftest.py's pytest_runtest_setup: a test given a Missing (a
    helper's answer at collection), as a parameter or a module constant its
    body names, is skipped in a rewound copy, failed here."""
    params = getattr(item, "callspec", None)
    for value in params.params.values() if params else ():
        if (m := missing_in(value)) is not None:
            unknown(m.why)
    # or a module's constant (NEWEST_FACTS = having(...)) its body reads
    fn = getattr(item, "function", None)
    code = getattr(fn, "__code__", None)
    for name in code.co_names if code is not None else ():
        if (m := missing_in(fn.__globals__.get(name))) is not None:
            unknown(m.why)


def _none(why: str) -> str:
    """What a helper answers when no release is the one asked for: inside a
    test, its skip or failure now; at collection, a Missing for conftest."""
    if os.environ.get("PYTEST_CURRENT_TEST"):
        unknown(why)
    return Missing(why)


def _pins(pins: lock.Lock | None) -> lock.Lock:
    return pins if pins is not None else PINS


# -- the lock's ends ------------------------------------------------------------------


def newest(pins: lock.Lock | None = None) -> str:
    """The newest pinned release doctor's rules cover (what a user upgrades
    to). In a checkout, the lock's last pin; in a copy a carry has just
    pinned a release in, before a person writes its facts, the one before
    (doctor refuses the new pin, exit 12, until then)."""
    p = _pins(pins)
    return (covered(p) or p.versions())[-1]


def last_pin(pins: lock.Lock | None = None) -> str:
    """The lock's last pin, whether or not doctor's rules cover it yet."""
    return _pins(pins).versions()[-1]


def oldest(pins: lock.Lock | None = None) -> str:
    """The oldest pinned release."""
    return _pins(pins).versions()[0]


def newest_patched(pins: lock.Lock | None = None) -> str:
    """The newest release whose series carries EAGLE-3 itself (lock status
    `patched`): what every command takes by default."""
    return _pins(pins).default().version


def with_status(status: str, pins: lock.Lock | None = None) -> list[str]:
    """The pinned releases of one lock status (patched, upstream-fix, upstream)."""
    return _pins(pins).versions(status)


# -- what doctor's rules say of a release -----------------------------------------------


def covered(pins: lock.Lock | None = None) -> list[str]:
    """The pinned releases doctor's rules cover, oldest first."""
    p = _pins(pins)
    return p.rules.known(p.versions())


def where(holds: Callable[[Rules], bool], pins: lock.Lock | None = None) -> list[str]:
    """The covered releases whose rules `holds` is true of, oldest first."""
    p = _pins(pins)
    return [v for v in covered(p) if holds(p.rules.at(v))]


def first_where(holds: Callable[[Rules], bool], pins: lock.Lock | None = None) -> str:
    """The first covered release whose rules `holds` is true of."""
    found = where(holds, pins)
    return found[0] if found else _none(f"no pinned release where {_said(holds)}")


def last_where(holds: Callable[[Rules], bool], pins: lock.Lock | None = None) -> str:
    """The last covered release whose rules `holds` is true of."""
    found = where(holds, pins)
    return found[-1] if found else _none(f"no pinned release where {_said(holds)}")


def edge(holds: Callable[[Rules], bool], pins: lock.Lock | None = None) -> tuple[str, str]:
    """(the last covered release before `holds` first holds, the first it
    holds at): where a fact starts, the pair a test of a change takes."""
    since = first_where(holds, pins)
    if isinstance(since, Missing):
        return since, since
    return before(since, pins), since


def _said(holds: Callable[[Rules], bool]) -> str:
    """A predicate's docstring, or where it is written."""
    if holds.__doc__:
        return holds.__doc__.strip()
    code = holds.__code__
    return f"{holds.__name__} ({Path(code.co_filename).name}:{code.co_firstlineno}) holds"


# The meanings the doctor tests share, as predicates for where() and first_where():


def v1_gone(r: Rules) -> bool:
    """the V1 model runner is gone"""
    return "v1" not in r.runners


def v2_by_default(r: Rules) -> bool:
    """the V2 runner serves every target by default, the V1 runner still there"""
    return "*" in r.v2_default and "v1" in r.runners


def v1_by_default(r: Rules) -> bool:
    """EAGLE-3 is upstream and the V1 runner serves DeepSeek-V3 and Kimi-K2.5 by
    default"""
    return r.upstream_eagle3 and "*" not in r.v2_default


# -- the patch set ------------------------------------------------------------------


def serving(key: str, pins: lock.Lock | None = None) -> list[str]:
    """The covered releases whose series carry the fix of doctor's defect
    `key` (its patch's spans in patches.toml)."""
    p = _pins(pins)
    slug = defects.fix(p, key)
    assert slug is not None, f"no patch fixes doctor's defect {key}"
    return p.patchset.serving(slug, covered(p))


# -- a release typed where it is the point ---------------------------------------------


def having(
    release: str,
    pins: lock.Lock | None = None,
    serves: tuple[tuple[str, str, dict[str, Any]], ...] = (),
    **facts: Any,
) -> str:
    """`release`, a test's point for a fact rules.toml records there: each of
    `facts` (a Rules field and its value there, a set for a frozenset field,
    or a function of the value that says whether it holds) must hold at it,
    or the test fails, naming the fact. `serves`: (architecture, platform,
    {field: value}) each, what serving.toml says of the file serving that
    architecture there (its serving.Code fields, and "path" for the file)."""
    p = _pins(pins)
    if release not in p.releases or not p.rules.covers(release):
        return _none(f"vLLM {release} is not pinned with doctor's rules in this copy")
    for arch, platform, want_code in serves:
        s = p.serving.served(arch, release, platform)
        assert s is not None, f"serving.toml has no family for {arch}"
        for name, want in want_code.items():
            got = s.path if name == "path" else getattr(s.code, name, None)
            assert got == want, (
                f"serving.toml says {name} = {got!r} for {arch} on {platform} at {release}, "
                f"not {want!r}"
            )
    r = p.rules.at(release)
    for name, want in facts.items():
        got = getattr(r, name)
        if callable(want):
            assert want(got), f"rules.toml's {name} at {release} is {got!r}: {want.__name__}"
            continue
        if isinstance(want, (set, list, tuple)) and isinstance(got, frozenset):
            want = frozenset(want)
        assert got == want, f"rules.toml says {name} = {got!r} at {release}, not {want!r}"
    return release


def before(release: str, pins: lock.Lock | None = None) -> str:
    """The pinned release just before `release`."""
    older = [v for v in _pins(pins).versions() if Version(v) < Version(release)]
    return older[-1] if older else _none(f"no pinned release before {release}")
