import os
import shutil
from pathlib import Path

import pytest
from packaging.version import Version
from support import REWOUND, minor_after, next_release, text_file
from vpatch import lock, rules
from vpatch.errors import ConfigError


def test_default_is_newest_patched(pins):
    assert pins.default().version == "9.9.0"
    assert pins.get(None) is pins.default()
    assert pins.get("v9.8.0").version == "9.8.0"


def test_versions_sort_numerically(pins):
    assert pins.versions() == ["9.8.0", "9.9.0", "10.0.0"]
    assert pins.versions("upstream") == ["10.0.0"]


def test_unknown_release_lists_the_pinned(pins):
    with pytest.raises(ConfigError, match="unknown release '0.1'; pinned: 9.8.0, 9.9.0, 10.0.0"):
        pins.get("0.1")


@pytest.mark.parametrize(
    ("given", "hint"),
    [
        ("9.9", " (did you mean 9.9.0?)"),
        ("v9", " (did you mean 9.8.0 or 9.9.0?)"),
        ("10", " (did you mean 10.0.0?)"),
        ("9.9.", ""),
        ("1", ""),
    ],
)
def test_a_release_cut_short_gets_what_it_may_mean(pins, given, hint):
    """`X.Y` got the list of every pin; it gets the X.Y.Z it may mean."""
    with pytest.raises(ConfigError) as e:
        pins.get(given)
    assert str(e.value).startswith(f"unknown release {given!r}{hint}; pinned: 9.8.0, 9.9.0")


def test_round_trip(tmp_path, pins):
    rel = lock.Release(
        "9.9.0",
        "v9.9.0",
        "abc1234",
        "patched",
        {"sdist": lock.Artifact("sdist", "vllm-9.9.0.tar.gz", "a" * 64, 10)},
    )
    fixed = lock.Release("10.1.0", "v10.1.0", "def5678", "upstream-fix")
    pins = pins.with_release(rel).with_release(fixed)
    path = tmp_path / "VERSIONS.lock"
    path.write_text(lock.dumps(pins))
    back = lock.load(path)
    assert back.releases == pins.releases
    assert back.versions("upstream-fix") == ["10.1.0"]
    # which release carries what is the patch set's (patches/patches.toml), not the lock's
    assert back.with_series() == [] and back.series("10.1.0") is None


def test_a_lock_edited_in_the_same_process_is_read_anew(tmp_path, pins):
    # an edit between two loads, as `vpatch lock --refresh` makes, must show
    # in the second
    path = tmp_path / "VERSIONS.lock"
    path.write_text(lock.dumps(pins))
    first = lock.load(path)
    moved = lock.Release("9.9.0", "v9.9.0", "fedcba9", "patched")
    path.write_text(lock.dumps(pins.with_release(moved)))
    second = lock.load(path)
    assert first.get("9.9.0").commit != "fedcba9" and second.get("9.9.0").commit == "fedcba9"
    assert lock.load(path).releases == second.releases


@pytest.mark.parametrize(
    "text, why",
    [
        ("[releases", "not valid TOML"),
        ('[releases."1.0"]\ntag = "v1.0"\n', "missing commit, status"),
        ('[releases."1.0"]\ntag="v"\ncommit="c"\nstatus="maybe"\n', "status must be"),
        ('[releases."x.y"]\ntag="v"\ncommit="c"\nstatus="patched"\n', "not a version"),
        (
            '[releases."1.0"]\ntag="v"\ncommit="c"\nstatus="patched"\n'
            '[releases."1.0".artifacts.egg]\nfilename="f"\nsha256="s"\n',
            "unknown artifact kind",
        ),
        # the lock before the patch set named each release's series folder
        (
            '[releases."1.0"]\ntag="v"\ncommit="c"\nstatus="patched"\nseries="patches/1.0"\n',
            "unknown keys series",
        ),
        (
            '[releases."1.0"]\ntag="v"\ncommit="c"\nstatus="patched"\n'
            '[releases."1.0".artifacts.wheel]\nfilename="f"\nsha256="s"\nsha="t"\n',
            "artifact wheel: unknown keys sha",
        ),
    ],
)
def test_bad_lock_files(tmp_path, text, why):
    with pytest.raises(ConfigError, match=why):
        lock.load(text_file(tmp_path / "VERSIONS.lock", text))


