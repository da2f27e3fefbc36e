"""`[store] url`: read from the file, refused in one line unless it is a postgresql:// URL, saved
with the rest of the file kept, and its password never shown by the settings or their errors."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from dataclasses import replace
from pathlib import Path

import pytest

from evertalk.config import (
    Config,
    ConfigError,
    load_config,
    save_config,
    save_store_url,
    secret_values,
)
from evertalk.config_schema import SettingProblem, check_setting

PASSWORD = "Pa55-WORD-0123456789"
URL = f"postgresql://me:{PASSWORD}@db.example.org:5433/evertalk"
REFUSED = "`store.url` must be a postgresql:// or postgres:// URL"


def write(home: Path, text: str) -> Path:
    home.mkdir(parents=True, exist_ok=True)
    path = home / "config.toml"
    path.write_text(text, encoding="utf-8")
    return path


def error_of(home: Path) -> str:
    with pytest.raises(ConfigError) as caught:
        load_config(home, {})
    message = str(caught.value)
    assert "\n" not in message
    return message


# --- reading -------------------------------------------------------------------------------


@pytest.mark.parametrize("url", [URL, "postgres://db.example.org/evertalk", "postgresql://"])
def test_the_store_url_is_read(tmp_path: Path, url: str) -> None:
    write(tmp_path, f'model = "claude-opus-5-5"\n\n[store]\nurl = "{url}"\n')
    assert load_config(tmp_path, {}).store_url == url


def test_without_it_the_chat_stays_in_files(tmp_path: Path) -> None:
    assert load_config(tmp_path, {}).store_url is None
    write(tmp_path, "[store]\n")
    assert load_config(tmp_path, {}).store_url is None


@pytest.mark.parametrize(
    "value",
    [
        f'"mysql://me:{PASSWORD}@db/evertalk"',
        f'"https://me:{PASSWORD}@db/evertalk"',
        f'"host=db password={PASSWORD}"',
        f'"me:{PASSWORD}@db/evertalk"',
        f'"postgresql://me:{PASSWORD}@db/ever talk"',
        f'"POSTGRESQL://me:{PASSWORD}@db/evertalk"',
        '"pg"',  # short values are shown for the other settings: not this one
        '""',
        "5",
        f'["{URL}"]',
    ],
)
def test_anything_else_is_refused_in_one_line_naming_the_setting(
    tmp_path: Path, value: str
) -> None:
    path = write(tmp_path, f"[store]\nurl = {value}\n")
    assert error_of(tmp_path) == f"{path}: {REFUSED}"


def test_the_check_of_one_value_says_the_same() -> None:
    assert check_setting("store.url", URL) == URL
    with pytest.raises(SettingProblem) as caught:
        check_setting("store.url", "mysql://db/evertalk")
    assert caught.value.line("URL") == f"URL: {REFUSED}"


def test_how_long_a_lease_lasts(tmp_path: Path) -> None:
    assert load_config(tmp_path, {}).store_lease_seconds == 30.0
    write(tmp_path, f'[store]\nurl = "{URL}"\nlease_seconds = 5\n')
    assert load_config(tmp_path, {}).store_lease_seconds == 5.0
    path = write(tmp_path, f'[store]\nurl = "{URL}"\nlease_seconds = 1\n')
    assert error_of(tmp_path) == (
        f"{path}: `store.lease_seconds` must be a number of seconds from 3 to 3600, not 1"
    )


# --- the password never shows ----------------------------------------------------------------


def test_the_password_is_not_in_the_configs_repr_or_str(tmp_path: Path) -> None:
    write(tmp_path, f'[store]\nurl = "{URL}"\n')
    config = load_config(tmp_path, {})
    shown = repr(config) + str(config) + f"{config}" + repr(config.origin)
    assert PASSWORD not in shown
    assert PASSWORD not in repr(replace(config, store_url=URL + "?sslmode=require"))


@pytest.mark.parametrize(
    "text",
    [
        f'[store]\nurl = "{URL}"\n[tools]\nshell = "sometimes"\n',  # a bad value nearby
        f'[store]\nurl = "{URL}\n',  # an unterminated string
        f"[store]\nurl = {URL}\n",  # no quotes
        f'[store]\nurl = "{URL}"\nurl = "{URL}"\n',  # twice
        f'[store]\nurl = "{URL} "\n',  # a space at its end
        f'[store]\nurl = "{URL.replace("postgresql", "mysql")}"\n',  # another database
        f'store = "{URL}"\n',  # not a table
        f'url = "{URL}"\n',  # outside its table
        f'[memory]\nurl = "{URL}"\n',  # in the wrong table
        f'base_url = "{URL}"\n',  # in the wrong setting
        f'model = "{URL} "\n',
    ],
)
def test_errors_near_the_url_do_not_repeat_its_password(tmp_path: Path, text: str) -> None:
    write(tmp_path, text)
    assert PASSWORD not in error_of(tmp_path)


def test_a_traceback_does_not_show_the_password(tmp_path: Path) -> None:
    write(tmp_path, f'[store]\nurl = "{URL}"\n[tools]\nshell = "sometimes"\n')
    script = "import sys; from pathlib import Path; from evertalk.config import load_config; "
    script += "load_config(Path(sys.argv[1]), {})"
    result = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path)], capture_output=True, text=True
    )
    assert result.returncode == 1 and "ConfigError" in result.stderr
    assert PASSWORD not in result.stderr + result.stdout


def test_saving_a_bad_url_does_not_repeat_it(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        save_config(tmp_path, Config(store_url=f"mysql://me:{PASSWORD}@db/evertalk"))
    assert str(caught.value) == f"config: {REFUSED}"
    assert not (tmp_path / "config.toml").exists()


def test_the_password_is_redacted_with_the_other_secrets(tmp_path: Path) -> None:
    """What a tool prints (`cat config.toml`) and what an error says go through these."""
    encoded = "pa%40ss-0123456789"
    url = f"postgresql://me:{encoded}@db/evertalk?sslpassword=key-pass-9876"
    found = secret_values(Config(store_url=url), {})
    assert {encoded, "pa@ss-0123456789", "key-pass-9876"} <= set(found)
    assert secret_values(Config(store_url="postgresql://me@db/evertalk"), {}) == []


# --- saving ----------------------------------------------------------------------------------

MINE = """\
# my settings
model = "claude-opus-5-5"   # the one I like

