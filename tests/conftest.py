"""Shared fixtures: the real server spawned over pipes, the fake Responses API upstream, and
an in-process Dispatcher harness with a fake engine."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from waiting import wait_until  # the tests' one wait, imported from here
from warmstart import ADDRESS as WARM  # the warm parent's address, in the launcher's environment

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "openai_responses_mcp.py"
sys.path.insert(0, str(ROOT))

TEST_KEY = "sk-test-0123456789abcdefSECRET"

# The program as the tests start it: the module run as __main__ (as `python -m` runs it), from its
# compiled bytecode. `python openai_responses_mcp.py` compiles the 14,000-line file anew in every
# process (about 0.2 s of CPU, and the suite starts the server hundreds of times);
# tests/test_packaging.py still runs the file itself, copied alone, with pip, pipx and uv.
# Where the worker has a warm parent (tests/warmstart.py, the `warm_start` fixture), the server
# runs in a child forked from it, with `openai` already imported; else, or for a test that asks
# for a cold start, the launcher becomes the server (exec, same pid) in a fresh interpreter.
LAUNCHER = f"""\
import os, sys
root = sys.argv.pop(1)
warm = os.environ.pop("{WARM}", "")
if warm:
    sys.path[0] = os.path.join(root, "tests")
    import warmstart
    warmstart.launch(warm)
cold = "import runpy, sys; sys.dont_write_bytecode = False; sys.path[0] = sys.argv.pop(1); " \\
    "runpy.run_module('openai_responses_mcp', run_name='__main__', alter_sys=True)"
os.execv(sys.executable, [sys.executable, "-c", cold, root, *sys.argv[1:]])
"""
# `-S`: no site-packages for the launcher itself, which then needs about 10 ms of CPU.
PROGRAM = [sys.executable, "-S", "-c", LAUNCHER, str(ROOT)]


def base_env(tmp_path: Path, cold: bool = False, **extra: str) -> dict:
    """An environment with no user config, a test key, and nothing inherited that matters;
    `cold` starts the server in a fresh interpreter, for a test of what it imports or of its
    process (/proc, memory)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI", "MCP_"))}
    if cold:
        env.pop(WARM, None)
    for name in ("DEBUG", "MODEL_ANSWER", "MODEL_DETAILED", "MODEL_QUICK", "MAX_CITATIONS"):
        env.pop(name, None)
    env.update(
        # Every call reaches the fake unless a test turns the answer cache on (tests/test_cache.py).
        ANSWER_CACHE_TTL_S="0",
        # No GET /v1/models after the first call unless a test asks (tests/test_retirements.py).
        OPENAI_CHECK_RETIREMENTS="false",
        XDG_CONFIG_HOME=str(tmp_path / "xdg"),
        XDG_STATE_HOME=str(tmp_path / "xdg-state"),  # the usage ledger and cache stay in tmp
        OPENAI_API_KEY=TEST_KEY,
        PYTHONUNBUFFERED="1",
        NO_PROXY="127.0.0.1,localhost",
    )
    env.update(extra)
    return env


# -- Collection: each test file's asserts rewritten once ---------------------------------------

# Pytest caches each test file with its asserts rewritten, unless bytecode writing is off (some
# machines set PYTHONDONTWRITEBYTECODE=1): then every run rewrites all of them again.
sys.dont_write_bytecode = False


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session):
    """Under xdist every worker collects every file, and on a fresh clone each rewrote every
    test file's asserts (about 12 s of CPU a worker): the controller does it once, two files
    at a time, before it starts the workers, which then read pytest's cache. Best effort: if
    pytest's internals are not as expected, the workers rewrite as they always did."""
    config = session.config
    if hasattr(config, "workerinput") or not getattr(config.option, "numprocesses", None):
        return
    files = sorted(Path(__file__).parent.glob("test_*.py"))
    child = os.fork() if hasattr(os, "fork") else -1
    try:
        _rewrite_asserts(config, files[child == 0 :: 2] if child >= 0 else files)
    finally:
        if child == 0:
            os._exit(0)
    if child > 0:
        os.waitpid(child, 0)


