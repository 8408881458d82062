"""The README's lines, run as a newcomer runs them (issue 33): a person following the README, and
the quick start of docs/getting-started.md, from a fresh machine reaches a first answer with no
guess.

The lines are read from the documents themselves (their ```sh blocks, and the install lines they
name inline: the README's pipx lines, getting-started's way when pipx is not found), never copied
here, so a doc that changes into something that does not work turns this red. Each line runs as
written with `bash`, on a pseudo-terminal as a person's shell has, in a HOME of its own, with no
network:

- the package index is a PEP 503 "simple" index on 127.0.0.1 served by this module, holding the
  wheel of this tree (built offline) and wheels of `openai` and pipx and everything they need,
  each zipped from the distribution installed in the test venv;
- the installers find it only through the environment (PIP_INDEX_URL, UV_DEFAULT_INDEX), with
  the machine's own pip and uv configuration shut out, and every proxy variable points at a
  closed port on 127.0.0.1 (NO_PROXY keeps 127.0.0.1 direct): a try for PyPI fails loudly;
- the API is the fake upstream (tests/fake_upstream.py), through OPENAI_BASE_URL.

Left out: the README's test line (it is what runs the suite), and the lines a real client app
runs (`claude mcp add ...`, `codex mcp add ...`): those are checked here only for what they say
(the server's name, the command after `--` being the one --doctor prints).
tests/test_docs.py already checks that every name in the docs is the one --doctor prints, and
tests/test_doctor.py the client lines' form for each installer on made-up paths; this file
runs the real installers.
"""

from __future__ import annotations

import base64
import contextlib
import csv
import hashlib
import http.server
import importlib.metadata
import io
import json
import os
import re
import select
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import zipfile
from pathlib import Path

import pytest
from conftest import ROOT, TEST_KEY
from fake_upstream import SEARCHED
from packaging.requirements import Requirement

import openai_responses_mcp as mcp

pytestmark = pytest.mark.slow
pty = pytest.importorskip("pty", reason="a pseudo-terminal is POSIX's")
if shutil.which("bash") is None:
    pytest.skip("the docs' lines are bash lines, and bash is not here", allow_module_level=True)

APP = mcp.SERVER_NAME
README = ROOT / "README.md"
GETTING_STARTED = ROOT / "docs" / "getting-started.md"
# Where a line's words say a person opens a new terminal after it (`pipx ensurepath`).
NEW_TERMINAL = re.compile(r"new terminal")
# Lines that need a real client app: checked for what they say, not run.
CLIENT_APP = ("claude ", "codex ")
NOT_COPIED = shutil.ignore_patterns(
    ".git", "build", "dist", "*.egg-info", "__pycache__", ".*_cache", ".hypothesis", ".venv"
)
# The one placeholder a person fills in: the key.
PLACEHOLDER_KEY = "sk-..."


# -- Reading the lines out of the documents ---------------------------------------------------


def sh_blocks(text: str, marked: str | None = None) -> list[list[str]]:
    """The ```sh blocks of a markdown text, each as its lines, leaving out the blocks a marker
    names: `<!-- test-command` (the README's test line runs the suite itself) and
    `<!-- from-a-clone` (run in a clone of this tree, by the tests of that route). With
    `marked`, only the blocks under that marker."""
    blocks = []
    for match in re.finditer(r"(?ms)^```sh\n(.*?)^```", text):
        before = text[: match.start()].rstrip().splitlines()
        marker = before[-1] if before and before[-1].startswith("<!-- ") else ""
        if (marked is None and marker) or (marked is not None and not marker.startswith(marked)):
            continue
        blocks.append([line for line in match.group(1).splitlines() if line.strip()])
    return blocks


def inline_lines(text: str, paragraph_with: str, starts: str) -> list[str]:
    """The inline code spans starting with `starts` in the paragraph containing
    `paragraph_with`, in order."""
    (paragraph,) = [p for p in re.split(r"\n\s*\n", text) if paragraph_with in p]
    spans = [" ".join(span.split()) for span in re.findall(r"`([^`]+)`", paragraph)]
    return [span for span in spans if span.startswith(starts)]  # a line break in one is a space


