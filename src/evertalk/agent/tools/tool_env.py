"""The environment a tool's command runs with: built from an allow-list, never copied whole.

A command's output goes into the log, which is kept forever, summarized and sent to the model;
a variable it can print is a variable the model can read. So a command sees only what a shell
needs to work (where programs and files are, the language, the terminal) and the usual places of
toolchains (`*_HOME`, `*_PATH`, `*_ROOT`), and of those never one that looks like a credential
(`secret_env.looks_secret`). A variable the user names in `tools.shell_env` is passed as well,
a credential included: the user chose it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Final

from evertalk import secret_env

ALLOWED_NAMES: Final = frozenset(
    {
        "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TERM", "COLORTERM",
        "TZ", "TMPDIR", "EDITOR", "VISUAL", "PAGER", "NO_COLOR", "FORCE_COLOR", "HOSTNAME",
        "GOPATH", "GOROOT", "GOBIN", "GOFLAGS", "GOPROXY", "PYTHONPATH", "VIRTUAL_ENV",
        "CONDA_PREFIX", "CONDA_DEFAULT_ENV", "NVM_DIR", "CC", "CXX", "CFLAGS", "CXXFLAGS",
        "LDFLAGS", "MAKEFLAGS", "PKG_CONFIG_PATH", "SSL_CERT_FILE", "SSL_CERT_DIR",
        "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS", "HTTP_PROXY",
        "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy",
    }
)  # fmt: skip
"""Variables a command may see."""
ALLOWED_PREFIXES: Final = ("LC_", "XDG_")
ALLOWED_SUFFIXES: Final = ("_HOME", "_PATH", "_ROOT")


def allowed(name: str, value: str) -> bool:
    """Whether the allow-list passes `name=value` to a command."""
    listed = (
        name in ALLOWED_NAMES
        or name.startswith(ALLOWED_PREFIXES)
        or name.endswith(ALLOWED_SUFFIXES)
    )
    return listed and not secret_env.looks_secret(name, value)


def tool_environment(
    passed: Iterable[str] = (), given: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The environment for a command: the allowed part of `given` (by default what this process
    was started with), and the variables of `passed` that are set."""
    source = secret_env.environment() if given is None else given
    env = {name: value for name, value in source.items() if allowed(name, value)}
    env.update({name: source[name] for name in passed if name in source})
    return env