def test_the_real_lock():
    pins = lock.load()
    ps = pins.patchset
    # `patched`: the releases the EAGLE-3 patches serve, those upstream has
    # from the first `upstream-fix` release (their DEP-3 Applied-Upstream)
    fixed = pins.versions("upstream-fix")
    eagle3 = [s for s in ps.slugs if ps.upstream(s).release == fixed[0]]
    served = {v for s in eagle3 for v in ps.serving(s, pins.versions())}
    assert eagle3 and pins.versions("patched") == sorted(served, key=Version)
    # every later release has EAGLE-3 upstream, with our fixes on top
    assert fixed == pins.versions()[len(served) :]
    assert set(fixed) <= set(pins.with_series())
    for v in pins.versions():
        r = pins.get(v)
        assert r.tag == f"v{v}" and len(r.commit) >= 7
        assert {"wheel"} <= set(r.artifacts)
        for a in r.artifacts.values():
            assert len(a.sha256) == 64 and a.size > 0
            # wheels carry their RECORD's hash, for range-request fetches
            assert len(a.record_sha256) == (0 if a.kind == "sdist" else 64)
    for v in ("0.15.0", "0.15.1"):
        assert "sdist" not in pins.get(v).artifacts  # wheel-only releases
    assert set(pins.versions("patched")) <= set(pins.with_series())
    # every release carries a series: EAGLE-3 (patched) or our fixes (upstream-fix)
    assert pins.with_series() == pins.versions()
    for v in pins.with_series():
        series = pins.series(v)
        assert series is not None and series.name == v
        numbers = [f"{i:04d}" for i in range(1, len(series.patches) + 1)]
        assert [p.name[:4] for p in series.patches] == numbers


def test_put_writes_the_file_and_the_object_alike_and_other_reads_another_lock(tmp_path):
    """A command that pins or re-statuses a release (carry, port) puts it:
    the lock it holds is then what its file says, and nothing reads the
    file again; a lock of its own elsewhere (a carry's proposed copy) it
    reads through other(), never lock.load() (test_layers)."""
    first = tmp_path / "a" / "VERSIONS.lock"
    first.parent.mkdir()
    first.write_text('[releases."1.0"]\ntag = "v1.0"\ncommit = "c"\nstatus = "upstream"\n')
    pins = lock.load(first)
    pins.put(lock.Release("2.0", "v2.0", "d", "upstream"))
    pins.put(lock.Release("1.0", "v1.0", "c", "upstream-fix"))  # an entry replaced
    assert pins.versions() == ["1.0", "2.0"] and pins.get("1.0").status == "upstream-fix"
    assert pins.releases == lock.load(first).releases
    other = tmp_path / "b" / "VERSIONS.lock"
    other.parent.mkdir()
    other.write_text('[releases."3.0"]\ntag = "v3.0"\ncommit = "e"\nstatus = "upstream"\n')
    assert pins.other(other).versions() == ["3.0"] and pins.other(other).path == other


@pytest.mark.parametrize(
    ("given", "taken"),
    [("9.9.1", "9.9.1"), ("v9.9.1", "9.9.1"), ("0.6.1.post1", "0.6.1.post1")],
)
def test_a_release_is_spelled_as_vllm_spells_it(given, taken):
    assert lock.release_name(given) == taken