[tools]
shell = "allow"   # I trust it
"""


def test_saving_the_url_keeps_the_rest_of_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, MINE)
    path.chmod(0o644)
    save_store_url(tmp_path, URL)
    text = path.read_text()
    assert text.startswith(MINE)
    assert tomllib.loads(text) == {**tomllib.loads(MINE), "store": {"url": URL}}
    assert path.stat().st_mode & 0o777 == 0o600
    assert load_config(tmp_path, {}).store_url == URL
    assert [p.name for p in tmp_path.iterdir()] == ["config.toml"]  # no temporary file left


def test_saving_the_url_into_a_home_without_a_file(tmp_path: Path) -> None:
    home = tmp_path / "home"
    save_store_url(home, URL)
    assert tomllib.loads((home / "config.toml").read_text()) == {"store": {"url": URL}}


def test_the_url_round_trips_through_other_saves(tmp_path: Path) -> None:
    """The setup form and /model save a loaded config: the url stays as it was."""
    write(tmp_path, f'[store]\nurl = "{URL}"\n')
    loaded = load_config(tmp_path, {})
    save_config(tmp_path, replace(loaded, model="claude-opus-5-5"))
    assert load_config(tmp_path, {}).store_url == URL
    save_config(tmp_path, replace(load_config(tmp_path, {}), store_url=None))
    saved = tomllib.loads((tmp_path / "config.toml").read_text())
    assert "url" not in saved.get("store", {})  # None: back to the files


def test_saving_refuses_a_bad_url_and_writes_nothing(tmp_path: Path) -> None:
    path = write(tmp_path, MINE)
    with pytest.raises(ConfigError, match=r"store\.url"):
        save_store_url(tmp_path, "mysql://db/evertalk")
    assert path.read_text() == MINE
