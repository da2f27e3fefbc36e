"""PGPASSWORD reaches the database driver though evertalk's processes take it out of their
environment (`secret_env`), where libpq would have looked for it."""

from __future__ import annotations

import os
import subprocess
import sys
from urllib.parse import urlsplit, urlunsplit

from pg_server import PgServer

CONNECT = """
import os
from evertalk import secret_env
secret_env.seal()
assert "PGPASSWORD" not in os.environ  # libpq alone would find no password
from evertalk.pgstore.connect import connect
connect(os.environ["URL"]).close()
print("connected")
"""


def without_password(url: str) -> str:
    parts = urlsplit(url)
    netloc = f"{parts.username}@{parts.hostname}:{parts.port}"
    return urlunsplit(parts._replace(netloc=netloc))


def test_a_sealed_pgpassword_still_connects(pg_server: PgServer) -> None:
    env = {"PATH": os.environ["PATH"], "URL": without_password(pg_server.url())}
    run = [sys.executable, "-c", CONNECT]
    refused = subprocess.run(run, env=env, capture_output=True, text=True, check=False)
    assert refused.returncode != 0 and "password" in refused.stderr  # the check can fail
    env["PGPASSWORD"] = pg_server.password
    done = subprocess.run(run, env=env, capture_output=True, text=True, check=False)
    assert done.stdout == "connected\n", done.stderr
