"""The config.toml of a scratch home, as evertalk writes one: a provider, its key, the memory
model, and whatever sections a test adds."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

API_KEY = "sk-ant-test-SECRET-0123456789"
MODEL = "claude-sonnet-5-5"
MEMORY_MODEL = "claude-haiku-5-5"


def write_config(
    home: Path,
    *,
    settle: float = 20,
    base_url: str | None = None,
    api_key: str = API_KEY,
    model: str = MODEL,
    memory_model: str = MEMORY_MODEL,
    more: Sequence[str] = (),
    **tools: str,
) -> None:
    """Write `home`'s config (0600); `tools`: a policy by tool name; `more`: lines at the end
    (another section)."""
    home.mkdir(parents=True, exist_ok=True)
    lines = ['provider = "anthropic"', f'model = "{model}"', f'api_key = "{api_key}"']
    if base_url is not None:
        lines.append(f'base_url = "{base_url}"')
    lines += ["", "[memory]", f'model = "{memory_model}"', f"settle_timeout = {settle}"]
    if tools:
        lines += ["", "[tools]", *(f'{name} = "{policy}"' for name, policy in tools.items())]
    lines += more
    (home / "config.toml").write_text("\n".join(lines) + "\n")
    (home / "config.toml").chmod(0o600)  # as evertalk writes it: a key others can read is warned of
