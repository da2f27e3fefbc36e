"""`evertalk -p` through a running service loads only a client's parts: the socket, the typed
frames and the printer. Run in a fresh interpreter against a served home, it loads neither the
service's side (the agent, the providers and their SDKs), nor the app, nor the settings' reader,
nor the ledger (the budget is the service's to check), nor what only starting a service needs."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.test_turn_support import workdir_beside
from fakes import AnthropicFake
from fakes import chat as answer
from served_home import environment, fake, run, served_home

__all__ = ["fake"]  # the fixture, used by name

RUN_P = """
import json, sys
from evertalk.cli import entry
out = sys.argv.pop()
sys.argv[1:] = ["-p", "hi"]
code = entry()
with open(out, "w") as file:
    json.dump({"code": code, "modules": sorted(sys.modules)}, file)
"""

NOT_LOADED = (
    # the service's side and the app
    "anthropic",
    "openai",
    "httpx",
    "textual",
    "anyio",
    "evertalk.agent",
    "evertalk.providers",
    "evertalk.compactor",
    "evertalk.service",
    "evertalk.tui",
    "evertalk.chat",
    "evertalk.store",
    # the settings (the service reads them) and the spending (the service checks the budget)
    "evertalk.config",
    "evertalk.config_schema",
    "tomllib",
    "evertalk.ledger",
    "evertalk.budget",
    # what only starting a service, or a deep home's socket, needs
    "subprocess",
    "evertalk.service_hold",
    "evertalk.service_opening",
    "tempfile",
    "shutil",
    # the hello's salt and the message's key come from os.urandom
    "secrets",
    "random",
)


@pytest.fixture
def home(tmp_path: Path, fake: AnthropicFake) -> Iterator[Path]:
    with served_home(tmp_path, fake, stop=True) as home:
        yield home


def is_one_of(name: str, tops: tuple[str, ...]) -> bool:
    return any(name == top or name.startswith(top + ".") for top in tops)


def test_p_on_a_running_service_loads_only_the_client(
    home: Path, fake: AnthropicFake, tmp_path: Path
) -> None:
    fake.behaviour.push(answer("Started."), answer("Hello."))  # type: ignore[attr-defined]
    assert run(home, "-p", "start the service").stdout == "Started.\n"
    out = tmp_path / "modules.json"
    done = subprocess.run(
        [sys.executable, "-c", RUN_P, str(out)],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=environment(home),
        cwd=workdir_beside(home),
        timeout=60,
    )
    assert (done.returncode, done.stdout) == (0, "Hello.\n"), done.stderr
    modules = json.loads(out.read_text())["modules"]
    # the listing is of a real run: it went through the client's connection and printer
    assert {"evertalk.client.connection", "evertalk.client.printers", "msgspec"} <= set(modules)
    assert [name for name in modules if is_one_of(name, NOT_LOADED)] == []
