"""rules.py: rules.toml read once and validated (each refusal one line,
exit 2), folded per release, and `newest` moved without touching the rest."""

from __future__ import annotations

import pytest
from packaging.version import Version
from vpatch import lock, rules
from vpatch.errors import ConfigError

PINS = lock.load()


def first_table() -> str:
    """The committed first table: every fact, as the data writes it."""
    r = PINS.rules.at(PINS.rules.first)
    body = "\n".join(f"{n} = {rules.toml_value(getattr(r, n))}" for n in rules.names())
    return f'[releases."{PINS.rules.first}"]\n{body}\n'


def write(tmp_path, text: str):
    p = tmp_path / rules.FILE
    p.write_text(text)
    return p


def test_the_committed_table_reads_and_covers_the_pinned_releases():
    t = PINS.rules
    known = t.known(PINS.versions())
    assert known[0] == t.first and known[-1] == t.newest
    assert known == [v for v in PINS.versions() if t.covers(v)]
    for v in known:
        assert t.at(v).release == v


def test_a_release_folds_every_table_at_or_below_it():
    t = PINS.rules
    for (v, changes), nxt in zip(t.changes, [*t.releases()[1:], None], strict=True):
        r = t.at(v)
        assert all(getattr(r, k) == x for k, x in changes.items())
        if nxt:  # what a release changes holds until the next table
            assert all(
                getattr(t.at(nxt), k) == getattr(r, k)
                for k in rules.names()
                if k not in dict(t.changes)[nxt]
            )


def test_first_where_is_the_release_a_fact_starts_at():
    """first_where: the first table whose folded rules hold, every release
    before it pinned without (what a message's "from X" says)."""
    t = PINS.rules
    assert t.first_where(lambda r: True) == t.first
    assert t.first_where(lambda r: False) is None
    for name in ("upstream_eagle3", "final_norm_id", "norm_before_fc", "fc_norm"):
        since = t.first_where(lambda r, name=name: getattr(r, name))
        assert since is not None and since != t.first, name
        known = t.known(PINS.versions())
        before = [v for v in known if Version(v) < Version(since)]
        assert before and not any(getattr(t.at(v), name) for v in before), name
        assert getattr(t.at(since), name), name


def test_a_minimal_table_loads(tmp_path):
    t = rules.load(write(tmp_path, f'newest = "{PINS.rules.first}"\n' + first_table()))
    assert t.at(PINS.rules.first) == PINS.rules.at(PINS.rules.first)
    assert t.known(PINS.versions()) == [PINS.rules.first]


@pytest.mark.parametrize(
    ("edit", "says"),
    [
        (lambda s: s.replace("newest", "newer"), "unknown keys newer"),
        (lambda s: s + '\n[releases."9.9.9"]\nno_such_fact = true\n', "unknown facts"),
        (lambda s: s.replace("fc_width = ", "#"), "missing fc_width"),
        (lambda s: s.replace('fc_width = "three"', "fc_width = 3"), "fc_width must be a string"),
        (lambda s: s.replace("transformers = [4]", 'transformers = ["4"]'), "list of integers"),
        (lambda s: s.replace("transformers = [4]", "transformers = [true]"), "list of integers"),
        (lambda s: s.replace("own_configs = [", 'own_configs = ["kimi_k25", '), "a name twice"),
        (lambda s: s + '\n[releases."0.1.0"]\nfc_norm = true\n', "oldest first"),
        (lambda s: s + '\n[releases."9.9.9"]\nfc_norm = false\n', "fc_norm as before"),
        (lambda s: s.replace('newest = "', 'newest = "0.0.'), "older than its last table"),
        (lambda s: s.replace('newest = "', 'newest = "x'), "is not a release"),
        (lambda s: s + '\n[releases."latest"]\n', "is not a release"),
        (lambda s: s + "\n[[", "not valid TOML"),
        # hostile: a number int() refuses (over 4300 digits), as packaging and
        # tomllib read it: a version part, a table's name, a value
        (lambda s: s.replace('newest = "', 'newest = "' + "9" * 4400), "newest .* not a release"),
        (lambda s: s + f'\n[releases."0.{"1" * 4400}.0"]\n', "is not a release"),
        (lambda s: s.replace("transformers = [4]", f"transformers = [{'4' * 4400}]"), "TOML"),
    ],
)
def test_bad_data_is_one_line_and_exit_2(tmp_path, edit, says):
    text = edit(f'newest = "{PINS.rules.first}"\n' + first_table())
    with pytest.raises(ConfigError, match=says) as e:
        rules.load(write(tmp_path, text))
    assert "\n" not in str(e.value) and e.value.exit_code == 2
    assert len(str(e.value)) < 500  # a hostile value is quoted cut, not whole


def test_no_tables_or_no_file(tmp_path):
    with pytest.raises(ConfigError, match="no"):
        rules.load(write(tmp_path, f'newest = "{PINS.rules.first}"\n'))
    with pytest.raises(ConfigError, match="not found"):
        rules.load(tmp_path / "missing.toml")


def test_newest_moves_and_nothing_else_does():
    text = PINS.rules.path.read_text()
    moved = rules.with_newest(text, "9.9.9")
    assert moved.replace('newest = "9.9.9"', f'newest = "{PINS.rules.newest}"') == text
    with pytest.raises(ConfigError, match="no `newest"):
        rules.with_newest("x = 1\n", "9.9.9")


def test_values_are_written_as_the_data_writes_them():
    assert rules.toml_value(frozenset({"b", "a"})) == '["a", "b"]'
    assert rules.toml_value((4, 5)) == "[4, 5]" and rules.toml_value(True) == "true"
    assert rules.toml_value('a"b') == '"a\\"b"'
