"""--doctor's client lines run as printed under every installer (issue 39).

Each way in installs the server as a person would, on the machine tests/test_readme.py sets up
(a fresh HOME, the local package index on 127.0.0.1, the fake API, no network), runs its
`--doctor`, and then starts what the printed `claude mcp add` line adds: the command after its
`--`, with only its `--env` variables and the client's PATH, as Claude Code would; that server
must answer `initialize`. Codex's line and Cursor's entry hold the same command and variables
(tests/test_doctor.py). Installs from the index: slow.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from test_doctor import INITIALIZE, read_as_bash_does
from test_readme import (  # noqa: F401 - fixtures, used by name
    APP,
    NOT_COPIED,
    ROOT,
    Newcomer,
    closed_port,
    doctor_lines,
    home,
    index,
    machine,
)

import openai_responses_mcp as mcp

pytestmark = pytest.mark.slow

FILE = "openai_responses_mcp.py"
# Each way: the lines that install it and run its --doctor, in a HOME holding ~/src (a copy of
# this tree) and ~/project/openai_responses_mcp.py (the file copied alone).
WAYS = {
    "uvx from a folder": [f"uvx --from ~/src {APP} --doctor"],
    "uvx from git": [f"uvx --from git+file://$HOME/src.git {APP} --doctor"],
    "pipx from a folder": [f"pipx install ~/src && ~/.local/bin/{APP} --doctor"],
    "pip in a venv": [
        f"python3 -m venv ~/v && ~/v/bin/pip install -q {APP}",
        f"~/v/bin/{APP} --doctor",
    ],
    "the file copied alone": [
        "python3 -m venv ~/v && ~/v/bin/pip install -q openai",
        f"~/v/bin/python ~/project/{FILE} --doctor",
    ],
    "uv run of the file": [f"uv run ~/project/{FILE} --doctor"],
}  # fmt: skip


@pytest.fixture
def newcomer(home, index) -> Newcomer:  # noqa: F811 - test_readme's fixtures
    folder, env = home
    shutil.copytree(ROOT, folder / "src", ignore=NOT_COPIED)
    (folder / "project").mkdir()
    shutil.copy2(ROOT / FILE, folder / "project" / FILE)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run(["git", "init", "-q", str(folder / "src.git")], check=True)
    shutil.copytree(folder / "src", folder / "src.git", dirs_exist_ok=True)
    for args in (["add", "-A"], ["commit", "-q", "-m", "the tree"]):
        subprocess.run([*git, *args], cwd=folder / "src.git", check=True, env=env)
    return Newcomer(folder, env)


def start_as_claude_code(words: list[str], person: Newcomer, cwd: Path) -> dict:
    """Runs what `claude mcp add NAME … --env K=V … -- COMMAND…` adds, as Claude Code starts
    it: COMMAND with the K=V variables over a client's own few (PATH, HOME); its reply."""
    cut = words.index("--")
    pairs = dict(words[i + 1].split("=", 1) for i in range(cut) if words[i] == "--env")
    env = {"PATH": person.env["PATH"], "HOME": str(person.home), **pairs}
    for name in ("UV_CACHE_DIR", "UV_DEFAULT_INDEX", "UV_NO_CONFIG", "UV_PYTHON"):
        env[name] = person.env[name]  # a uvx line may resolve again: the same local index
    proc = subprocess.run(
        words[cut + 1 :], input=json.dumps(INITIALIZE) + "\n", capture_output=True, text=True,
        env=env, cwd=str(cwd), timeout=240,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.splitlines()[0])


@pytest.mark.parametrize("way", list(WAYS))
def test_the_client_line_doctor_prints_runs_as_printed(way, newcomer, upstream):
    for line in WAYS[way]:
        shown = newcomer.run(way, line)
    assert "All checks passed." in shown, shown
    printed = [row.strip() for row in shown.splitlines() if row.strip().startswith("claude mcp")]
    words = read_as_bash_does(printed[0], {**newcomer.env, "HOME": str(newcomer.home)})
    assert words[3] == mcp.CLIENT_NAME and doctor_lines(shown), shown
    command = words[words.index("--") + 1 :]
    if way.startswith("uvx"):  # where it came from, or the line runs the index's release
        source = str(newcomer.home / "src")
        assert command[1:3] == ["--from", source if way.endswith("folder") else
                                f"git+file://{source}.git"], command  # fmt: skip
    if way == "the file copied alone":  # from its cached bytecode, by the loader
        assert command[1:3] == ["-c", mcp.DROPIN_LOADER] and command[-1] == "--stdio", command
        assert command[3] == str(newcomer.home / "project" / FILE), command
        cache = newcomer.home / "project" / "__pycache__"
        assert any(cache.glob(f"{FILE[:-3]}.*.pyc")), shown
    elsewhere = newcomer.home / "elsewhere"  # a client starts it in a folder of its own
    elsewhere.mkdir(exist_ok=True)
    reply = start_as_claude_code(words, newcomer, elsewhere)
    assert reply["result"]["serverInfo"]["name"] == APP, reply
    assert reply["result"]["serverInfo"]["version"] == mcp.__version__
    assert not os.path.exists(elsewhere / "__pycache__")