def readme() -> str:
    return README.read_text(encoding="utf-8")


def runnable_blocks(path: Path) -> list[list[str]]:
    """The blocks a newcomer runs: all but the client apps' lines."""
    blocks = sh_blocks(path.read_text(encoding="utf-8"))
    return [b for b in blocks if not all(line.startswith(CLIENT_APP) for line in b)]


# -- A package index on 127.0.0.1 -------------------------------------------------------------


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def runtime_closure(name: str, seen: dict | None = None) -> dict:
    """The installed distributions `name` needs on this platform: name -> Distribution."""
    seen = {} if seen is None else seen
    dist = importlib.metadata.distribution(name)
    key = normalize(dist.metadata["Name"])
    if key in seen:
        return seen
    seen[key] = dist
    for text in dist.requires or []:
        requirement = Requirement(text)
        if requirement.marker and not requirement.marker.evaluate({"extra": ""}):
            continue
        runtime_closure(requirement.name, seen)
    return seen


def record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
    return "sha256=" + digest.decode()


def wheel_of_installed(dist: importlib.metadata.Distribution, dest: Path) -> Path:
    """The wheel an installed distribution came from, made again from the files its RECORD
    lists: the package files and its .dist-info, with RECORD's hashes computed anew. Files
    outside site-packages (console scripts) are left out: installers write those again from
    entry_points.txt. The tag is the one its WHEEL file names."""
    info = Path(dist._path)  # the .dist-info directory
    site = info.parent
    wheel_file = (info / "WHEEL").read_text(encoding="utf-8")
    tags = [
        line.split(":", 1)[1].strip() for line in wheel_file.splitlines() if line.startswith("Tag:")
    ]
    parts = [list(dict.fromkeys(tag.split("-")[i] for tag in tags)) for i in range(3)]
    tag = "-".join(".".join(part) for part in parts)
    name = info.name[: -len(".dist-info")]
    target = dest / f"{name}-{tag}.whl"
    unwanted = {"RECORD", "INSTALLER", "REQUESTED", "direct_url.json"}
    rows = []
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as whl:
        for file in dist.files or []:
            if file.parts[0] == ".." or "__pycache__" in file.parts or file.suffix == ".pyc":
                continue
            if file.parts[0] == info.name and file.name in unwanted:
                continue
            data = (site / file).read_bytes()
            whl.writestr(file.as_posix(), data)
            rows.append((file.as_posix(), record_hash(data), str(len(data))))
        record = f"{info.name}/RECORD"
        out = io.StringIO()
        csv.writer(out, lineterminator="\n").writerows([*rows, (record, "", "")])
        whl.writestr(record, out.getvalue())
    return target