# The files that take longest (seconds of waiting, mostly: timeouts, tasks, restarts), first.
# With --dist loadfile the workers take whole files in collection order, and a long file taken
# last keeps one worker busy after the others are done. Each file's own order is kept.
LONGEST_FIRST = (
    "test_users.py", "test_state.py", "test_http.py", "test_tasks_wire.py", "test_oauth.py",
    "test_state_faults.py", "test_background.py", "test_tasks_stateless.py",
    "test_inspector.py", "test_longcalls.py", "test_tasks_limits.py", "test_answer.py",
    "test_handoff.py", "test_upstream_faults.py", "test_cache.py",
    "test_readme.py", "test_doctor_installers.py",  # slow: installs, a minute or more each
)  # fmt: skip


def pytest_collection_modifyitems(items) -> None:
    rank = {name: place for place, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))


def pytest_configure(config) -> None:
    # xdist would hand out the files with the most tests first (--loadscope-reorder, its
    # default): quick unit files, thousands of tests each. Ours: the longest first.
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


def _rewrite_asserts(config, files: list[Path]) -> None:
    try:
        from _pytest.assertion import rewrite

        state = config.stash[rewrite.assertstate_key]
        for fn in files:
            cache = rewrite.get_cache_dir(fn)
            pyc = cache / (fn.name[:-3] + rewrite.PYC_TAIL)
            if rewrite._read_pyc(fn, pyc) is None and rewrite.try_makedirs(cache):
                source_hash, code = rewrite._rewrite_test(fn, config)
                rewrite._write_pyc(state, code, source_hash, pyc)
    except Exception:  # noqa: BLE001 - an optimisation only: the workers rewrite what is missing
        return


class Reader(threading.Thread):
    """Reads the server's stdout, splitting it into messages in either framing."""

    def __init__(self, stream):
        super().__init__(daemon=True)
        self.stream = stream
        self.messages: queue.Queue = queue.Queue()
        self.raw = bytearray()
        self.framings: list[str] = []

    def run(self) -> None:
        buffer = b""
        while True:
            try:
                chunk = self.stream.read1(65536)
            except (ValueError, OSError):  # a test closed the pipe on purpose (a client leaving)
                break
            if not chunk:
                break
            self.raw += chunk
            buffer += chunk
            buffer = self._split(buffer)
        self.messages.put(None)

    def _split(self, buffer: bytes) -> bytes:
        while buffer:
            if buffer.startswith(b"Content-Length:"):
                head, sep, rest = buffer.partition(b"\r\n\r\n")
                if not sep:
                    return buffer
                length = int(head.split(b":")[1])
                if len(rest) < length:
                    return buffer
                self._put(rest[:length], "framed")
                buffer = rest[length:]
            else:
                line, sep, rest = buffer.partition(b"\n")
                if not sep:
                    return buffer
                self._put(line, "line")
                buffer = rest
        return buffer

    def _put(self, body: bytes, framing: str) -> None:
        self.framings.append(framing)
        self.messages.put(json.loads(body))  # anything that is not JSON fails the test here


def _unread_bytes(pipe) -> int:
    """Bytes waiting in a pipe (0 where the system cannot tell, as on Windows)."""
    try:
        import fcntl
        import termios
    except ImportError:
        return 0
    if pipe.closed:
        return 0
    try:
        buffer = fcntl.ioctl(pipe.fileno(), termios.FIONREAD, b"\0\0\0\0")
    except OSError:
        return 0
    return int.from_bytes(buffer, sys.byteorder)