@pytest.mark.parametrize(
    ("given", "hint"),
    [
        ("9.9", " (did you mean 9.9.0?)"),
        ("9.9.1.0", " (did you mean 9.9.1?)"),
        (" 9.9.1", " (did you mean 9.9.1?)"),
        ("V9.9.1", " (did you mean 9.9.1?)"),
        ("0.6.1post1", " (did you mean 0.6.1.post1?)"),
        ("9.9.1rc1", ""),  # a pre-release: no release users run
        ("../../victim", ""),
        ("", ""),
    ],
)
def test_another_spelling_is_refused_naming_the_release_meant(given, hint):
    with pytest.raises(ConfigError) as e:
        lock.release_name(given)
    assert str(e.value) == f"{given!r} is not a release: vLLM numbers them X.Y.Z{hint}"


def test_a_long_name_is_refused_in_a_short_line():
    with pytest.raises(ConfigError) as e:
        lock.release_name("9" * 5000)
    assert len(str(e.value)) < 100


# -- one release parser: Unicode digits, leading zeros, one rule ----


@pytest.mark.parametrize(
    ("given", "hint"),
    [
        ("９.９.１", " (did you mean 9.9.1?)"),  # fullwidth digits: \d took them
        ("٩.٩.١", " (did you mean 9.9.1?)"),  # Arabic-Indic
        ("9.1０.1", " (did you mean 9.10.1?)"),  # one such digit after an ASCII one
        ("9.9.01", " (did you mean 9.9.1?)"),  # leading zeros: the index's 9.9.1
        ("09.9.1", " (did you mean 9.9.1?)"),
        ("9.09.1", " (did you mean 9.9.1?)"),
        ("0.6.1.post01", " (did you mean 0.6.1.post1?)"),
        ("9.9.1\n", " (did you mean 9.9.1?)"),  # `$` took a trailing newline
        ("1!9.9.1", ""),  # an epoch: vLLM has none, and 1!X sorts after every X
        ("9.9.1+cu129", " (did you mean 9.9.1?)"),  # a local label: a build, not a release
    ],
)
def test_one_parser_takes_ascii_digits_without_leading_zeros(given, hint):
    with pytest.raises(ConfigError) as e:
        lock.release_name(given)
    assert str(e.value) == f"{given!r} is not a release: vLLM numbers them X.Y.Z{hint}"
    assert not lock.is_release(given)


def test_a_build_of_a_release_is_its_release_where_an_installed_version_is_given():
    """`doctor --vllm X.Y.Z+cu129`, as `vllm --version` says it."""
    assert lock.release_name("9.9.1+cu129", build=True) == "9.9.1"
    assert lock.release_name("v0.6.1.post1+cpu", build=True) == "0.6.1.post1"
    for bad in ("9.9.1+", "9.9.1+cu 129", "9.9.01+cu129", "1!9.9.1+cu129"):
        with pytest.raises(ConfigError, match="is not a release"):
            lock.release_name(bad, build=True)


def test_the_predicate_is_what_the_parser_takes():
    for taken in ("9.9.1", "10.0.0", "0.6.1.post1", "9999.0.0"):
        assert lock.is_release(taken) and lock.release_name(taken) == taken
    for refused in ("v9.9.1", "9.9", "10000.0.0", "9" * 6000, "1!9.9.1", "9.9.1rc1", ""):
        assert not lock.is_release(refused)


@pytest.mark.parametrize("given", ["9.9.00", "09.9.0", "９.9.0"])
def test_get_refuses_another_spelling_of_a_pinned_release(pins, given):
    """fetch, apply, series, export, wheel: the release they are given goes
    through the one parser, so a spelling of 9.9.0 says so."""
    with pytest.raises(ConfigError) as e:
        pins.get(given)
    assert "(did you mean 9.9.0?)" in str(e.value)


# -- one answer to "does vpatch know this release" -----------------


def _real_root(where: Path) -> Path:
    """A copy of vpatch's data (VERSIONS.lock, rules.toml, patches.toml):
    its VERSIONS.lock."""
    real = lock.load()
    (where / "patches").mkdir(parents=True)
    shutil.copyfile(real.path, where / "VERSIONS.lock")
    shutil.copyfile(real.rules.path, where / rules.FILE)
    shutil.copyfile(real.patches_toml, where / "patches" / "patches.toml")
    return where / "VERSIONS.lock"


