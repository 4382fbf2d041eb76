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