class Server:
    """The real program, spawned with --stdio, spoken to over its pipes."""

    def __init__(self, args: list[str], env: dict, cwd: Path):
        self.warm = WARM in env
        self.proc = subprocess.Popen(
            [*PROGRAM, *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            cwd=str(cwd),
        )
        self.reader = Reader(self.proc.stdout)
        self.reader.start()
        self._stderr = bytearray()
        self._stderr_lock = threading.Lock()
        self._wake = os.pipe() if os.name != "nt" else None  # stop's word to _drain_stderr
        self._stderr_thread = threading.Thread(target=self._drain_stderr, daemon=True)
        self._stderr_thread.start()
        self._next_id = 1000

    @property
    def pid(self) -> int:
        """The server's process id, for a test that reads its /proc: only a cold start has it
        (a warm server is a child of the worker's warm parent, not the launcher, and was forked
        with `openai` already imported)."""
        assert not self.warm, "this test reads the server's process: spawn it with cold=True"
        return self.proc.pid

    def _drain_stderr(self) -> None:
        # A read only once the pipe has bytes, and the read and its append under one lock, so
        # the lock is never held while blocked and `stderr`, holding it with an empty pipe, has
        # every byte written so far. `stop` wakes the select, so a closed pipe is never read
        # (its descriptor may by then be another file's).
        fd, wake = self.proc.stderr.fileno(), self._wake
        while True:
            if wake is None:  # Windows cannot select a pipe: a blocking read, outside the lock
                chunk = os.read(fd, 65536)
                with self._stderr_lock:
                    self._stderr += chunk
            else:
                if fd not in select.select([fd, wake[0]], [], [])[0]:
                    return  # woken by stop, with the pipe drained
                with self._stderr_lock:
                    chunk = os.read(fd, 65536)
                    self._stderr += chunk
            if not chunk:
                return

    @property
    def stderr(self) -> str:
        """What the server wrote to stderr so far, including what it wrote before the reply a
        test has just read from stdout (or before the hang-up the fake saw): each pipe has its
        own reader thread, so that may still wait in the pipe (on a loaded machine, a while)."""
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            with self._stderr_lock:
                if not _unread_bytes(self.proc.stderr):
                    return self._stderr.decode("utf-8", "replace")
            time.sleep(0.005)  # sleep: poll: best effort (no failure), the pipe drained or 5 s
        with self._stderr_lock:
            return self._stderr.decode("utf-8", "replace")

    def write(self, data: bytes) -> None:
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def send(self, message, framing: str = "line") -> None:
        body = message if isinstance(message, bytes) else json.dumps(message).encode()
        if framing == "line":
            self.write(body + b"\n")
        else:
            self.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)

    def recv(self, timeout: float = 10.0) -> dict:
        message = self.reader.messages.get(timeout=timeout)
        assert message is not None, f"stdout closed; stderr:\n{self.stderr}"
        return message

    def recv_until(self, predicate, timeout: float = 10.0) -> tuple[dict, list[dict]]:
        """The first message matching `predicate`, and everything received before it."""
        before, deadline = [], time.monotonic() + timeout
        while True:
            message = self.recv(max(0.01, deadline - time.monotonic()))
            if predicate(message):
                return message, before
            before.append(message)

    def nothing_within(self, seconds: float) -> bool:
        try:
            message = self.reader.messages.get(timeout=seconds)
        except queue.Empty:
            return True
        self.reader.messages.put(message)
        return False

    def request(self, method: str, params=None, framing: str = "line", timeout=10.0) -> dict:
        self._next_id += 1
        request_id = self._next_id
        message = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        self.send(message, framing)
        reply, _ = self.recv_until(lambda m: m.get("id") == request_id, timeout)
        return reply

    def initialize(self, version: str = "2025-06-18", framing: str = "line") -> dict:
        reply = self.request(
            "initialize",
            {
                "protocolVersion": version,
                "capabilities": {},
                "clientInfo": {"name": "pytest", "version": "0"},
            },
            framing,
        )
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"}, framing)
        return reply

    def call(self, tool: str, arguments: dict, framing="line", timeout=20.0, **params) -> dict:
        return self.request(
            "tools/call", {"name": tool, "arguments": arguments, **params}, framing, timeout
        )

    def close_stdin(self) -> None:
        self.proc.stdin.close()

    def wait(self, timeout: float = 10.0) -> int:
        code = self.proc.wait(timeout)
        self._stderr_thread.join(timeout)
        return code

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)
        if self.warm:  # the launcher is gone; its server a moment later, killed by the warm
            self.reader.join(10)  # parent: the server's stdout closes as it exits
        wake, self._wake = self._wake, None
        if wake is not None:
            os.write(wake[1], b"x")
            self._stderr_thread.join(5)
        for pipe in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            try:
                pipe.close()
            except OSError:
                pass
        if wake is not None and not self._stderr_thread.is_alive():
            os.close(wake[0])
            os.close(wake[1])


