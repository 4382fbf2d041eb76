"""resources.py: where VERSIONS.lock and patches/ are found (VPATCH_ROOT, the
package's data), and which commands may edit them."""

from pathlib import Path

import pytest
from vpatch import resources
from vpatch.errors import ConfigError

CHECKOUT = Path(__file__).resolve().parents[2]
DATA = CHECKOUT / "src" / "vpatch" / "data"


def data_root(path: Path) -> Path:
    (path / "patches").mkdir(parents=True)
    (path / "VERSIONS.lock").write_text("")
    return path


def test_a_checkout_finds_its_own_data(monkeypatch):
    monkeypatch.delenv("VPATCH_ROOT", raising=False)
    assert resources.root() == DATA
    assert resources.lock_path() == DATA / "VERSIONS.lock"
    assert resources.patches_toml() == DATA / "patches" / "patches.toml"
    assert resources.checkout() == CHECKOUT
    assert resources.writable("vpatch export") == DATA


def test_vpatch_root_names_another_checkout(monkeypatch, tmp_path):
    other = data_root(tmp_path / "other")
    monkeypatch.setenv("VPATCH_ROOT", str(other))
    assert resources.root() == other.resolve()
    assert resources.lock_path() == other.resolve() / "VERSIONS.lock"
    assert resources.patches_toml(tmp_path) == tmp_path / "patches" / "patches.toml"


def test_vpatch_root_without_data_is_a_config_error(monkeypatch, tmp_path):
    (tmp_path / "VERSIONS.lock").write_text("")  # but no patches/
    monkeypatch.setenv("VPATCH_ROOT", str(tmp_path))
    with pytest.raises(ConfigError, match=f"VPATCH_ROOT={tmp_path} holds no VERSIONS.lock"):
        resources.root()


def test_installed_package_data_is_read_only(monkeypatch, tmp_path):
    data = data_root(tmp_path / "site-packages" / "vpatch" / "data")
    monkeypatch.setattr(resources, "PACKAGE_DATA", data.resolve())
    monkeypatch.delenv("VPATCH_ROOT", raising=False)
    assert resources.root() == data.resolve()
    assert resources.checkout(data) is None
    with pytest.raises(ConfigError, match="^vpatch port edits the patch set: run it in a vpatch"):
        resources.writable("vpatch port")


def test_no_data_anywhere_says_how_to_fix_it(monkeypatch, tmp_path):
    monkeypatch.delenv("VPATCH_ROOT", raising=False)
    monkeypatch.setattr(resources, "PACKAGE_DATA", tmp_path / "nowhere")
    with pytest.raises(ConfigError, match="cannot find its VERSIONS.lock and patches/"):
        resources.root()
    data = data_root(tmp_path / "pkg")
    monkeypatch.setattr(resources, "PACKAGE_DATA", data)
    assert resources.root() == data
