"""The three ways to run it: the file copied alone, pip/pipx install, and `uv run` (PEP 723).

Installs build from a copy of the working tree (pip builds in place and would otherwise leave
build/ and *.egg-info in the repository). One venv is made per module and shared by its tests.
Tests needing the package index are skipped, with the reason, when it cannot be reached.
The installs (pip, pipx, uv: a minute of CPU and the index) are slow tests, run by .ci/run
after the README's line (`pytest -m slow`); the file copied alone and the metadata checks are not.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from conftest import ROOT, SCRIPT, TEST_KEY, base_env
from fake_upstream import DEFAULT_TEXT

import openai_responses_mcp as mcp

APP = "openai-responses-mcp"
BIN = "Scripts" if os.name == "nt" else "bin"
SLOW = pytest.mark.slow  # an install from the package index
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "pytest", "version": "0"},
    },
}
NOT_COPIED = shutil.ignore_patterns(
    ".git", "build", "dist", "*.egg-info", "__pycache__", ".*_cache", ".hypothesis", ".venv"
)


def run(cmd: list, tmp_path: Path, *, cwd: Path, timeout: float = 60, **extra_env: str):
    return subprocess.run(
        [str(c) for c in cmd],
        capture_output=True,
        text=True,
        env=base_env(tmp_path, **extra_env),
        cwd=str(cwd),
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def assert_answers_initialize(cmd: list, tmp_path: Path, cwd: Path, **extra_env: str) -> None:
    """Runs `cmd --stdio`, sends initialize then end of input: one reply, exit 0."""
    proc = subprocess.run(
        [str(c) for c in cmd] + ["--stdio"],
        input=json.dumps(INITIALIZE) + "\n",
        capture_output=True,
        text=True,
        env=base_env(tmp_path, **extra_env),
        cwd=str(cwd),
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    (line,) = proc.stdout.splitlines()
    reply = json.loads(line)
    assert reply["id"] == 1
    assert reply["result"]["serverInfo"]["name"] == APP
    assert reply["result"]["serverInfo"]["version"] == mcp.__version__


def assert_answers_version(cmd: list, tmp_path: Path, cwd: Path, **extra_env: str) -> None:
    proc = run([*cmd, "--version"], tmp_path, cwd=cwd, timeout=120, **extra_env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"{APP} {mcp.__version__}"


def assert_asks_the_fake(cmd: list, tmp_path: Path, cwd: Path, fake, **extra_env: str) -> None:
    """A one-shot --ask against the fake API: proves `openai` is importable there."""
    proc = run(
        [*cmd, "--ask", "What does HTTP 404 mean?"],
        tmp_path,
        cwd=cwd,
        timeout=120,
        OPENAI_BASE_URL=fake.base_url,
        **extra_env,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["answer"].startswith(DEFAULT_TEXT)
    assert fake.requests[-1].authorized_with(TEST_KEY)


def find_tool(name: str) -> str | None:
    """A tool on PATH or next to this interpreter (in the test venv)."""
    beside = Path(sys.executable).parent / name
    return shutil.which(name) or (str(beside) if beside.exists() else None)


def copy_repo(dest: Path) -> Path:
    shutil.copytree(ROOT, dest, ignore=NOT_COPIED)
    return dest


def pep723_metadata() -> dict:
    """The `# /// script` block at the top of the module, parsed as PEP 723 specifies."""
    tomllib = pytest.importorskip("tomllib", reason="tomllib needs Python 3.11+")
    pattern = r"(?m)^# /// (?P<type>[a-zA-Z0-9-]+)$\s(?P<content>(^#(| .*)$\s)+)^# ///$"
    blocks = list(re.finditer(pattern, SCRIPT.read_text(encoding="utf-8")))
    (block,) = [m for m in blocks if m.group("type") == "script"]
    content = "".join(
        line[2:] if line.startswith("# ") else line[1:]
        for line in block.group("content").splitlines(keepends=True)
    )
    return tomllib.loads(content)


def pyproject() -> dict:
    tomllib = pytest.importorskip("tomllib", reason="tomllib needs Python 3.11+")
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


# -- (a) the file copied alone ----------------------------------------------------------------


@pytest.fixture
def lone_copy(tmp_path) -> Path:
    folder = tmp_path / "project"
    folder.mkdir()
    shutil.copy2(SCRIPT, folder / SCRIPT.name)
    return folder


def test_copied_file_alone_answers_initialize(tmp_path, lone_copy):
    assert sorted(p.name for p in lone_copy.iterdir()) == [SCRIPT.name]
    assert_answers_initialize([sys.executable, SCRIPT.name], tmp_path, lone_copy)


def test_copied_file_alone_answers_a_question(tmp_path, lone_copy, fake):
    assert_asks_the_fake([sys.executable, SCRIPT.name], tmp_path, lone_copy, fake)


# -- (b) pip and pipx install -----------------------------------------------------------------


@pytest.fixture(scope="module")
def index_reachable(tmp_path_factory) -> None:
    """Skips unless pip, with its configured index, can fetch the build and runtime deps."""
    dest = tmp_path_factory.mktemp("index-probe")
    probe = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "--timeout", "15"]
        + ["--retries", "0", "--dest", str(dest)]
        + pyproject()["build-system"]["requires"]
        + pyproject()["project"]["dependencies"],
        capture_output=True,
        text=True,
        timeout=180,
    )
    if probe.returncode != 0:
        last = (probe.stderr.strip().splitlines() or ["no output"])[-1]
        pytest.skip(f"package index not reachable through pip's configuration: {last}")


@pytest.fixture(scope="module")
def pip_venv(tmp_path_factory, index_reachable) -> Path:
    """A fresh venv with the working tree pip-installed into it (shared by this module)."""
    base = tmp_path_factory.mktemp("pip-install")
    source = copy_repo(base / "src")
    venv = base / "venv"
    # This interpreter's pip installs into the new venv (pip >= 22.3 has --python): the same
    # install, without bootstrapping a second pip into the venv first.
    own_pip = tuple(int(part) for part in importlib.metadata.version("pip").split(".")[:2])
    with_pip = own_pip < (22, 3)
    venv_cmd = [sys.executable, "-m", "venv", *([] if with_pip else ["--without-pip"]), venv]
    subprocess.run([str(c) for c in venv_cmd], check=True, timeout=120)
    pip = [venv / BIN / "python", "-m", "pip"]
    if not with_pip:
        pip = [sys.executable, "-m", "pip", "--python", venv / BIN / "python"]
    install = subprocess.run(
        [str(c) for c in [*pip, "install", "--quiet", "--no-compile", source]],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert install.returncode == 0, install.stdout + install.stderr
    return venv


@SLOW
def test_pip_install_gives_a_console_script_that_prints_the_version(tmp_path, pip_venv):
    assert_answers_version([pip_venv / BIN / APP], tmp_path, tmp_path)


@SLOW
def test_pip_installed_console_script_answers_initialize(tmp_path, pip_venv):
    assert_answers_initialize([pip_venv / BIN / APP], tmp_path, tmp_path)


@SLOW
def test_pip_install_brings_openai_and_the_script_can_answer(tmp_path, pip_venv, fake):
    assert_asks_the_fake([pip_venv / BIN / APP], tmp_path, tmp_path, fake)


@SLOW
def test_installed_metadata_version_is_the_module_version(tmp_path, pip_venv):
    """__version__ is the single source: the distribution's version resolves to it."""
    code = (
        "import importlib.metadata as m, json, openai_responses_mcp as o;"
        f"print(json.dumps([m.version({APP!r}), o.__version__]))"
    )
    proc = run([pip_venv / BIN / "python", "-c", code], tmp_path, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == [mcp.__version__, mcp.__version__]


def test_pyproject_takes_its_version_from_the_module():
    project = pyproject()
    assert "version" not in project["project"]
    assert "version" in project["project"]["dynamic"]
    dynamic = project["tool"]["setuptools"]["dynamic"]["version"]
    assert dynamic == {"attr": "openai_responses_mcp.__version__"}


@pytest.fixture
def pipx(tmp_path) -> tuple[str, dict]:
    path = find_tool("pipx")
    if path is None:
        pytest.skip("pipx is not installed (not on PATH nor beside the test interpreter)")
    home = tmp_path / "pipx"
    dirs = {
        "PIPX_HOME": str(home / "home"),
        "PIPX_BIN_DIR": str(home / "bin"),
        "PIPX_MAN_DIR": str(home / "man"),
    }
    return path, dirs


@SLOW
def test_pipx_install_of_the_tree_gives_a_working_command(tmp_path, pipx, index_reachable):
    path, dirs = pipx
    source = copy_repo(tmp_path / "src")
    proc = run(
        [path, "install", "--pip-args=--no-compile", source],
        tmp_path,
        cwd=tmp_path,
        timeout=600,
        **dirs,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    command = Path(dirs["PIPX_BIN_DIR"]) / APP
    assert_answers_version([command], tmp_path, tmp_path)
    assert_answers_initialize([command], tmp_path, tmp_path)


@SLOW
def test_pipx_install_from_git_url_gives_a_working_command(tmp_path, pipx, index_reachable):
    """`pipx install git+URL`, here with the repository's own committed HEAD as the URL."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs git and a git checkout of the project")
    path, dirs = pipx
    proc = run(
        [path, "install", "--pip-args=--no-compile", f"git+{ROOT.as_uri()}"],
        tmp_path,
        cwd=tmp_path,
        timeout=600,
        **dirs,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    version = run([Path(dirs["PIPX_BIN_DIR"]) / APP, "--version"], tmp_path, cwd=tmp_path)
    assert version.returncode == 0, version.stderr
    assert version.stdout.startswith(f"{APP} ")


# -- (c) uv run through PEP 723 inline metadata -----------------------------------------------


def test_inline_script_metadata_declares_python_and_the_same_dependencies_as_pyproject():
    metadata = pep723_metadata()
    project = pyproject()["project"]
    assert metadata["requires-python"] == project["requires-python"] == ">=3.10"
    assert metadata["dependencies"] == project["dependencies"]
    assert any(dep.startswith("openai") for dep in metadata["dependencies"])


@pytest.fixture(scope="module")
def uv() -> str:
    path = find_tool("uv")
    if path is None:
        pytest.skip("uv is not installed (not on PATH nor beside the test interpreter)")
    index = os.environ.get("UV_DEFAULT_INDEX") or os.environ.get("UV_INDEX_URL")
    url = (index or "https://pypi.org/simple").rstrip("/") + "/openai/"
    try:
        with urllib.request.urlopen(url, timeout=10):
            pass
    except OSError as exc:
        pytest.skip(f"uv's package index {url} is not reachable: {exc}")
    return path


@pytest.fixture
def uv_copy(tmp_path) -> Path:
    folder = tmp_path / "uv-project"
    folder.mkdir()
    shutil.copy2(SCRIPT, folder / SCRIPT.name)
    return folder


@SLOW
def test_uv_run_prints_the_version(tmp_path, uv, uv_copy):
    assert_answers_version([uv, "run", "--quiet", SCRIPT.name], tmp_path, uv_copy)


@SLOW
def test_uv_run_stdio_answers_initialize(tmp_path, uv, uv_copy):
    assert_answers_initialize([uv, "run", "--quiet", SCRIPT.name], tmp_path, uv_copy)


@SLOW
def test_uv_run_installs_openai_from_the_inline_metadata(tmp_path, uv, uv_copy, fake):
    assert_asks_the_fake([uv, "run", "--quiet", SCRIPT.name], tmp_path, uv_copy, fake)