@pytest.fixture(scope="session", autouse=True)
def warm_start():
    """This worker's warm parent (tests/warmstart.py), which the launcher in PROGRAM finds by
    the environment; none with ORMCP_TESTS_COLD=1, or where the system has no pidfd."""
    if os.environ.get("ORMCP_TESTS_COLD") or not hasattr(os, "pidfd_open"):
        yield
        return
    import tempfile

    folder = tempfile.mkdtemp(prefix="ormcp-warm-")
    address = os.path.join(folder, "s")
    parent = subprocess.Popen(
        [sys.executable, str(ROOT / "tests" / "warmstart.py"), "serve", address, str(ROOT)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env={k: v for k, v in os.environ.items() if k != WARM},
    )
    ready = parent.stdout.readline()
    if ready.strip() == b"ready":
        os.environ[WARM] = address
    try:
        yield
    finally:
        os.environ.pop(WARM, None)
        parent.stdin.close()  # the parent's cue to go, with any server still running
        try:
            parent.wait(10)
        except subprocess.TimeoutExpired:
            parent.kill()
        parent.stdout.close()
        import shutil

        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def fake(request):
    """The fake Responses API on 127.0.0.1, empty for every test.

    A fresh one per test; or, in a module that sets `SHARED_FAKE = True` (its module-scoped
    servers are bound to one port, and one fake per module is cheaper), the module's `upstream`,
    emptied (no queued reply, no recorded request, the default reply) before and after the test.
    """
    from fake_upstream import FakeResponsesAPI, Reply

    if getattr(request.module, "SHARED_FAKE", False):
        api = request.getfixturevalue("upstream")
        api.clear()
        api.default = Reply()
        yield api
        api.clear()
        return
    with FakeResponsesAPI() as api:
        yield api


@pytest.fixture(scope="module")
def upstream():
    """One fake Responses API for a whole test module (`fake` empties it per test)."""
    from fake_upstream import FakeResponsesAPI

    with FakeResponsesAPI() as api:
        yield api


@pytest.fixture
def spawn(tmp_path):
    """Starts the server: spawn(*args, config=YAML text, env={...}, upstream=fake)."""
    started: list[Server] = []

    def start(
        *args: str, config: str | None = None, env: dict | None = None, upstream=None, cold=False
    ):
        extra = dict(env or {})
        if upstream is not None:
            extra.setdefault("OPENAI_BASE_URL", upstream.base_url)
        argv = list(args) or ["--stdio"]
        if config is not None:
            path = tmp_path / "config.yaml"
            path.write_text(config, encoding="utf-8")
            argv += ["--config", str(path)]
        server = Server(argv, base_env(tmp_path, cold, **extra), tmp_path)
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


@contextlib.contextmanager
def bare_stdio(tmp_path: Path, stderr=subprocess.PIPE, **env: str):
    """The server on pipes the test works itself (to close stdout under it, say); killed at the
    end if it is still running."""
    proc = subprocess.Popen(
        [*PROGRAM, "--stdio"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=stderr,
        env=base_env(tmp_path, **env),
    )
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            try:
                if pipe is not None:
                    pipe.close()
            except OSError:
                pass


def run_cli(tmp_path: Path, *args: str, env: dict | None = None, timeout: float = 30.0, **kw):
    """Runs the program to completion; returns the CompletedProcess (text mode). A preexec_fn
    (a resource limit, say) acts on the process started, so that must be the server: cold."""
    return subprocess.run(
        [*PROGRAM, *args],
        capture_output=True,
        text=True,
        env=base_env(tmp_path, "preexec_fn" in kw, **(env or {})),
        cwd=str(tmp_path),
        timeout=timeout,
        **kw,
    )


# -- Helpers shared by the test files ---------------------------------------------------------

PRICES = """\
pricing:
  models:
    gpt-6.1-terra: {input: 2, cached_input: 0.5, output: 10}
  web_search_per_1k: 25
"""


def start(spawn, fake, *args: str, config: str | None = None, env: dict | None = None):
    """A server of its own, initialized, for tests that need a config, flags, env or a clean
    slate."""
    server = spawn(*args, config=config, env=env, upstream=fake)
    server.initialize()
    return server


def send_call(server: Server, request_id, query="q", tool="answer", **params) -> None:
    """Writes a tools/call without waiting for its reply."""
    server.send(
        {
            "jsonrpc": "2.0",
            "id": request_id,
            "method": "tools/call",
            "params": {"name": tool, "arguments": {"query": query}, **params},
        }
    )


def cancel(server: Server, request_id) -> float:
    """Writes notifications/cancelled; returns time.monotonic() right after the write."""
    server.send(
        {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": request_id, "reason": "user hit stop"},
        }
    )
    return time.monotonic()


def failure_of(reply: dict) -> str:
    """The error message, after checking the shape every failure shares."""
    from openai_responses_mcp import TOOL_FAILED

    assert "error" in reply, reply
    error = reply["error"]
    assert error["code"] == TOOL_FAILED
    assert error["message"].startswith("answer failed: ")
    assert "\n" not in error["message"]
    assert error["data"]["message"]
    return error["message"]


def show_config(proc) -> dict:
    """The JSON --show-config printed on stderr (after any warnings), with nothing on stdout."""
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ""
    return json.loads(proc.stderr[proc.stderr.index("{") :])


# -- In process: Dispatcher.handle with a fake engine, no pipes --------------------------------

ANSWER = {
    "answer": "Python 3.14 came out on 2025-10-07.\n\nSources:\n- https://python.org (2025-10-07)",
    "used_search": True,
    "citations": [
        {"url": "https://python.org", "title": "python.org", "published_at": "2025-10-07"}
    ],
    "model": "gpt-5.2-2026-01-01",
}
ANSWER_META = {"response_id": "resp_1", "usage": {"total_tokens": 10}, "attempts": 1}

# MCP 2026-07-28: the revision, every version we speak, and a request's _meta.
MODERN = "2026-07-28"
SUPPORTED = [MODERN, "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"]
META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientInfo": {"name": "pytest", "version": "0"},
    "io.modelcontextprotocol/clientCapabilities": {},
}


class FakeEngine:
    """Stands in for AnswerEngine: `behaviour(tool, args, call)` decides what answer() does;
    by default it answers ANSWER with `meta`."""

    def __init__(self, behaviour=None, meta: dict = ANSWER_META):
        self.behaviour = behaviour or (lambda tool, args, call: (dict(ANSWER), dict(meta)))
        self.calls: list = []
        self.started = threading.Event()

    def answer(self, tool, args, call):
        self.calls.append((tool, args, call))
        self.started.set()
        return self.behaviour(tool, args, call)


class Outbox:
    """What the session sent (tool replies, progress), in order, thread-safe."""

    def __init__(self):
        self.messages: list = []
        self._cond = threading.Condition()

    def __call__(self, message):
        with self._cond:
            self.messages.append(message)
            self._cond.notify_all()

    def wait_for(self, predicate, timeout: float = 5.0):
        with self._cond:
            assert self._cond.wait_for(lambda: any(map(predicate, self.messages)), timeout), (
                f"no matching message within {timeout}s; got {self.messages}"
            )
            return next(m for m in self.messages if predicate(m))

    def replies(self) -> list:
        with self._cond:
            return [m for m in self.messages if "method" not in m]

    def progress(self) -> list:
        with self._cond:
            return [m for m in self.messages if m.get("method") == "notifications/progress"]


class Harness:
    """A Dispatcher and one client Session, driven by hand."""

    def __init__(self, config, engine=None, debug=False):
        from openai_responses_mcp import Dispatcher, Log, Session

        self.engine = engine or FakeEngine()
        self.dispatcher = Dispatcher(config, Log(debug=debug), self.engine)
        self.long_calls = self.dispatcher.long_calls  # tasks and handoffs
        self.outbox = Outbox()
        self.session = Session(self.outbox)
        self._next_id = 0

    def handle(self, message):
        return self.dispatcher.handle(message, self.session)

    def request(self, method, params=None, request_id=None):
        if request_id is None:
            self._next_id += 1
            request_id = self._next_id
        message = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        return self.handle(message)

    def initialize(self, version="2025-11-25"):
        reply = self.request(
            "initialize",
            {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "t"}},
        )
        assert self.handle({"jsonrpc": "2.0", "method": "notifications/initialized"}) is None
        return reply

    def start_call(self, arguments, tool="answer", request_id="call-1", **params):
        """Sends tools/call; returns what handle() returned (None when the call started)."""
        return self.request(
            "tools/call", {"name": tool, "arguments": arguments, **params}, request_id
        )

    def call(self, arguments, tool="answer", request_id="call-1", **params):
        """Sends tools/call and returns the reply the worker sends."""
        assert self.start_call(arguments, tool, request_id, **params) is None
        return self.sent_reply(request_id)

    def sent_reply(self, request_id, timeout: float = 5.0) -> dict:
        """The reply to `request_id` the session sent (a worker's), waiting for it."""
        return self.outbox.wait_for(
            lambda m: m.get("id") == request_id and "method" not in m, timeout
        )

    def cancel(self, request_id, **extra):
        params = {"requestId": request_id, **extra}
        return self.handle(
            {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": params}
        )

    def idle(self, timeout: float = 5.0) -> None:
        assert self.session.wait_idle(timeout), "calls still running"


@pytest.fixture(scope="module")
def config(tmp_path_factory):
    """The default configuration, for a Harness."""
    from openai_responses_mcp import load_config

    home = tmp_path_factory.mktemp("xdg")
    # The seed's tools: no answer cache, so no `fresh` argument (see tests/test_cache.py).
    return load_config(
        {},
        {"XDG_CONFIG_HOME": str(home), "XDG_STATE_HOME": str(home), "ANSWER_CACHE_TTL_S": "0"},
    )


@pytest.fixture
def harness(config):
    return Harness(config)


# -- A throwaway PostgreSQL cluster (the state.url backend) -----------------------------------

PG_PASSWORD = "pg-Secret-0123456789"  # the tests check it is never printed


def postgres_bin() -> Path | None:
    """The folder of Debian's initdb and postgres (not on PATH there), or None."""
    import glob
    import shutil

    found = shutil.which("initdb")
    if found and shutil.which("postgres"):
        return Path(os.path.realpath(found)).parent
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=len)
    return Path(versions[-1]).parent if versions else None


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class PostgresCluster:
    """initdb + postgres in a temporary folder on a free port, run as the `postgres` user when
    the tests run as root (postgres refuses root); stop() and start() keep its data."""

    def __init__(self, bin_dir: Path):
        import shutil
        import tempfile

        self.bin = bin_dir
        self.dir = Path(tempfile.mkdtemp(prefix="orm-pg-"))
        self.data = self.dir / "data"
        self.port = free_port()
        self.proc: subprocess.Popen | None = None
        # As root, initdb and postgres run as the `postgres` user (Popen drops to it itself, so
        # that signals reach postgres, not a wrapper).
        self._as_user: dict = {}
        if os.geteuid() == 0:
            self._as_user = {"user": "postgres", "group": "postgres", "extra_groups": []}
            shutil.chown(self.dir, "postgres")
        password = self.dir / "pw"
        password.write_text(PG_PASSWORD, encoding="utf-8")
        if self._as_user:
            shutil.chown(password, "postgres")
        subprocess.run(
            [
                *(str(self.bin / "initdb"), "-D", str(self.data), "-U", "postgres"),
                *("--pwfile", str(password), "--auth-host=scram-sha-256", "--auth-local=trust"),
                *("-E", "UTF8", "--no-sync"),
            ],
            check=True,
            capture_output=True,
            cwd=str(self.dir),
            **self._as_user,
        )
        self.start()

    def url(self, database: str = "postgres", password: str = PG_PASSWORD) -> str:
        return f"postgresql://postgres:{password}@127.0.0.1:{self.port}/{database}"

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [
                *(str(self.bin / "postgres"), "-D", str(self.data), "-p", str(self.port)),
                *("-k", str(self.dir), "-c", "listen_addresses=127.0.0.1"),
                *("-c", "fsync=off", "-c", "max_connections=200"),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            cwd=str(self.dir),
            **self._as_user,
        )
        import psycopg

        def accepts() -> bool:
            try:
                psycopg.connect(self.url(), connect_timeout=2).close()
                return True
            except psycopg.OperationalError:
                if self.proc.poll() is not None:
                    raise
                return False

        wait_until(accepts, 30, "PostgreSQL to accept connections")

    def stop(self) -> None:
        import signal

        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)  # fast shutdown: ends every session
            self.proc.wait(30)
        self.proc = None

    def fresh_database(self) -> str:
        """A new empty database; its URL."""
        import psycopg

        name = f"t{os.getpid()}_{time.monotonic_ns()}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        return self.url(name)

    def remove(self) -> None:
        import shutil

        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres():
    """One PostgreSQL cluster for the session's state tests; skipped, with the reason, where
    PostgreSQL or psycopg is not installed (.ci/run installs both)."""
    bin_dir = postgres_bin()
    if bin_dir is None:
        pytest.skip("PostgreSQL is not installed (apt-get install postgresql; .ci/run does)")
    try:
        import psycopg  # noqa: F401
    except ImportError:
        pytest.skip('psycopg is not installed (pip install -e ".[test]" has it)')
    cluster = PostgresCluster(bin_dir)
    try:
        yield cluster
    finally:
        cluster.remove()


def default_action(*names: str):
    """A preexec_fn that gives the named signals their default action in the process it starts:
    a test of what a signal does cannot inherit an ignored one (pytest run as a background job,
    by nohup, cron or a CI wrapper, ignores SIGINT, and so would every process it starts)."""
    numbers = [getattr(signal, name) for name in names if name not in ("SIGKILL", "SIGSTOP")]

    def restore():
        for number in numbers:
            signal.signal(number, signal.SIG_DFL)

    return restore
