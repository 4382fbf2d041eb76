import pytest
from vpatch import settings
from vpatch.errors import ConfigError

VAR = "VPATCH_TEST_SECONDS"


@pytest.mark.parametrize(
    ("raw", "want"), [(None, 7.0), ("", 7.0), ("  ", 7.0), ("2.5", 2.5), (" 9 ", 9.0)]
)
def test_seconds_reads_a_positive_number_or_the_default(monkeypatch, raw, want):
    if raw is None:
        monkeypatch.delenv(VAR, raising=False)
    else:
        monkeypatch.setenv(VAR, raw)
    assert settings.seconds(VAR, 7.0) == want


@pytest.mark.parametrize("raw", ["0", "-1", "abc", "inf", "nan", "1e999", "x" * 100])
def test_seconds_refuses_what_is_not_seconds_above_0_in_one_line(monkeypatch, raw):
    monkeypatch.setenv(VAR, raw)
    with pytest.raises(ConfigError) as e:
        settings.seconds(VAR, 7.0)
    msg = str(e.value)
    assert msg.startswith(f"{VAR}=") and "\n" not in msg and len(msg) < 120


@pytest.mark.parametrize(
    ("value", "kw", "want"),
    [("8", {}, 8), (" 8 ", {}, 8), ("+8", {}, 8), ("1_000", {}, 1000), (8, {}, 8)]
    + [("0", {"least": 0}, 0), (settings.MOST, {}, settings.MOST), (2**40, {"most": 2**40}, 2**40)],
)
def test_whole_reads_text_as_int_does_and_ints_within_the_bound(value, kw, want):
    assert settings.whole(value, "N", **kw) == want


@pytest.mark.parametrize(
    ("value", "kw", "got"),
    [
        ("0", {}, "got '0'"),
        ("-4", {}, "got '-4'"),
        ("eight", {}, "got 'eight'"),
        ("1.5", {}, "got '1.5'"),
        (str(settings.MOST + 1), {}, f"got '{settings.MOST + 1}'"),
        ("9" * 5000, {}, "(5000 characters)"),  # int() would raise past 4300 digits
        ("9" * 41, {"most": 10**50}, "(41 characters)"),  # over WIDTH: not read at all
        (10**400, {}, "a number of 1329 bits"),  # str() of it is refused past 4300 digits
        (True, {}, "got True"),
        (8.0, {}, "got 8.0"),
        (None, {}, "got None"),
        ("8", {"text": False}, "got '8'"),  # a config's "8" is a string
    ],
)
def test_whole_refuses_anything_else_in_one_line(value, kw, got):
    with pytest.raises(ConfigError) as e:
        settings.whole(value, "--flag", **kw)
    msg = str(e.value)
    assert msg.startswith("--flag must be a whole number from ") and got in msg, msg
    assert "\n" not in msg and len(msg) < 160, msg


@pytest.mark.parametrize("raw", ["1e10", "9" * 400, "1e999", "86401"])
def test_seconds_too_large_says_so(monkeypatch, raw):
    """`VPATCH_INDEX_TIMEOUT=999...` said "not a number of seconds above 0",
    and 1e10 was an internal error (exit 70: a socket refuses a timeout
    past time_t). Over a day is too large, and said so."""
    monkeypatch.setenv(VAR, raw)
    with pytest.raises(ConfigError) as e:
        settings.seconds(VAR, 7.0)
    assert f": too large: at most {settings.MOST_SECONDS:g} seconds" in str(e.value), e.value
    monkeypatch.setenv(VAR, str(settings.MOST_SECONDS))
    assert settings.seconds(VAR, 7.0) == settings.MOST_SECONDS


@pytest.mark.parametrize("raw", ["1_0", "١٠", "1 0"])
def test_seconds_are_ascii_decimal(monkeypatch, raw):
    monkeypatch.setenv(VAR, raw)
    with pytest.raises(ConfigError, match="not a number of seconds above 0"):
        settings.seconds(VAR, 7.0)


@pytest.mark.parametrize("value", ["1_0", " 1", "1 ", "+1", "１", "٣", "0x1"])
def test_whole_decimal_takes_ascii_digits_only(value):
    """vpatch's own options (--interval, --jobs) take ASCII digits: int()
    took `1_0` as 10, ` 1` as 1 and a fullwidth `１` as 1."""
    with pytest.raises(ConfigError, match="must be a whole number from 1 to"):
        settings.whole(value, "--interval", decimal=True)
    assert settings.whole("10", "--interval", decimal=True) == 10
