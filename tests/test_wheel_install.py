"""evertalk installed like a tool: the wheel that `python -m build` makes, installed into a fresh
virtual environment, runs on its own: `evertalk --version`, `memory status`, the browse page (a
file of the wheel's that is not Python) and a `-p` turn against the fake server, with nothing
imported from this checkout.

No network: the wheel is built without an isolated environment (the build backend is the one
installed here), and the fresh environment reaches the dependencies already installed here
through a path file, so that only the wheel itself is installed into it (by pip, run by its own
interpreter, so that the `evertalk` script is its own)."""

from __future__ import annotations

import os
import site
import subprocess
import sys
import sysconfig
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from evertalk import __version__
from fakes import AnthropicFake, Script, serve
from fakes import chat as answer

ROOT = Path(__file__).resolve().parent.parent
CLEAN = ("EVERTALK_", "ANTHROPIC_", "OPENAI_", "OPENROUTER_", "PYTHON")
API_KEY = "sk-ant-test-SECRET-0123456789"
NON_PYTHON = ("evertalk/browse/page.html", "evertalk/browse/page.css", "evertalk/browse/page.js")


def run(command: list[str], **options: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, capture_output=True, text=True, timeout=120, **options)  # type: ignore[call-overload, no-any-return]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    built = run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(out)],
        cwd=ROOT,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    (found,) = out.glob("evertalk-*.whl")
    return found


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The fresh environment's `bin` folder, with the wheel installed in it."""
    venv = tmp_path_factory.mktemp("tool") / "venv"
    made = run([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    assert made.returncode == 0, made.stderr
    python = venv / "bin" / "python"
    purelib = run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"])
    # the dependencies installed here, after the environment's own site-packages (a path file
    # adds the folders themselves: the editable install of this checkout in them is not read)
    here = [*site.getsitepackages(), sysconfig.get_path("purelib")]
    (Path(purelib.stdout.strip()) / "dependencies.pth").write_text("\n".join(dict.fromkeys(here)))
    pip = [str(python), "-m", "pip", "install", "--no-deps", "--no-index", "--ignore-installed"]
    done = run([*pip, "--disable-pip-version-check", "--quiet", str(wheel)], env=environment())
    assert done.returncode == 0, done.stdout + done.stderr
    yield venv / "bin"


def environment(home: Path | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(CLEAN)}
    env["PATH"] = os.pathsep.join(
        p for p in env.get("PATH", "").split(os.pathsep) if ".venv" not in p
    )
    if home is not None:
        env["EVERTALK_HOME"] = str(home)
    return env


def test_the_wheel_carries_every_file_it_needs(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    assert set(NON_PYTHON) <= names
    assert "evertalk/cli.py" in names and not any("__pycache__" in name for name in names)
    entry_points = next(name for name in names if name.endswith("entry_points.txt"))
    # the entry seals the credentials away before the command runs (secret_env)
    assert "evertalk = evertalk.cli:entry" in zipfile.ZipFile(wheel).read(entry_points).decode()


def test_the_installed_tool_runs_on_its_own(installed: Path, tmp_path: Path) -> None:
    evertalk = str(installed / "evertalk")
    version = run([evertalk, "--version"], env=environment())
    assert version.stdout == f"evertalk {__version__}\n", version.stderr
    # what runs is the wheel's copy, not this checkout's
    where = run([str(installed / "python"), "-c", "import evertalk; print(evertalk.__file__)"])
    assert where.stdout.startswith(str(installed.parent)), where.stdout

    home = tmp_path / "home"
    empty = run([evertalk, "memory", "status"], env=environment(home))
    assert empty.returncode == 0 and "No chat yet" in empty.stdout, empty.stderr
    fake = AnthropicFake(Script().push(answer("Installed and answering.")))
    work = tmp_path / "work"
    work.mkdir()
    with serve(fake.app) as url:
        home.mkdir(mode=0o700)
        (home / "config.toml").write_text(
            f'provider = "anthropic"\nbase_url = "{url}"\napi_key = "{API_KEY}"\n'
        )
        (home / "config.toml").chmod(0o600)
        turn = run([evertalk, "-p", "hello from the wheel"], env=environment(home), cwd=work)
        run([evertalk, "service", "stop"], env=environment(home))
    assert (turn.returncode, turn.stdout) == (0, "Installed and answering.\n"), turn.stderr
    status = run([evertalk, "memory", "status"], env=environment(home))
    assert status.returncode == 0, status.stderr
    assert "messages" in status.stdout and " 2" in status.stdout
    page = tmp_path / "memory.html"
    browse = run([evertalk, "memory", "browse", "--out", str(page)], env=environment(home))
    assert browse.returncode == 0, browse.stderr
    assert "Installed and answering." in page.read_text() and "<script" in page.read_text()
