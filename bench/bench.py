#!/usr/bin/env python3
"""Measures openai-responses-mcp against the targets of issue 4, each beside its baseline.

    python bench/bench.py [--quick] [--json PATH] [--only NAME[,NAME...]]

Everything runs on this machine: the server is spawned over pipes exactly as an MCP client
starts it, and its upstream is the tests' fake Responses API (tests/fake_upstream.py) on
127.0.0.1, running in this process. No network, no API key (a fake one is set).

Every figure is a median over repeated runs, and every figure that has a baseline is measured
in the same run, interleaved with it, because shared machines are noisy. The table goes to
stdout; --json writes every figure, its samples' spread and the machine it ran on.

How each figure is taken is written beside its function below; docs/performance.md
shows the latest table.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import platform
import py_compile
import select
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODULE = ROOT / "openai_responses_mcp.py"
PYTHON = sys.executable
TEST_KEY = "sk-test-0123456789abcdefBENCH"
MIB = 1024 * 1024
# What `pip install "openai-responses-mcp[postgres,oauth]"` adds: bench/ runs in a venv with the
# "test" extra, which has them all.
OPTIONAL_EXTRAS = ("psycopg", "jwt", "cryptography")


sys.path.insert(0, str(ROOT / "tests"))  # the tests' fake Responses API is the upstream here
import fake_upstream  # noqa: E402

Reply = fake_upstream.Reply

# One realistic answer: a search, two sources, two citations, the text in 8 deltas.
ANSWER_TEXT = (
    "Python 3.13 was released on 2024-10-07 ([python.org](https://www.python.org/downloads/)). "
    "It adds an experimental free-threaded build and a JIT compiler, both off by default. "
    "The next feature release, 3.14, followed a year later "
    "([peps.python.org](https://peps.python.org/pep-0745/))."
)
SOURCES = [
    {"type": "url", "url": "https://www.python.org/downloads/"},
    {"type": "url", "url": "https://peps.python.org/pep-0745/"},
]


def realistic_reply(**knobs) -> Reply:
    return Reply(
        text=ANSWER_TEXT,
        searches=[{"query": "python 3.13 release date", "sources": SOURCES}],
        citations=[
            {"url": SOURCES[0]["url"], "title": "Download Python"},
            {"url": SOURCES[1]["url"], "title": "PEP 745"},
        ],
        text_chunks=8,
        **knobs,
    )


QUERY = "When was Python 3.13 released, and what is new in it?"


# ------------------------------------------------------------------------------------------
# Spawning the server
# ------------------------------------------------------------------------------------------


class Install:
    """The module as pip/pipx/uv install it: in a directory of its own with its bytecode cached.

    The entry point is run as `python -c "from openai_responses_mcp import main; ..."`, which
    is what an installed console script does, minus the script's own shebang handling.
    """

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="orm-bench-"))
        shutil.copy2(MODULE, self.dir / MODULE.name)
        source = self.dir / MODULE.name
        py_compile.compile(str(source), importlib.util.cache_from_source(str(source)), doraise=True)
        (self.dir / "xdg").mkdir()

    def env(self, **extra: str) -> dict:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI", "MCP_"))}
        for name in ("DEBUG", "MODEL_ANSWER", "MODEL_DETAILED", "MODEL_QUICK", "PYTHONPATH"):
            env.pop(name, None)
        env.update(
            XDG_CONFIG_HOME=str(self.dir / "xdg"),
            XDG_STATE_HOME=str(self.dir / "state"),  # the usage ledger, never the real home's
            ANSWER_CACHE_TTL_S="0",  # every call goes upstream unless a figure turns it on
            OPENAI_API_KEY=TEST_KEY,
            NO_PROXY="127.0.0.1,localhost",
        )
        env.update(extra)
        return env

    def entry_argv(self, *args: str) -> list[str]:
        code = "from openai_responses_mcp import main; raise SystemExit(main())"
        return [PYTHON, "-c", code, *args]

    def script_argv(self, *args: str) -> list[str]:
        return [PYTHON, str(self.dir / MODULE.name), *args]

    def cleanup(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)


def frame(message: dict, framing: str = "line") -> bytes:
    body = json.dumps(message, separators=(",", ":")).encode()
    if framing == "line":
        return body + b"\n"
    return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)


def initialize_message(request_id=0) -> dict:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "bench", "version": "0"},
        },
    }


class Client:
    """The server over raw pipes, read without helper threads so latency is not inflated."""

    def __init__(self, install: Install, env: dict | None = None, argv: list[str] | None = None):
        self.stderr = tempfile.TemporaryFile()  # noqa: SIM115 - closed in close()
        self.proc = subprocess.Popen(
            argv or install.entry_argv("--stdio"),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            env=env or install.env(),
            cwd=str(install.dir),
        )
        self.pid = self.proc.pid
        self._in = self.proc.stdin.fileno()
        self._out = self.proc.stdout.fileno()
        self._buffer = bytearray()
        self._next_id = 1

    # -- bytes --------------------------------------------------------------------------------

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self._in, view) :]

    def send(self, message: dict, framing: str = "line") -> None:
        self.write(frame(message, framing))

    def _fill(self, deadline: float) -> None:
        remaining = deadline - time.monotonic()
        if remaining <= 0 or not select.select([self._out], [], [], remaining)[0]:
            raise TimeoutError(f"no reply from the server; stderr:\n{self.stderr_text()}")
        chunk = os.read(self._out, 1 << 20)
        if not chunk:
            raise EOFError(f"the server closed stdout; stderr:\n{self.stderr_text()}")
        self._buffer += chunk

    def recv(self, timeout: float = 30.0) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            buffer = self._buffer
            if buffer.startswith(b"Content-Length:"):
                head_end = buffer.find(b"\r\n\r\n")
                if head_end >= 0:
                    length = int(buffer[15:head_end])
                    if len(buffer) >= head_end + 4 + length:
                        body = bytes(buffer[head_end + 4 : head_end + 4 + length])
                        del buffer[: head_end + 4 + length]
                        return json.loads(body)
            else:
                newline = buffer.find(b"\n")
                if newline >= 0:
                    body = bytes(buffer[:newline])
                    del buffer[: newline + 1]
                    return json.loads(body)
            self._fill(deadline)

    def request(self, method: str, params=None, framing: str = "line", timeout=30.0) -> dict:
        request_id = self.send_request(method, params, framing)
        while True:
            message = self.recv(timeout)
            if message.get("id") == request_id:
                return message

    def send_request(self, method: str, params=None, framing: str = "line") -> int:
        self._next_id += 1
        message = {"jsonrpc": "2.0", "id": self._next_id, "method": method}
        if params is not None:
            message["params"] = params
        self.send(message, framing)
        return self._next_id

    def initialize(self, framing: str = "line") -> dict:
        self.send(initialize_message(), framing)
        reply = self.recv()
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"}, framing)
        return reply

    def call_params(self, query: str = QUERY) -> dict:
        return {"name": "answer", "arguments": {"query": query}}

    def call(self, timeout: float = 30.0) -> dict:
        reply = self.request("tools/call", self.call_params(), timeout=timeout)
        if "result" not in reply:
            raise RuntimeError(f"tools/call failed: {reply}")
        return reply

    # -- the process ---------------------------------------------------------------------------

    def status(self, field: str) -> int:
        """A number from /proc/PID/status, e.g. VmRSS (kB) or Threads."""
        with open(f"/proc/{self.pid}/status") as handle:
            for line in handle:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
        raise KeyError(field)

    def rss_mib(self) -> float:
        return self.status("VmRSS") / 1024

    def threads(self) -> int:
        return len(os.listdir(f"/proc/{self.pid}/task"))

    def has_loaded(self, needle: str) -> bool:
        with open(f"/proc/{self.pid}/maps") as handle:
            return needle in handle.read()

    def stderr_text(self) -> str:
        self.stderr.seek(0)
        return self.stderr.read().decode("utf-8", "replace")[-4000:]

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.proc.stdin.close()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
        self.proc.stdout.close()
        self.stderr.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def wait_until(predicate, timeout: float, interval: float = 0.01) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return predicate()


def wait_warm(client: Client, timeout: float = 15.0) -> None:
    """Until the background warm-up has loaded `openai` (pydantic_core mapped) and ended."""
    ok = wait_until(
        lambda: client.has_loaded("pydantic_core") and client.threads() == 1, timeout, 0.02
    )
    if not ok:
        raise TimeoutError(f"openai was not loaded in the background; {client.stderr_text()}")


# ------------------------------------------------------------------------------------------
# Statistics and results
# ------------------------------------------------------------------------------------------


def median(samples) -> float:
    return statistics.median(samples)


def spread(samples) -> dict:
    ordered = sorted(samples)
    return {
        "n": len(ordered),
        "median": statistics.median(ordered),
        "p10": ordered[len(ordered) // 10],
        "p90": ordered[min(len(ordered) - 1, len(ordered) * 9 // 10)],
        "min": ordered[0],
        "max": ordered[-1],
    }


class Results:
    def __init__(self) -> None:
        self.rows: list[dict] = []

    def add(self, figure: str, measured: str, baseline: str, value: str, target: str, met, **raw):
        row = {
            "figure": figure,
            "measured": measured,
            "baseline": baseline,
            "value": value,
            "target": target,
            "met": met,
            "raw": raw,
        }
        self.rows.append(row)
        mark = {True: "yes", False: "NO", None: "-"}[met]
        print(f"  {figure}: {value} (target {target}) -> {mark}", file=sys.stderr, flush=True)

    def table(self) -> str:
        head = ("figure", "measured", "baseline (same run)", "result", "target", "met")
        rows = [
            (
                r["figure"],
                r["measured"],
                r["baseline"],
                r["value"],
                r["target"],
                {True: "yes", False: "**no**", None: "-"}[r["met"]],
            )
            for r in self.rows
        ]
        lines = ["| " + " | ".join(head) + " |", "|" + "|".join(" --- " for _ in head) + "|"]
        lines += ["| " + " | ".join(row) + " |" for row in rows]
        return "\n".join(lines)


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f} ms"


# ------------------------------------------------------------------------------------------
# The figures
# ------------------------------------------------------------------------------------------


def bench_startup(install: Install, results: Results, runs: int) -> None:
    """spawn -> initialize answered, interleaved with `python -c pass` (spawn -> exit).

    Both use this interpreter binary, the same environment and working directory. The
    initialize request is written as soon as the process exists; the clock stops when its
    reply has been read. The server is then closed (its exit is not timed). The same is
    measured for the module run as a script file, which Python compiles on every start.
    """
    env = install.env()
    message = frame(initialize_message())

    def spawn(argv) -> float:
        started = time.perf_counter()
        with Client(install, env, argv) as client:
            client.write(message)
            client.recv()
            elapsed = time.perf_counter() - started
        return elapsed

    def bare() -> float:
        started = time.perf_counter()
        subprocess.run([PYTHON, "-c", "pass"], env=env, cwd=str(install.dir), check=True)
        return time.perf_counter() - started

    spawn(install.entry_argv("--stdio"))  # page in the files once
    base, entry, script = [], [], []
    for _ in range(runs):
        base.append(bare())
        entry.append(spawn(install.entry_argv("--stdio")))
        script.append(spawn(install.script_argv("--stdio")))
    ratio = median(entry) / median(base)
    results.add(
        "spawn → initialize answered (installed entry point)",
        ms(median(entry)),
        f"`python -c pass` {ms(median(base))}",
        f"{ratio:.2f}×",
        "≤ 1.5×",
        ratio <= 1.5,
        entry=spread(entry),
        python_c_pass=spread(base),
        ratio=ratio,
    )
    # Issue 34: an optional extra installed must cost nothing at start unless it is configured
    # (psycopg was imported for every start's secret masker: 12× `python -c pass`).
    extras = {name: importlib.util.find_spec(name) is not None for name in OPTIONAL_EXTRAS}
    missing = [name for name, found in extras.items() if not found]
    results.add(
        "spawn → initialize answered, every optional extra installed (" + ", ".join(extras) + ")",
        ms(median(entry)) if not missing else "not measured: " + ", ".join(missing) + " missing",
        f"`python -c pass` {ms(median(base))}",
        f"{ratio:.2f}×" if not missing else "-",
        "≤ 2.5×",
        ratio <= 2.5 if not missing else None,
        extras=extras,
        ratio=ratio,
    )
    script_ratio = median(script) / median(base)
    results.add(
        "spawn → initialize answered (`python openai_responses_mcp.py`, no bytecode cache)",
        ms(median(script)),
        f"`python -c pass` {ms(median(base))}",
        f"{script_ratio:.2f}×",
        "informational",
        None,
        script=spread(script),
        ratio=script_ratio,
    )


def dropin_launch(install: Install, fake, folder: Path, env: dict) -> tuple[list[str], dict]:
    """The module copied alone into `folder`, and the command and variables its `--doctor`
    prints for a client (Cursor's entry: the same as Claude Code's and Codex's lines)."""
    folder.mkdir(exist_ok=True)
    shutil.copy2(MODULE, folder / MODULE.name)
    proc = subprocess.run(
        [PYTHON, str(folder / MODULE.name), "--doctor"], capture_output=True, text=True,
        env={**env, "OPENAI_BASE_URL": fake.base_url}, cwd=str(install.dir), timeout=120,
    )  # fmt: skip
    text = proc.stdout
    if "Cursor (" not in text:
        raise RuntimeError(f"--doctor printed no client lines:\n{text}\n{proc.stderr}")
    start = text.index("{", text.index("Cursor ("))
    entry = json.loads(text[start : text.rindex("}") + 1])["mcpServers"]["openai-responses"]
    variables = {k: v for k, v in entry["env"].items() if k.startswith("PYTHON")}
    return [entry["command"], *entry["args"]], variables


def bench_dropin(install: Install, fake, results: Results, runs: int) -> None:
    """Issue 39: the file copied alone, started as a client starts it, beside the installed
    entry point, interleaved with `python -c pass`: spawn -> initialize answered, and VmRSS
    then. As a script it is compiled at every start; as `--doctor` prints it (`python -c
    LOADER FILE`, which loads the file by its path) it runs from bytecode cached beside it
    (checked against the file's hash), or, where no __pycache__
    can be made there (a read-only folder; here a file in its place), under
    PYTHONPYCACHEPREFIX in the user's cache."""
    env = install.env(XDG_CACHE_HOME=str(install.dir / "cache"))
    writable, read_only = install.dir / "dropin", install.dir / "dropin-ro"
    read_only.mkdir()
    (read_only / "__pycache__").write_text("")
    launch = dropin_launch(install, fake, writable, env)
    fallback = dropin_launch(install, fake, read_only, env)
    ways = {
        "installed": (install.entry_argv("--stdio"), {}),
        "script": ([PYTHON, str(writable / MODULE.name), "--stdio"], {}),
        "module": (launch[0], launch[1]),
        "prefix": (fallback[0], fallback[1]),
    }
    message = frame(initialize_message())

    def spawn(argv, variables) -> tuple[float, float]:
        started = time.perf_counter()
        with Client(install, {**env, **variables}, argv) as client:
            client.write(message)
            client.recv()
            elapsed = time.perf_counter() - started
            rss = client.rss_mib()
        return elapsed, rss

    def bare() -> float:
        started = time.perf_counter()
        subprocess.run([PYTHON, "-c", "pass"], env=env, cwd=str(install.dir), check=True)
        return time.perf_counter() - started

    for argv, variables in ways.values():
        spawn(argv, variables)  # page in the files once
    base: list[float] = []
    seen: dict[str, list] = {name: [] for name in ways}
    for _ in range(runs):
        base.append(bare())
        for name, (argv, variables) in ways.items():
            seen[name].append(spawn(argv, variables))
    labels = {
        "installed": ("installed entry point", None),
        "script": ("`python openai_responses_mcp.py`, compiled at every start", None),
        "module": (
            "as --doctor prints it: `python -c LOADER FILE`, bytecode cached beside it",
            True,
        ),
        "prefix": ("read-only folder: PYTHONPYCACHEPREFIX in the user's cache", True),
    }
    for name, (label, held) in labels.items():
        times, memory = [t for t, _ in seen[name]], [r for _, r in seen[name]]
        ratio, rss = median(times) / median(base), median(memory)
        met = ratio <= 3 and rss <= 60 if held else None
        results.add(
            f"drop-in start → `initialize` answered, and VmRSS then: {label}",
            f"{ms(median(times))}, {rss:.1f} MiB",
            f"`python -c pass` {ms(median(base))}",
            f"{ratio:.2f}×",
            "≤ 3× and ≤ 60 MiB" if held else "informational",
            met,
            times=spread(times),
            rss_mib=spread(memory),
            python_c_pass=spread(base),
            ratio=ratio,
            command=ways[name][0],
            variables=ways[name][1],
        )


def bench_round_trips(install: Install, results: Results, runs: int) -> None:
    """tools/list (and ping) round trips: one request written, its reply read, one at a time."""
    with Client(install) as client:
        client.initialize()
        for _ in range(50):
            client.request("tools/list")
        listing, pings = [], []
        for _ in range(runs):
            started = time.perf_counter()
            client.request("tools/list")
            listing.append(time.perf_counter() - started)
            started = time.perf_counter()
            client.request("ping")
            pings.append(time.perf_counter() - started)
    results.add(
        "`tools/list` round trip",
        ms(median(listing)),
        f"`ping` {ms(median(pings))}",
        ms(median(listing)),
        "≤ 1 ms",
        median(listing) <= 0.001,
        tools_list=spread(listing),
        ping=spread(pings),
    )


DIRECT_WORKER = r"""
import json, sys, time
sys.path.insert(0, sys.argv[2])
import openai
import openai_responses_mcp as m

config = m.load_config({}, env={"OPENAI_BASE_URL": sys.argv[1], "XDG_CONFIG_HOME": "/nonexistent"})
request = m.build_request("answer", {"query": sys.argv[3]}, config, m.today_in("UTC"))
client = openai.OpenAI(
    api_key="sk-test-direct", base_url=sys.argv[1], max_retries=0,
    http_client=openai.DefaultHttpxClient(),
)

def one():
    started = time.perf_counter()
    completed = None
    with client.responses.create(**request, stream=True) as stream:
        for event in stream:  # to the end, so the connection is reused (as the server does)
            if event.type == "response.completed":
                completed = event.response
    assert completed is not None
    return time.perf_counter() - started

def burst(n):
    import threading
    threads = [threading.Thread(target=one) for _ in range(n)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return time.perf_counter() - started

for line in sys.stdin:
    words = line.split()
    elapsed = burst(int(words[1])) if words[:1] == ["burst"] else one()
    sys.stdout.write(f"{elapsed}\n")
    sys.stdout.flush()
"""


class DirectSDK:
    """A plain `openai` SDK client in its own process, making the server's request itself.

    It runs one streamed call per line on stdin and reports that call's time, measured
    around `responses.create(stream=True)` and the loop over all its events: what a program
    calling the SDK directly spends (the SDK decodes every event into its typed models).
    """

    def __init__(self, base_url: str):
        self.proc = subprocess.Popen(
            [PYTHON, "-c", DIRECT_WORKER, base_url, str(ROOT), QUERY],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def call(self, command: str = "go") -> float:
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError("the direct SDK worker died")
        return float(line)

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(10)
        self.proc.stdout.close()


def bench_call_overhead(install: Install, fake, results: Results, runs: int) -> dict:
    """Steady tools/call round trip vs the same request made directly with the SDK.

    Calls alternate one by one between the server and the direct client, so both see the
    same fake upstream (in this process) under the same load. Returns the steady medians
    for the first-call figure.
    """
    fake.default = realistic_reply()
    env = install.env(OPENAI_BASE_URL=fake.base_url)
    direct = DirectSDK(fake.base_url)
    try:
        with Client(install, env) as client:
            client.initialize()
            for _ in range(20):
                client.call()
                direct.call()
            served, plain = [], []
            for i in range(runs):
                started = time.perf_counter()
                client.call()
                served.append(time.perf_counter() - started)
                plain.append(direct.call())
                if i % 100 == 99:
                    fake.clear()
    finally:
        direct.close()
    overhead = median(served) - median(plain)
    results.add(
        "steady `tools/call` round trip, overhead over a direct SDK call",
        ms(median(served)),
        f"direct `openai` call {ms(median(plain))}",
        f"{overhead * 1000:+.2f} ms",
        "≤ 1 ms",
        overhead <= 0.001,
        served=spread(served),
        direct=spread(plain),
        overhead=overhead,
    )
    return {"steady": median(served)}


def bench_first_call(install: Install, fake, results: Results, spawns: int) -> None:
    """The first tools/call, sent 2 s after initialize, vs steady calls of the same server.

    A steady call reuses the upstream connection; the first call has to open it. So each
    server also makes steady calls on a new connection each (the fake answers them with
    `Connection: close`): the first call against those shows what is left of a cold start
    once the connection is set aside.
    """
    env = install.env(OPENAI_BASE_URL=fake.base_url)
    firsts, steadies, fresh, ratios, fresh_ratios = [], [], [], [], []

    def timed_calls(client: Client, count: int) -> list[float]:
        times = []
        for _ in range(count):
            started = time.perf_counter()
            client.call()
            times.append(time.perf_counter() - started)
        return times

    for _ in range(spawns):
        fake.default = realistic_reply()
        with Client(install, env) as client:
            client.initialize()
            time.sleep(2.0)
            first = timed_calls(client, 1)[0]
            steady = median(timed_calls(client, 30)[10:])
            fake.default = realistic_reply(close_connection=True)
            new_connection = median(timed_calls(client, 30)[10:])
        firsts.append(first)
        steadies.append(steady)
        fresh.append(new_connection)
        ratios.append(first / steady)
        fresh_ratios.append(first / new_connection)
        fake.clear()
    fake.default = realistic_reply()
    ratio = median(ratios)
    results.add(
        "first `tools/call`, sent 2 s after `initialize`",
        ms(median(firsts)),
        f"steady call {ms(median(steadies))}; steady call on a new connection each "
        f"{ms(median(fresh))}, first call {median(fresh_ratios):.2f}× that",
        f"{ratio:.2f}× (+{(median(firsts) - median(steadies)) * 1000:.1f} ms)",
        "≤ 1.3×",
        ratio <= 1.3,
        first=spread(firsts),
        steady=spread(steadies),
        steady_new_connection=spread(fresh),
        ratios=ratios,
        ratios_to_new_connection=fresh_ratios,
    )


def bench_concurrency(install: Install, fake, results: Results, rounds: int) -> None:
    """50 tools/calls written at once, each held 500 ms upstream; wall time to the last reply.

    The fake's listen backlog is raised to 128 for this (the stdlib default of 5 would drop
    connection attempts and add the kernel's 1 s SYN retry, which measures the fake). Each
    round is followed by the same 50 calls made directly with the SDK from 50 threads of one
    process, the baseline for what the upstream and the SDK alone take here.
    """
    fake.default = realistic_reply(delay_before_headers=0.5)
    env = install.env(OPENAI_BASE_URL=fake.base_url)
    walls, direct_walls = [], []
    direct = DirectSDK(fake.base_url)
    with Client(install, env) as client:
        client.initialize()
        wait_warm(client)
        for _ in range(rounds):
            batch = b"".join(
                frame(
                    {
                        "jsonrpc": "2.0",
                        "id": f"c{i}",
                        "method": "tools/call",
                        "params": client.call_params(f"{QUERY} ({i})"),
                    }
                )
                for i in range(50)
            )
            started = time.perf_counter()
            client.write(batch)
            answered = 0
            while answered < 50:
                reply = client.recv()
                if "result" not in reply:
                    raise RuntimeError(f"a concurrent call failed: {reply}")
                answered += 1
            walls.append(time.perf_counter() - started)
            fake.clear()
            direct_walls.append(direct.call("burst 50"))
            fake.clear()
    direct.close()
    fake.default = realistic_reply()
    cold, warm = walls[0], walls[1:]
    direct_warm = direct_walls[1:]
    results.add(
        "50 concurrent calls, upstream 500 ms each (wall)",
        ms(median(warm)),
        f"50 direct `openai` calls on 50 threads {ms(median(direct_warm))}; "
        f"server's first round (new connections) {ms(cold)}",
        ms(median(warm)),
        "≤ 0.6 s",
        median(warm) <= 0.6,
        warm=spread(warm),
        cold=cold,
        direct=spread(direct_warm),
    )


def bench_cancel(install: Install, fake, results: Results, runs: int) -> None:
    """notifications/cancelled written -> the fake sees the upstream connection close.

    Each call is stalled by the fake after 3 stream events, so the worker is blocked reading
    the stream. Both clocks are time.monotonic() in this process: the fake records the
    moment its select() sees the client's FIN.
    """
    env = install.env(OPENAI_BASE_URL=fake.base_url)
    latencies = []
    with Client(install, env) as client:
        client.initialize()
        wait_warm(client)
        client.call()
        for _ in range(runs):
            fake.clear()
            fake.enqueue(realistic_reply(stall_after_events=3, stall_seconds=30))
            request_id = client.send_request("tools/call", client.call_params())
            (record,) = fake.wait_for_requests(1, timeout=10)
            if not wait_until(lambda r=record: r.events_sent >= 3, 10, 0.0005):
                raise TimeoutError("the fake never stalled")
            time.sleep(0.005)  # let the worker block in its read
            note = {
                "jsonrpc": "2.0",
                "method": "notifications/cancelled",
                "params": {"requestId": request_id, "reason": "bench"},
            }
            data = frame(note)
            started = time.monotonic()
            client.write(data)
            closed = fake.wait_for_disconnect(0, timeout=10)
            latencies.append(closed - started)
        reply = client.request("ping")  # the cancelled calls sent nothing; the server serves on
        if "result" not in reply:
            raise RuntimeError(f"ping after cancellations failed: {reply}")
    results.add(
        "`notifications/cancelled` → upstream connection closed",
        ms(median(latencies)),
        "-",
        ms(median(latencies)),
        "≤ 5 ms",
        median(latencies) <= 0.005,
        latency=spread(latencies),
    )


def bench_resume(install: Install, fake, results: Results, runs: int) -> None:
    """Upstream stream dropped mid-answer -> the first event after it reaches the server.

    In background mode (`answer_detailed`) the server resumes the same response with
    GET /responses/{id}?stream=true&starting_after=N; the baseline, in the same run, is a call
    without background mode (`answer`), which sends the whole request again after its retry
    backoff (and is billed twice). Both clocks are the fake's, in this process: the moment its
    drop fault closed the connection, and the moment the next stream's first event went out.
    """
    env = install.env(OPENAI_BASE_URL=fake.base_url)
    resumed, resent = [], []
    with Client(install, env) as client:
        client.initialize()
        wait_warm(client)
        client.call()
        for run in range(runs):
            for tool, samples in (("answer_detailed", resumed), ("answer", resent)):
                fake.clear()
                fake.enqueue(realistic_reply(drop_after_events=6), realistic_reply())
                params = {"name": tool, "arguments": {"query": f"{QUERY} ({run})"}}
                reply = client.request("tools/call", params)
                if "result" not in reply:
                    raise RuntimeError(f"tools/call failed: {reply}")
                first, second = fake.wait_for_requests(2, timeout=10)[:2]
                if tool == "answer_detailed" and (second.method != "GET" or len(fake.creates) != 1):
                    raise RuntimeError("the background call did not resume")
                samples.append(second.first_event_at - first.dropped_at)
    results.add(
        "upstream stream dropped → first resumed event (background mode)",
        ms(median(resumed)),
        f"re-sent request: {ms(median(resent))}",
        ms(median(resumed)),
        "≤ 20 ms, one create",
        median(resumed) <= 0.020,
        resumed=spread(resumed),
        resent=spread(resent),
    )


def bench_task_create(install: Install, fake, results: Results, runs: int) -> None:
    """tools/call with params.task (MCP 2025-11-25) -> its CreateTaskResult read: how long a
    client waits before it holds a task id. The baseline, in the same process, is a ping's round
    trip. Each call's upstream is stalled, so every task is still working when created; each is
    cancelled with tasks/cancel before the next (the per-client limit stays clear).
    """
    env = install.env(OPENAI_BASE_URL=fake.base_url)
    created, pings = [], []
    with Client(install, env) as client:
        init = initialize_message()
        init["params"]["protocolVersion"] = "2025-11-25"
        client.send(init)
        client.recv()
        wait_warm(client)
        client.call()
        for run in range(runs):
            fake.clear()
            fake.enqueue(realistic_reply(stall_after_events=3, stall_seconds=30))
            params = {**client.call_params(f"{QUERY} ({run})"), "task": {"ttl": 600_000}}
            started = time.perf_counter()
            reply = client.request("tools/call", params)
            created.append(time.perf_counter() - started)
            if "task" not in reply.get("result", {}):
                raise RuntimeError(f"no CreateTaskResult: {reply}")
            started = time.perf_counter()
            client.request("ping")
            pings.append(time.perf_counter() - started)
            client.request("tasks/cancel", {"taskId": reply["result"]["task"]["taskId"]})
    results.add(
        "`tools/call` with `params.task` → `CreateTaskResult` (2025-11-25)",
        ms(median(created)),
        f"ping: {ms(median(pings))}",
        ms(median(created)),
        "≤ 5 ms",
        median(created) <= 0.005,
        created=spread(created),
        ping=spread(pings),
    )


def bench_throughput(install: Install, results: Results, messages: int, runs: int) -> None:
    """Pipelined ping: all requests written by one thread while this one counts replies.

    No upstream is involved. Rate = messages / (first byte written -> last reply read),
    median over runs, one fresh server per framing (the server answers in the framing the
    client used, and newline mode is sticky once seen).
    """
    for framing in ("line", "framed"):
        rates = []
        with Client(install) as client:
            client.initialize(framing)
            payload = b"".join(
                frame({"jsonrpc": "2.0", "id": i, "method": "ping"}, framing)
                for i in range(messages)
            )
            marker = b"\n" if framing == "line" else b"Content-Length:"
            for _ in range(runs + 1):
                writer = threading.Thread(target=client.write, args=(payload,))
                started = time.perf_counter()
                writer.start()
                seen, tail = 0, b""
                deadline = time.monotonic() + 120
                while seen < messages:
                    if not select.select([client._out], [], [], deadline - time.monotonic())[0]:
                        raise TimeoutError("ping replies stopped")
                    chunk = os.read(client._out, 1 << 20)
                    if not chunk:
                        raise EOFError(client.stderr_text())
                    # A marker split across reads is counted once: `tail` is too short to
                    # hold a whole one.
                    data = tail + chunk
                    seen += data.count(marker)
                    tail = data[-(len(marker) - 1) :] if len(marker) > 1 else b""
                elapsed = time.perf_counter() - started
                writer.join()
                rates.append(messages / elapsed)
            rates = rates[1:]  # the first run warms the pipe buffers and the allocator
            reply = client.request("ping", framing=framing)
            assert reply == {"jsonrpc": "2.0", "id": client._next_id, "result": {}}, reply
        label = "newline-delimited" if framing == "line" else "Content-Length"
        rate = median(rates)
        results.add(
            f"pipelined `ping` throughput, {label}",
            f"{rate:,.0f} msg/s",
            "-",
            f"{rate:,.0f} msg/s",
            "≥ 60,000 msg/s",
            rate >= 60_000,
            rates=spread(rates),
            messages=messages,
        )


def bench_keepalive(install: Install, results: Results, runs: int) -> None:
    """`--http`: a `ping` POSTed on one kept-alive connection (every SDK client reuses its
    connection), interleaved with the same POST on a new connection each time.

    http.client in this process, one request at a time; the clock runs from the request's
    first byte to its response's last. Before TCP_NODELAY and one write per response, the
    kept-alive request waited ~40 ms for a delayed ACK while a new connection did not.
    """
    import http.client
    import re

    stderr = tempfile.TemporaryFile()  # noqa: SIM115 - closed below
    argv = install.entry_argv("--http", "127.0.0.1:0")
    proc = subprocess.Popen(argv, stderr=stderr, env=install.env(), cwd=str(install.dir))
    try:

        def listening():
            stderr.seek(0)
            return re.search(rb"serving MCP on http://127\.0\.0\.1:(\d+)/mcp", stderr.read())

        if not wait_until(listening, 15):
            raise TimeoutError("the --http server did not start")
        port = int(listening().group(1))
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        body = json.dumps(initialize_message()).encode()

        def post(conn, message_body: bytes, extra: dict) -> bytes:
            conn.request("POST", "/mcp", body=message_body, headers={**headers, **extra})
            response = conn.getresponse()
            data = response.read()
            if response.status != 200:
                raise RuntimeError(f"HTTP {response.status}: {data[:200]!r}")
            return response.getheader("Mcp-Session-Id") or data

        kept = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        session = {"Mcp-Session-Id": post(kept, body, {}), "MCP-Protocol-Version": "2025-06-18"}
        ping = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"}).encode()
        for _ in range(20):
            post(kept, ping, session)
        alive, fresh = [], []
        for _ in range(runs):
            started = time.perf_counter()
            post(kept, ping, session)
            alive.append(time.perf_counter() - started)
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            started = time.perf_counter()
            post(conn, ping, session)
            fresh.append(time.perf_counter() - started)
            conn.close()
        kept.close()
    finally:
        proc.terminate()
        proc.wait(10)
        stderr.close()
    results.add(
        "`--http`: `ping` on a kept-alive connection",
        ms(median(alive)),
        f"same on a new connection {ms(median(fresh))}",
        ms(median(alive)),
        "≤ 1 ms",
        median(alive) <= 0.001,
        keepalive=spread(alive),
        new_connection=spread(fresh),
    )


# What any program pays to make calls with the SDK: `openai` imported and one client built.
SDK_ONLY = (
    "import sys, openai; openai.OpenAI(api_key='sk-bench', max_retries=0); "
    "print('ready', flush=True); sys.stdin.read()"
)


def sdk_only_rss(install: Install) -> float:
    """VmRSS (MiB) of a bare process holding an OpenAI client: the idle server's baseline."""
    proc = subprocess.Popen(
        [PYTHON, "-c", SDK_ONLY],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=install.env(),
    )
    try:
        proc.stdout.readline()
        time.sleep(0.2)
        with open(f"/proc/{proc.pid}/status") as handle:
            kib = next(int(line.split()[1]) for line in handle if line.startswith("VmRSS:"))
        return kib / 1024
    finally:
        proc.stdin.close()
        proc.wait(10)
        proc.stdout.close()


def bench_memory(install: Install, fake, results: Results, total_calls: int) -> None:
    """VmRSS of the server: idle right after initialize (the background import of `openai`
    starts 0.3 s later; checked by pydantic_core not yet being mapped), idle once `openai` is
    loaded, then after 1,000 calls and every 1,000 to `total_calls` (8 in flight at a time)."""
    fake.default = realistic_reply()
    env = install.env(OPENAI_BASE_URL=fake.base_url)
    with Client(install, env) as client:
        client.initialize()
        before = client.rss_mib()
        loaded_early = client.has_loaded("pydantic_core")
        wait_warm(client)
        time.sleep(0.2)
        loaded = client.rss_mib()
        marks = {}
        done = 0
        in_flight = 8
        while done < total_calls:
            batch = b"".join(
                frame(
                    {
                        "jsonrpc": "2.0",
                        "id": done + i,
                        "method": "tools/call",
                        "params": client.call_params(),
                    }
                )
                for i in range(in_flight)
            )
            client.write(batch)
            for _ in range(in_flight):
                reply = client.recv()
                if "result" not in reply:
                    raise RuntimeError(f"a call failed: {reply}")
            done += in_flight
            if done % 1000 == 0:
                fake.clear()
                marks[done] = client.rss_mib()
        threads = client.threads()
    sdk = median(sdk_only_rss(install) for _ in range(3))
    after_1000 = marks[1000]
    last = max(marks)
    growth = marks[last] - after_1000
    flat = growth <= max(2.0, 0.03 * after_1000)
    results.add(
        "resident memory, idle before `openai` loads",
        f"{before:.1f} MiB",
        "-",
        f"{before:.1f} MiB" + (" (openai already mapped!)" if loaded_early else ""),
        "≤ 25 MiB",
        before <= 25 and not loaded_early,
        rss=before,
    )
    results.add(
        "resident memory, idle with `openai` loaded",
        f"{loaded:.1f} MiB",
        f"`import openai` + a client, nothing else: {sdk:.1f} MiB",
        f"{loaded:.1f} MiB (+{loaded - sdk:.1f} MiB over the SDK alone)",
        "≤ 55 MiB",
        loaded <= 55,
        rss=loaded,
        sdk_only=sdk,
    )
    results.add(
        "resident memory after 1,000 calls",
        f"{after_1000:.1f} MiB",
        "-",
        f"{after_1000:.1f} MiB",
        "≤ 95 MiB",
        after_1000 <= 95,
        rss=after_1000,
    )
    results.add(
        f"resident memory growth, 1,000 → {last:,} calls",
        f"{marks[last]:.1f} MiB at {last:,}",
        f"{after_1000:.1f} MiB at 1,000",
        f"{growth:+.1f} MiB",
        "flat (≤ +2 MiB or 3 %)",
        flat,
        marks={str(k): v for k, v in marks.items()},
        threads_after=threads,
    )


# ------------------------------------------------------------------------------------------
# Main
# ------------------------------------------------------------------------------------------


# ------------------------------------------------------------------------------------------
# Cost: the answer cache and the usage ledger (issue 9)
# ------------------------------------------------------------------------------------------


def bench_cache_hit(install: Install, fake, results: Results, runs: int) -> None:
    """A repeated question answered from the cache, vs `ping`, interleaved in one session."""
    fake.default = realistic_reply()
    env = install.env(OPENAI_BASE_URL=fake.base_url, ANSWER_CACHE_TTL_S="600")
    with Client(install, env) as client:
        client.initialize()
        client.call()  # fills the cache
        for _ in range(20):
            client.call()
        hits, pings = [], []
        for _ in range(runs):
            started = time.perf_counter()
            reply = client.call()
            hits.append(time.perf_counter() - started)
            started = time.perf_counter()
            client.request("ping")
            pings.append(time.perf_counter() - started)
        assert reply["result"]["_meta"]["cache"]["hit"] is True
    results.add(
        "cache-hit `tools/call` round trip",
        ms(median(hits)),
        f"`ping` {ms(median(pings))}",
        ms(median(hits)),
        "≤ 2 ms",
        median(hits) <= 0.002,
        hit=spread(hits),
        ping=spread(pings),
    )


def bench_ledger(install: Install, results: Results, runs: int) -> None:
    """What the ledger adds to a call: one row queued for the writer thread, plus the budget's
    sum when a budget is set, timed in-process against the module's own Ledger on a file
    holding `runs` rows."""
    sys.path.insert(0, str(install.dir))
    import openai_responses_mcp as m

    log = m.Log()
    state = m.StateStore(m._SqliteBackend(str(install.dir / "ledger-bench.sqlite3")), log)
    ledger = m.Ledger(state, "Asia/Tokyo")
    meta = {"usage": {"input_tokens": 3000, "output_tokens": 500}, "cost": {"usd": 0.01}}
    today = m.today_in("Asia/Tokyo")
    for _ in range(50):
        ledger.record(m.UsageRow("answer", "gpt-5.2", "ok", meta))
    writes, sums = [], []
    for _ in range(runs):
        started = time.perf_counter()
        ledger.record(m.UsageRow("answer", "gpt-5.2", "ok", meta))
        writes.append(time.perf_counter() - started)
        started = time.perf_counter()
        ledger.spent_since(today)
        sums.append(time.perf_counter() - started)
    state.close()
    both = median(writes) + median(sums)
    results.add(
        "usage ledger per call (row written + budget sum)",
        f"{median(writes) * 1000:.3f} ms + {median(sums) * 1000:.3f} ms",
        "no ledger (state.path: off) 0 ms",
        f"{both * 1000:.3f} ms",
        "≤ 0.5 ms",
        both <= 0.0005,
        write=spread(writes),
        budget_sum=spread(sums),
        rows=runs + 50,
    )


def bench_writers(install: Install, fake, results: Results, calls: int) -> None:
    """8 server processes sharing one state file, each making `calls` calls at once: no lock
    warnings, and the ledger's totals equal the sum of the answers' costs."""
    fake.default = realistic_reply()
    state = install.dir / "writers.sqlite3"
    env = install.env(OPENAI_BASE_URL=fake.base_url, OPENAI_RESPONSES_MCP_STATE=str(state))
    clients = [Client(install, env) for _ in range(8)]
    costs: list[float] = []
    lock = threading.Lock()

    def run(index: int, client: Client) -> None:
        client.initialize()
        for n in range(calls):
            reply = client.request(
                "tools/call", client.call_params(f"writer {index} call {n}"), timeout=120
            )
            with lock:
                costs.append(reply["result"]["_meta"]["cost"]["usd"])

    started = time.perf_counter()
    threads = [threading.Thread(target=run, args=(i, c)) for i, c in enumerate(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    warnings = sum(c.stderr_text().count("state file") for c in clients)
    for client in clients:
        client.close()
    fake.clear()
    import sqlite3

    with contextlib.closing(sqlite3.connect(state)) as conn:
        rows, usd = conn.execute("SELECT COUNT(*), SUM(usd) FROM usage").fetchone()
    exact = rows == 8 * calls == len(costs) and abs(usd - sum(costs)) < 1e-9
    results.add(
        f"8 processes x {calls} calls writing one ledger at once",
        f"{rows} rows, ${usd:.6f}; {warnings} lock warnings; {elapsed:.1f} s",
        f"{len(costs)} answers, ${sum(costs):.6f}",
        "exact" if exact and not warnings else "MISMATCH",
        "no lock errors, exact totals",
        exact and not warnings,
        rows=rows,
        usd=usd,
        answers=len(costs),
        answers_usd=sum(costs),
        warnings=warnings,
        seconds=elapsed,
    )


def bench_backends(install: Install, fake, results: Results, runs: int) -> None:
    """What each state backend adds to a call, beside a server with no state, in one run.

    Calls alternate one by one between a server with state off, one on a SQLite file and one
    on PostgreSQL (a throwaway cluster, started as the tests start theirs; left out where
    PostgreSQL or psycopg is not installed). Both backends have a daily budget, so each call
    also reserves its cost before it starts and settles it after: the one transaction on the
    answer path. The ledger row and the settlement go to the writer thread.
    """
    fake.default = realistic_reply()
    config = install.dir / "budget.yaml"
    config.write_text("budget: {daily_usd: 1000000}\n", encoding="utf-8")
    budgeted = install.entry_argv("--stdio", "--config", str(config))
    cluster = None
    try:
        sys.path.insert(0, str(ROOT / "tests"))
        import conftest

        if conftest.postgres_bin() is not None and importlib.util.find_spec("psycopg"):
            cluster = conftest.PostgresCluster(conftest.postgres_bin())
    except Exception as exc:  # noqa: BLE001 - the figure says why PostgreSQL is left out
        print(f"  PostgreSQL left out: {exc}", file=sys.stderr)
    base = {"OPENAI_BASE_URL": fake.base_url}
    servers = {
        "off": Client(install, install.env(**base, OPENAI_RESPONSES_MCP_STATE="off")),
        "SQLite": Client(
            install,
            install.env(**base, OPENAI_RESPONSES_MCP_STATE=str(install.dir / "backends.db")),
            budgeted,
        ),
    }
    if cluster is not None:
        url = cluster.fresh_database()
        env = install.env(**base, OPENAI_RESPONSES_MCP_STATE_URL=url)
        servers["PostgreSQL"] = Client(install, env, budgeted)
    samples: dict = {name: [] for name in servers}
    try:
        for client in servers.values():
            client.initialize()
            for _ in range(20):
                client.call()
        for i in range(runs):
            for name, client in servers.items():
                started = time.perf_counter()
                client.call()
                samples[name].append(time.perf_counter() - started)
            if i % 100 == 99:
                fake.clear()
    finally:
        for client in servers.values():
            client.close()
        if cluster is not None:
            cluster.remove()
    off = median(samples["off"])
    for name, target in (("SQLite", 0.002), ("PostgreSQL", 0.003)):
        if name not in samples:
            results.add(f"{name} state per call", "not installed", "", "-", "-", None)
            continue
        taken = median(samples[name])
        results.add(
            f"{name} state per call (budget reserved and settled, ledger row, over no state)",
            ms(taken),
            f"state off {ms(off)}",
            f"{(taken - off) * 1000:+.2f} ms (x{taken / off:.2f})",
            f"≤ {target * 1000:.0f} ms",
            taken - off <= target,
            backend=spread(samples[name]),
            off=spread(samples["off"]),
            ratio=taken / off,
        )


def machine() -> dict:
    cpu = "unknown"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    memory = 0
    with contextlib.suppress(OSError, ValueError, IndexError):
        memory = int(Path("/proc/meminfo").read_text().split()[1]) // 1024 // 1024
    try:
        import openai

        openai_version = openai.__version__
    except ImportError:
        openai_version = "not installed"
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory_gib": memory,
        "os": f"{platform.system()} {platform.release()}",
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "openai": openai_version,
    }


FIGURES = (
    "startup",
    "dropin",
    "roundtrip",
    "call",
    "first",
    "concurrency",
    "cancel",
    "resume",
    "task",
    "throughput",
    "keepalive",
    "memory",
    "cachehit",
    "ledger",
    "writers",
    "backends",
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--quick",
        action="store_true",
        help="fewer repetitions (about 40 s)",
    )
    parser.add_argument("--json", metavar="PATH", help="also write the figures as JSON")
    parser.add_argument("--only", metavar="NAMES", help="comma-separated: " + ",".join(FIGURES))
    options = parser.parse_args(argv)
    only = set(options.only.split(",")) if options.only else set(FIGURES)
    unknown = only - set(FIGURES)
    if unknown:
        parser.error(f"unknown figure(s): {', '.join(sorted(unknown))}")
    quick = options.quick
    info = machine()
    print(
        f"machine: {info['cpu']}, {info['cores']} cores, {info['memory_gib']} GiB, {info['os']}, "
        f"{info['python']}, openai {info['openai']}",
        file=sys.stderr,
    )
    results = Results()
    install = Install()
    started = time.monotonic()
    try:
        with fake_upstream.FakeResponsesAPI() as fake:
            if "startup" in only:
                bench_startup(install, results, 15 if quick else 40)
            if "dropin" in only:
                bench_dropin(install, fake, results, 10 if quick else 30)
            if "roundtrip" in only:
                bench_round_trips(install, results, 200 if quick else 1000)
            if "call" in only:
                bench_call_overhead(install, fake, results, 100 if quick else 400)
            if "first" in only:
                bench_first_call(install, fake, results, 3 if quick else 7)
            if "concurrency" in only:
                bench_concurrency(install, fake, results, 3 if quick else 6)
            if "cancel" in only:
                bench_cancel(install, fake, results, 10 if quick else 40)
            if "resume" in only:
                bench_resume(install, fake, results, 5 if quick else 20)
            if "task" in only:
                bench_task_create(install, fake, results, 20 if quick else 100)
            if "throughput" in only:
                bench_throughput(install, results, 20_000 if quick else 100_000, 3 if quick else 5)
            if "keepalive" in only:
                bench_keepalive(install, results, 200 if quick else 1000)
            if "memory" in only:
                bench_memory(install, fake, results, 2000 if quick else 5000)
            if "cachehit" in only:
                bench_cache_hit(install, fake, results, 200 if quick else 1000)
            if "ledger" in only:
                bench_ledger(install, results, 500 if quick else 3000)
            if "writers" in only:
                bench_writers(install, fake, results, 50 if quick else 200)
            if "backends" in only:
                bench_backends(install, fake, results, 100 if quick else 400)
    finally:
        install.cleanup()
    print(f"\n{results.table()}\n")
    print(
        f"Machine: {info['cpu']}, {info['cores']} cores, {info['memory_gib']} GiB; {info['os']}; "
        f"{info['python']}; openai {info['openai']}. "
        f"{'Quick run' if quick else 'Full run'}, {time.monotonic() - started:.0f} s."
    )
    if options.json:
        document = {
            "machine": info,
            "quick": quick,
            "seconds": time.monotonic() - started,
            "figures": results.rows,
        }
        Path(options.json).write_text(json.dumps(document, indent=2, ensure_ascii=False) + "\n")
    missed = [row["figure"] for row in results.rows if row["met"] is False]
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