def build_this_tree(dest: Path, scratch: Path) -> Path:
    """The wheel of this working tree, built offline: the setuptools of the test venv
    (pyproject's build-system) without build isolation, from a copy of the files it packs."""
    source = scratch / "src"  # pip would leave build/ and *.egg-info in the tree itself
    shutil.copytree(ROOT, source, ignore=NOT_COPIED)
    env = {**os.environ, "PIP_CONFIG_FILE": os.devnull, "PIP_NO_INDEX": "1"}
    env.pop("PIP_FIND_LINKS", None)
    build = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q"]
    proc = subprocess.run(
        [*build, "-w", str(dest), str(source)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (wheel,) = dest.glob(f"{APP.replace('-', '_')}-*.whl")
    return wheel


class Index:
    """A PEP 503 simple index of the wheels in `files`, served on 127.0.0.1; `asked` is every
    path requested of it."""

    def __init__(self, root: Path, wheels: list[Path]):
        self.asked: list[str] = []
        simple = root / "simple"
        by_project: dict[str, list[Path]] = {}
        for wheel in wheels:
            by_project.setdefault(normalize(wheel.name.split("-")[0]), []).append(wheel)
        for project, files in by_project.items():
            links = "".join(
                f'<a href="/files/{f.name}#sha256={hashlib.sha256(f.read_bytes()).hexdigest()}">'
                f"{f.name}</a>\n"
                for f in files
            )
            (simple / project).mkdir(parents=True)
            (simple / project / "index.html").write_text(
                f"<!DOCTYPE html><html><body>\n{links}</body></html>\n", encoding="utf-8"
            )
        (simple / "index.html").write_text(
            "".join(f'<a href="/simple/{p}/">{p}</a>\n' for p in sorted(by_project)),
            encoding="utf-8",
        )
        asked = self.asked

        class Handler(http.server.SimpleHTTPRequestHandler):
            def __init__(self, *args, **kwargs):
                super().__init__(*args, directory=str(root), **kwargs)

            def do_GET(self):
                asked.append(self.path)
                with contextlib.suppress(ConnectionError):  # an installer that has read enough
                    super().do_GET()

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/simple/"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def closed_port():
    """A port on 127.0.0.1 that refuses every connection: bound here, never listened on, so
    nothing else can take it while the tests run (the proxies point there)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    root = tmp_path_factory.mktemp("index")
    files = root / "files"
    files.mkdir()
    wheels = [build_this_tree(files, tmp_path_factory.mktemp("build"))]
    # `openai` for the server; pipx for getting-started's `python3 -m pip install --user pipx`;
    # setuptools for building the package from a clone (the README's route until a release).
    dists = runtime_closure("openai") | runtime_closure("pipx") | runtime_closure("setuptools")
    wheels += [wheel_of_installed(dist, files) for dist in dists.values()]
    served = Index(root, wheels)
    yield served
    served.close()


@pytest.fixture(scope="module")
def machine(tmp_path_factory, index, upstream, closed_port):
    """What every newcomer's machine here shares: the tools on PATH (python3, pipx, uv, uvx
    and nothing of this project), uv's cache, the index, the fake API and the closed proxy."""
    tools = tmp_path_factory.mktemp("tools")
    beside = Path(sys.executable).parent
    # A plain Python 3: the interpreter the test venv was made from.
    (tools / "python3").symlink_to(getattr(sys, "_base_executable", sys.executable))
    for tool in ("pipx", "uv", "uvx"):
        if not (beside / tool).exists():
            pytest.skip(f"{tool} is not beside the test interpreter (pip install -e '.[dev]')")
        (tools / tool).symlink_to(beside / tool)
    proxy = f"http://127.0.0.1:{closed_port}"
    env = {
        "PATH": f"{tools}:/usr/local/bin:/usr/bin:/bin",
        "SHELL": "/bin/bash",  # what pipx ensurepath edits the profile of
        "LANG": "C.UTF-8",
        "TERM": os.environ.get("TERM", "xterm"),
        "USER": os.environ.get("USER", "newcomer"),
        "LOGNAME": os.environ.get("USER", "newcomer"),
        # The installers see the local index only through their environment.
        "PIP_CONFIG_FILE": os.devnull,  # no /etc/pip.conf, no find-links of this machine
        "PIP_INDEX_URL": index.url,
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "UV_DEFAULT_INDEX": index.url,
        "UV_NO_CONFIG": "1",
        "UV_CACHE_DIR": str(tmp_path_factory.mktemp("uv-cache")),
        "UV_PYTHON": sys.executable,
        "UV_PYTHON_DOWNLOADS": "never",
        # pipx keeps its shared pip at the newest release ("pip >= 26.1", from the index); the
        # index here has no pip (the test venv's may be older), so that upkeep is off and pipx
        # uses the pip the Python bundles. The install itself still goes through the index.
        "PIPX_DISABLE_SHARED_LIBS_AUTO_UPGRADE": "1",
        # Anything that tries the internet goes to a closed port and fails.
        **{name: proxy for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY")},
        **{name.lower(): proxy for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY")},
        "NO_PROXY": "127.0.0.1,localhost",
        "no_proxy": "127.0.0.1,localhost",
        # The key a person has set, and the fake API in place of OpenAI's.
        "OPENAI_API_KEY": TEST_KEY,
        "OPENAI_BASE_URL": upstream.base_url,
    }
    return env


@pytest.fixture
def home(tmp_path, machine):
    """A fresh HOME, and the environment of a terminal opened in it."""
    folder = tmp_path / "home"
    folder.mkdir()
    env = {
        **machine,
        "HOME": str(folder),
        "XDG_CONFIG_HOME": str(folder / ".config"),
        "XDG_STATE_HOME": str(folder / ".local" / "state"),
        "XDG_DATA_HOME": str(folder / ".local" / "share"),
        "XDG_CACHE_HOME": str(folder / ".cache"),
        "TMPDIR": str(tmp_path),
    }
    return folder, env


# -- Running a line as a person does ----------------------------------------------------------

ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(\x07|\x1b\\)|\x1b[=>()][0-9A-B]?")


def on_a_terminal(argv: list[str], env: dict, cwd: Path, timeout: float = 240) -> tuple[int, str]:
    """Runs argv with a pseudo-terminal as its stdin, stdout and stderr; its exit status and
    what the terminal showed (escape sequences taken out)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        argv, stdin=slave, stdout=slave, stderr=slave, env=env, cwd=cwd, start_new_session=True
    )
    os.close(slave)
    shown = bytearray()
    deadline = time.monotonic() + timeout
    try:
        while True:
            if time.monotonic() > deadline:  # the shell and all it started (its own session)
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=30)
                raise AssertionError(f"{argv} still ran after {timeout} s:\n{shown.decode()}")
            ready, _, _ = select.select([master], [], [], 0.5)
            if not ready:
                continue
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: every holder of the terminal has closed it
                break
            if not data:
                break
            shown += data
    finally:
        os.close(master)
    code = proc.wait(timeout=30)
    text = ANSI.sub("", shown.decode("utf-8", "replace")).replace("\r\n", "\n")
    # What stays on the screen: of a line redrawn after carriage returns (a spinner), its last.
    return code, "\n".join(line.split("\r")[-1] for line in text.split("\n"))


class Newcomer:
    """One person at one machine: runs a document's lines in a terminal, keeping what each
    showed; `new_terminal()` after a line that says to open one."""

    def __init__(self, home: Path, env: dict, cwd: Path | None = None):
        self.home, self.env = home, env
        self.cwd = cwd or home  # where the terminal is: a clone's folder, or HOME
        self.exports: list[str] = []  # a terminal keeps what `export` set in it
        self.login = False

    def run(self, doc: str, line: str, *, piped: bool = False) -> str:
        script = "\n".join([*self.exports, line.replace(PLACEHOLDER_KEY, TEST_KEY)])
        shells = (
            [["bash", "-lc", script], ["bash", "-ic", script]]
            if self.login
            else [["bash", "-c", script]]
        )
        shown = ""
        for argv in shells:  # after ensurepath: a login shell (macOS, ssh) and a Linux terminal's
            if piped:
                proc = subprocess.run(
                    argv, env=self.env, cwd=self.cwd, capture_output=True, text=True,
                    stdin=subprocess.DEVNULL, timeout=240,
                )  # fmt: skip
                code, shown = proc.returncode, proc.stdout
                said = f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
            else:
                code, shown = on_a_terminal(argv, self.env, self.cwd)
                said = shown
            assert code == 0, f"{doc}: `{line}` ({argv[1]}) exited {code}; it showed:\n{said}"
        if line.startswith("export "):
            self.exports.append(line.replace(PLACEHOLDER_KEY, TEST_KEY))
        return shown

    def new_terminal(self) -> None:
        self.exports = []
        self.login = True


def check_doctor(doc: str, line: str, shown: str, command: list[str], cache: str) -> None:
    """--doctor passed its checks and printed the client lines naming `openai-responses`, with
    `command` after the `--`, and no path into uv's cache (gone after `uv cache clean`)."""
    where = f"{doc}: `{line}` showed:\n{shown}"
    assert "✗" not in shown and "All checks passed." in shown, where
    assert "Claude Code:" in shown and cache not in shown[shown.index("Claude Code:") :], where
    printed = doctor_lines(shown)
    assert sorted(printed) == ["claude", "codex"], where
    for words in printed.values():
        assert words[3] == mcp.CLIENT_NAME, where
        assert after_dashes(words) == [*command, "--stdio"], where
    assert f"[mcp_servers.{mcp.CLIENT_NAME}]" in shown and "required = true" in shown, where
    assert '"mcpServers": {\n' in shown and f'"{mcp.CLIENT_NAME}": {{' in shown, where  # Cursor


def check_answer(doc: str, line: str, shown: str) -> None:
    """On a terminal, --ask shows the answer as text with its sources (the README: "prints the
    answer, its sources and what it cost")."""
    where = f"{doc}: `{line}` showed:\n{shown}"
    assert "Python 3.14.0 was released on 2025-10-07" in shown, where
    assert "Sources:" in shown and "https://www.python.org/downloads/" in shown, where
    assert "cost: " in shown and not shown.lstrip().startswith("{"), where


def check_answer_piped(doc: str, line: str, shown: str) -> None:
    """Piped, the result is JSON ("piped (or with --json), the result as JSON")."""
    result = json.loads(shown)
    assert result["answer"].startswith("Python 3.14.0 was released"), f"{doc}: `{line}`: {shown}"
    assert result["citations"][0]["url"] == "https://www.python.org/downloads/"


def run_block(
    person: Newcomer, doc: str, block: list[str], upstream, client_lines: bool = True
) -> dict[str, str]:
    """Runs a block's lines in order, checking each for what its doc promises; a line whose
    comment says to open a new terminal is followed by one. Returns line -> what it showed.
    `client_lines=False`: of --doctor, only that its checks passed (not the lines it prints)."""
    shown = {}
    for line in block:
        if "--ask" in line:
            upstream.enqueue(SEARCHED)
            shown[line] = person.run(doc, line)
            check_answer(doc, line, shown[line])
            upstream.enqueue(SEARCHED)
            check_answer_piped(doc, line, person.run(doc, line, piped=True))
        else:
            shown[line] = person.run(doc, line)
        if "--doctor" in line and not client_lines:
            where = f"{doc}: `{line}` showed:\n{shown[line]}"
            assert "✗" not in shown[line] and "All checks passed." in shown[line], where
        elif "--doctor" in line:
            words = shlex.split(line.split(" --doctor")[0])
            if words[0] == "uvx":  # uvx by its full path, and the package: no path into its cache
                command = [shutil.which("uvx", path=person.env["PATH"]), *words[1:]]
            elif words[0] == APP:  # installed on PATH: --doctor names its absolute path
                command = [str(person.home / ".local" / "bin" / APP)]
            else:
                command = [re.sub(r"^~", str(person.home), words[0])]
            check_doctor(doc, line, shown[line], command, person.env["UV_CACHE_DIR"])
        if NEW_TERMINAL.search(line):
            person.new_terminal()
    return shown


# -- The README -------------------------------------------------------------------------------


def table_lines(text: str) -> dict[str, list[str]]:
    """The README table's `claude mcp add ...` and `codex mcp add ...`, as words, by client."""
    rows = [line for line in text.splitlines() if line.startswith("| ")]
    spans = [
        span for row in rows for span in re.findall(r"`((?:claude|codex) mcp add [^`]+)`", row)
    ]
    return {span.split()[0]: shlex.split(span) for span in spans}


def doctor_lines(shown: str) -> dict[str, list[str]]:
    """The `claude mcp add ...` and `codex mcp add ...` lines --doctor printed, as words."""
    rows = [row.strip() for row in shown.splitlines()]
    return {
        row.split()[0]: shlex.split(row)
        for row in rows
        if re.match(r"(claude|codex) mcp add ", row)
    }


def after_dashes(words: list[str]) -> list[str]:
    return words[words.index("--") + 1 :]


@pytest.mark.parametrize("block", runnable_blocks(README), ids=lambda block: block[0][:40])
def test_each_sh_block_of_the_readme_works_as_written(block, home, upstream, index):
    run_block(Newcomer(*home), "README.md", block, upstream)
    # What was installed came from the local index, and nothing from anywhere else (the
    # proxies are a closed port: a try for PyPI would have failed the line).
    assert any(path.startswith(f"/simple/{APP}/") for path in index.asked), index.asked
    assert any(path.startswith("/files/openai-") for path in index.asked), index.asked


def test_the_client_lines_in_the_docs_with_uvx_are_what_uvx_doctor_prints(home, upstream):
    """The README's first lines are uvx's; its table's `claude mcp add` and `codex mcp add`,
    with `uvx` before the command as the sentence under it says, and getting-started's
    `claude mcp add`, are what `uvx ... --doctor` prints (the one name; uvx by its full path)."""
    text = readme()
    (first, *_) = runnable_blocks(README)
    assert first and all(line.startswith(f"uvx {APP} ") for line in first), first
    assert f"the command is `uvx {APP}` where the table says `{APP}`" in text
    (doctor,) = [line for line in first if "--doctor" in line]
    person = Newcomer(*home)
    printed = doctor_lines(run_block(person, "README.md", [doctor], upstream)[doctor])
    uvx = shutil.which("uvx", path=person.env["PATH"])
    table = table_lines(text)
    assert sorted(table) == ["claude", "codex"], table
    for client, words in table.items():
        assert words[3] == printed[client][3] == mcp.CLIENT_NAME, (words, printed)
        assert [uvx, *after_dashes(words)] == after_dashes(printed[client]), (words, printed)
    added = [
        line
        for block in sh_blocks(GETTING_STARTED.read_text(encoding="utf-8"))
        for line in block
        if line.startswith(CLIENT_APP)
    ]
    assert added, "docs/getting-started.md shows no `claude mcp add` line"
    for line in added:
        words = shlex.split(line)
        assert words[3] == mcp.CLIENT_NAME, line
        assert after_dashes(words) == ["uvx", APP, "--stdio"], line
        assert after_dashes(printed[words[0]]) == [uvx, APP, "--stdio"], printed


def test_the_readmes_pipx_lines_put_the_command_on_a_new_terminals_path(home, upstream):
    """`pipx install openai-responses-mcp`, `pipx ensurepath` and a new terminal: then the
    command is found (and not before ensurepath), its --doctor (the README's own words)
    passes, and the README table's client lines run what --doctor printed."""
    text = readme()
    lines = inline_lines(text, "No uv?", "pipx ")
    assert lines == [f"pipx install {APP}", "pipx ensurepath"], lines
    assert re.search(r"`pipx ensurepath`\s+and\s+a\s+new\s+terminal", text), "README.md"
    folder, env = home
    person = Newcomer(folder, env)
    person.run("README.md", lines[0])
    for shell in ("-lc", "-ic"):  # installed, but not yet on a new terminal's PATH
        before = subprocess.run(
            ["bash", shell, f"command -v {APP}"], env=env, cwd=folder, capture_output=True,
            stdin=subprocess.DEVNULL, timeout=60,
        )  # fmt: skip
        assert before.returncode != 0, before
    person.run("README.md", lines[1])
    person.new_terminal()
    found = person.run("README.md", f"command -v {APP}").strip().splitlines()[-1]
    assert found == str(folder / ".local" / "bin" / APP), found
    (doctor,) = inline_lines(text, "prints these lines filled in", f"{APP} --doctor")
    shown = run_block(person, "README.md", [doctor], upstream)
    # The table's `claude mcp add` and `codex mcp add`: the one name, and after the `--` the
    # command --doctor printed, by the name a new terminal finds it by.
    printed = doctor_lines(shown[doctor])
    for client, words in table_lines(text).items():
        assert words[3] == printed[client][3] == mcp.CLIENT_NAME, (words, printed)
        assert words[words.index("--") + 1] == APP, words
        assert [found, *after_dashes(words)[1:]] == after_dashes(printed[client]), words
    cursor = json.loads(re.search(r"`(\{\"mcpServers\".*?\})`", text).group(1))
    assert cursor["mcpServers"][mcp.CLIENT_NAME] | {"env": None} == {
        "command": APP,
        "args": ["--stdio"],
        "env": None,
    }


# -- The README's route from a clone, until the first release (issue 39) ----------------------


def a_clone(home: Path) -> Path:
    """This tree as `git clone` leaves it, in the newcomer's HOME (no venv, build or caches)."""
    clone = home / APP
    shutil.copytree(ROOT, clone, ignore=NOT_COPIED)
    return clone


def test_the_readme_says_first_that_the_package_is_not_on_pypi_yet():
    first_screen = "\n".join(readme().splitlines()[:30])
    assert "Not on PyPI yet." in first_screen
    assert sh_blocks(first_screen, "<!-- from-a-clone"), first_screen


def test_the_readmes_clone_route_with_uvx_works_as_written(home, upstream, index):
    """`uvx --from . ...` in a clone: built there (setuptools from the index), never fetched
    as the released package."""
    (block,) = sh_blocks(readme(), "<!-- from-a-clone")
    assert all(line.startswith(f"uvx --from . {APP} ") for line in block), block
    assert any("--doctor" in line for line in block) and any("--ask" in line for line in block)
    folder, env = home
    asked = len(index.asked)
    run_block(Newcomer(folder, env, a_clone(folder)), "README.md", block, upstream, False)
    assert not any(path.startswith(f"/simple/{APP}/") for path in index.asked[asked:])


def test_the_readmes_clone_route_with_pipx_works_as_written(home, upstream, index):
    """`pipx install .` in a clone, `pipx ensurepath` and a new terminal: then the command is
    on PATH and its --doctor passes, the client lines naming it."""
    text = readme()
    lines = inline_lines(text, "install it from the clone", "pipx ")
    assert lines == ["pipx install .", "pipx ensurepath"], lines
    folder, env = home
    person = Newcomer(folder, env, a_clone(folder))
    asked = len(index.asked)
    for line in lines:
        person.run("README.md", line)
    person.new_terminal()
    assert not any(path.startswith(f"/simple/{APP}/") for path in index.asked[asked:])
    run_block(person, "README.md", [f"{APP} --doctor"], upstream)


# -- docs/getting-started.md ------------------------------------------------------------------


def getting_started_blocks() -> list[list[str]]:
    return runnable_blocks(GETTING_STARTED)


@pytest.mark.parametrize("block", getting_started_blocks(), ids=lambda block: block[0][:40])
def test_each_quick_start_block_of_getting_started_works_as_written(block, home, upstream):
    run_block(Newcomer(*home), "docs/getting-started.md", block, upstream)


def test_getting_starteds_way_when_pipx_is_not_found_works_as_written(home, upstream):
    """`pipx: command not found`: `python3 -m pip install --user pipx`, then
    `python3 -m pipx install ...` and `python3 -m pipx ensurepath`, and a new terminal; then the
    pipx block's last line (the command, by name) passes."""
    text = GETTING_STARTED.read_text(encoding="utf-8")
    lines = inline_lines(text, "`pipx: command not found`", "python3 -m pip")
    assert lines == [
        "python3 -m pip install --user pipx",
        f"python3 -m pipx install {APP}",
        "python3 -m pipx ensurepath",
    ], lines
    folder, env = home
    # This machine has python3, and no pipx (nor uv).
    tools = Path(env["PATH"].split(":")[0])
    only_python = folder.parent / "only-python3"
    only_python.mkdir()
    (only_python / "python3").symlink_to(os.readlink(tools / "python3"))
    env = {**env, "PATH": env["PATH"].replace(str(tools), str(only_python), 1)}
    missing = subprocess.run(["bash", "-c", "pipx --version"], env=env, capture_output=True)
    assert missing.returncode == 127, missing
    person = Newcomer(folder, env)
    managed = person.run(
        "docs/getting-started.md",
        "python3 -c 'import os, sysconfig; "
        'print(os.path.exists(os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED")))\'',
    )
    if managed.strip().endswith("True"):
        pytest.skip("this Python is externally managed: the doc's `sudo apt install pipx` applies")
    for line in lines:
        person.run("docs/getting-started.md", line)
    person.new_terminal()
    doctor = getting_started_blocks()[1][-1]
    assert doctor == f"{APP} --doctor", doctor
    run_block(person, "docs/getting-started.md", [doctor], upstream)


def test_getting_started_has_the_quick_starts_a_newcomer_needs():
    """The ways in this file runs: uvx, pipx with ensurepath and a new terminal, a venv, and a
    first answer (a block reshaped out of these lines would go unrun)."""
    blocks = getting_started_blocks()
    firsts = [block[0].split()[0] for block in blocks]
    assert firsts[:3] == ["export", "pipx", "python3"], blocks
    assert any("--ask" in line for block in blocks for line in block), blocks
    assert any(NEW_TERMINAL.search(line) for line in blocks[1]), blocks[1]
