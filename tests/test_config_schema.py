"""The settings as types: every setting has a type, a refusal in words, and no key goes unseen."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from evertalk import config
from evertalk.config_schema import (
    EXPECTED,
    HIDDEN,
    KEYS,
    TABLES,
    SettingProblem,
    SettingsFile,
    check_setting,
    read_settings,
)

TOML_VALUES = st.one_of(
    st.booleans(),
    st.integers(),
    st.floats(),
    st.text(max_size=40),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=2),
)


def test_the_loader_reads_by_these_types() -> None:
    assert config.KEYS is KEYS and config.TABLES is TABLES
    assert config.ConfigError is not SettingProblem


def test_every_setting_has_a_refusal_in_words() -> None:
    assert set(EXPECTED) == set(KEYS)
    assert KEYS[:5] == ("provider", "model", "base_url", "api_key", "workdir")


def test_every_table_refuses_keys_it_does_not_know() -> None:
    assert SettingsFile.__struct_config__.forbid_unknown_fields
    for name in TABLES:
        table = getattr(msgspec.convert({name: {}}, SettingsFile), name)
        assert type(table).__struct_config__.forbid_unknown_fields, name


def test_the_file_gives_only_what_it_holds() -> None:
    flat, mcp = read_settings({"model": "m", "memory": {"deadline": 5}, "mcp": {"servers": {}}})
    assert flat == {"model": "m", "memory.deadline": 5.0}
    assert mcp == {"servers": {}}
    assert read_settings({}) == ({}, None)


@pytest.mark.parametrize(
    ("data", "line"),
    [
        ({"memory": {"modle": "x"}}, "f: unknown setting `memory.modle`"),
        ({"colour": "blue"}, "f: unknown setting `colour`"),
        ({"memory": 3}, "f: `memory` must be a table ([memory])"),
        ({"memory": {"deadline": -1}}, "f: `memory.deadline` must be a positive number of seconds"),
        (
            {"memory": {"deadline": float("inf")}},
            "f: `memory.deadline` must be a number of seconds",
        ),
        ({"api_key": 5}, "f: `api_key` must be a non-empty string"),
        ({"store": {"url": "pg://h/db"}}, "f: `store.url` must be a postgresql:// or postgres://"),
        ({"store": "postgresql://h/db"}, "f: `store` must be a table ([store])"),
    ],
)
def test_a_refusal_names_the_setting(data: dict[str, object], line: str) -> None:
    with pytest.raises(SettingProblem) as caught:
        read_settings(data)
    assert caught.value.line("f").startswith(line)


@given(st.sampled_from(KEYS), TOML_VALUES)
def test_any_value_is_taken_or_refused_in_one_line(key: str, value: object) -> None:
    try:
        taken = check_setting(key, value)
    except SettingProblem as problem:
        line = problem.line("where")
        assert line.startswith(f"where: `{key}` must be ") and "\n" not in line
        if key in HIDDEN:  # the value is never repeated
            assert line == f"where: `{key}` must be {EXPECTED[key]}"
    else:
        assert taken == value
