"""A database's URL is shown without its secrets."""

from __future__ import annotations

import pytest

from evertalk.pgstore.url import parse_url, shown


def test_the_password_is_never_shown() -> None:
    url = "postgresql://ann:s3cr%40t@db.example.org:5433/chats?sslmode=require&password=x2"
    parsed = parse_url(url)
    assert parsed.where == "db.example.org:5433/chats"
    assert parsed.shown == "postgresql://ann@db.example.org:5433/chats?sslmode=require"
    assert "s3cr" not in shown(url) and "x2" not in shown(url)


def test_defaults_follow_libpq() -> None:
    assert parse_url("postgresql:///mine?host=/run/postgresql").where == "/run/postgresql/mine"
    assert parse_url("postgres://ann@host").database == "ann"
    assert parse_url("postgresql://").where == "localhost/postgres"


def test_not_a_url() -> None:
    with pytest.raises(ValueError, match="scheme is 'mysql'"):
        parse_url("mysql://ann:pw@host/db")
    with pytest.raises(ValueError) as caught:
        parse_url("postgresql://ann:pw@host:notaport/db")
    assert "pw" not in str(caught.value)
    assert shown("postgresql://ann:pw@host:99999999/db") == "(a malformed postgresql:// URL)"
