from pathlib import Path

import pytest

from advisor_chat.config import load_settings
from advisor_chat.errors import ConfigError, InputError


def test_precedence_flag_over_env_over_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ADVISOR_HOME", str(tmp_path))
    (tmp_path / "config.toml").write_text('model = "from-file"\nworkers = 3\n')
    assert load_settings().model == "from-file"
    monkeypatch.setenv("ADVISOR_MODEL", "from-env")
    s = load_settings()
    assert s.model == "from-env" and s.workers == 3
    assert load_settings(model="from-flag").model == "from-flag"
    assert load_settings().cache_dir == tmp_path / "cache"


def test_bad_setting_is_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ADVISOR_WORKERS", "many")
    with pytest.raises(ConfigError, match="workers"):
        load_settings()


def test_input_error_names_file_and_remedy() -> None:
    err = InputError("cannot read", path="/x/kernel_details.csv", remedy="Re-export it")
    assert "/x/kernel_details.csv" in str(err) and "Re-export it" in str(err)