def test_the_standing_of_a_version_is_one_answer():
    pins = lock.load()
    # the newest release doctor's rules cover: the lock's last pin, except in
    # a copy a carry has just pinned a release in (support.REWOUND), until a
    # person writes its facts
    newest, first = pins.rules.newest, pins.versions()[0]
    after = next_release(pins)
    cases = {
        newest: ("known", newest),
        first: ("known", first),
        f"{newest}+cu129": ("known", newest),  # a build of the release
        f"{newest}.post1": ("known", newest),  # a post release: its release's code + fixes
        after: ("newer", None),
        f"{after}rc1": ("newer", None),
        f"{after}.post1": ("newer", None),
        f"{newest}rc1": ("unknown", None),  # before the release: not its code
        "not a version": ("unknown", None),
        "9" * 5000: ("unknown", None),
    }
    for version, (state, release) in cases.items():
        s = pins.standing(version)
        assert (s.state, s.release) == (state, release), version
    if not os.environ.get(REWOUND):
        assert newest == pins.versions()[-1]  # the real data: doctor's rules cover every pin


def test_a_newer_release_is_refused_alike_for_check_and_doctor():
    pins = lock.load()
    after = next_release(pins)
    s = pins.standing(f"{after}+cu129")
    for rules_too in (False, True):
        e = s.refusal("its verdict would be a guess", rules=rules_too)
        assert e is not None and e.exit_code == 12
        assert f"vLLM {after}+cu129 is newer than vpatch knows" in str(e)
        assert f"`vpatch carry {after}`" in str(e)
    assert pins.standing(pins.rules.newest).refusal("x", rules=True) is None


def test_newest_beyond_the_lock_is_refused_at_load(tmp_path):
    """Rules.toml's `newest` at a release the lock does not pin
    switched doctor's exit 12 off; refused in one line, exit 2."""
    path = _real_root(tmp_path)
    pins = lock.load(path)
    beyond = minor_after(next_release(pins))
    f = tmp_path / rules.FILE
    f.write_text(rules.with_newest(f.read_text(), beyond))
    with pytest.raises(ConfigError) as e:
        lock.load(path).rules  # noqa: B018
    assert str(e.value) == (
        f"{rules.FILE}: newest {beyond!r} is not a release VERSIONS.lock pins "
        f"(it pins up to {pins.versions()[-1]})"
    )


def test_a_span_naming_an_unpinned_release_is_refused_at_load(tmp_path):
    """A span ending at a release the lock does not pin loaded
    silently everywhere."""
    path = _real_root(tmp_path)
    pins = lock.load(path)
    toml = tmp_path / "patches" / "patches.toml"
    slug = pins.patchset.slugs[-1]
    last = pins.patchset.variants[slug][-1]
    beyond = next_release(pins)
    # the slug's own span only (another patch's may read the same)
    head, own = toml.read_text().split(f'["{slug}"]\n', 1)
    own = own.replace(f'"{last.span}"]', f'"{last.first}:{beyond}"]', 1)
    text = f'{head}["{slug}"]\n{own}'
    assert text != toml.read_text()
    toml.write_text(text)
    with pytest.raises(ConfigError) as e:
        lock.load(path).patchset  # noqa: B018
    assert str(e.value) == (
        f"patches.toml [{slug}]: span {last.first}:{beyond} names {beyond}, which "
        "VERSIONS.lock does not pin"
    )


def test_a_lock_missing_a_release_a_span_names_is_refused_at_load(tmp_path):
    path = _real_root(tmp_path)
    pins = lock.load(path)
    slug, var = next(
        (s, v) for s in pins.patchset.slugs for v in pins.patchset.variants[s] if v.first != v.last
    )
    lock.save(lock.Lock({k: r for k, r in pins.releases.items() if k != var.last}, path))
    with pytest.raises(ConfigError) as e:
        lock.load(path).patchset  # noqa: B018
    assert str(e.value) == (
        f"patches.toml [{slug}]: span {var.span} names {var.last}, which VERSIONS.lock does not pin"
    )
