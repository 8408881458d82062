"""The warm start (tests/warmstart.py) against a cold one: a server forked from the warm parent
must be observably the process a fresh interpreter would be, or the launcher must start cold.

Each test runs the same small program both ways through the same launcher (conftest's
LAUNCHER): a stand-in for the module, in a root of its own, served by a warm parent of its own,
that prints what it sees of its process or ends as it is told."""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from conftest import LAUNCHER, ROOT, WARM, Server, default_action, wait_until

pytestmark = pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="no warm start here")

PROBE = r"""
import json, os, signal, sys, threading, time

def state():
    import resource
    umask = os.umask(0)
    os.umask(umask)
    names = ("RLIMIT_NOFILE", "RLIMIT_FSIZE")
    limits = {n: resource.getrlimit(getattr(resource, n)) for n in names}
    return {
        "pid": os.getpid(), "pgid": os.getpgid(0), "sid": os.getsid(0),
        "cwd": os.getcwd(), "umask": umask, "limits": limits,
        "signals": {n: str(signal.getsignal(n)) for n in signal.valid_signals()
                    if n not in (signal.SIGKILL, signal.SIGSTOP)},
        "mask": sorted(int(n) for n in signal.pthread_sigmask(signal.SIG_BLOCK, [])),
        "env": dict(os.environ), "argv": sys.argv, "path": sys.path, "flags": str(sys.flags),
        "fds": sorted(os.listdir("/proc/self/fd")),
        "threads": threading.active_count(), "tz": [time.tzname, time.timezone],
        "tty": [os.isatty(fd) for fd in (0, 1, 2)],
        "stdio": [(s.encoding, s.errors, s.line_buffering) for s in (sys.stdin, sys.stdout,
                                                                     sys.stderr)],
    }

command = sys.argv[1]
if command == "state":
    print(json.dumps(state()))
elif command == "exit":
    value = sys.argv[2]
    sys.exit(None if value == "none" else int(value) if value.lstrip("-").isdigit() else value)
elif command == "raise":
    raise ValueError("boom")
elif command == "interrupt":
    raise KeyboardInterrupt
elif command == "count":
    got = []
    signal.signal(signal.SIGTERM, lambda *_: got.append(1))
    print(os.getpid(), flush=True)
    while not got:
        time.sleep(0.01)  # sleep: this child program's own wait for its first signal
    time.sleep(0.3)  # sleep: the point: a second one, if any, arrives
    print(len(got), flush=True)
elif command == "wait":
    print(os.getpid(), flush=True)
    sys.stdin.read()
    print("eof", flush=True)
"""


@pytest.fixture(scope="module")
def probe(tmp_path_factory):
    """run(args, warm, env=..., **popen): the stand-in run through the launcher, warm (from this
    module's warm parent) or cold."""
    root = tmp_path_factory.mktemp("probe-root")
    (root / "openai_responses_mcp.py").write_text(PROBE)
    (root / "tests").symlink_to(ROOT / "tests")
    address = str(root / "s")
    parent_env = {k: v for k, v in os.environ.items() if k not in (WARM, "PYTHONDONTWRITEBYTECODE")}
    parent = subprocess.Popen(
        [sys.executable, str(ROOT / "tests" / "warmstart.py"), "serve", address, str(root)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=parent_env,
    )
    assert parent.stdout.readline().strip() == b"ready"

    def environment(warm: bool, env: dict | None) -> dict:
        merged = {**parent_env, **(env or {})}
        if warm:
            merged[WARM] = address
        return merged

    def popen(args, warm, env=None, **kw):
        program = [sys.executable, "-S", "-c", LAUNCHER, str(root), *args]
        return subprocess.Popen(program, env=environment(warm, env), cwd=str(root), **kw)

    def run(args, warm, env=None, **kw):
        program = [sys.executable, "-S", "-c", LAUNCHER, str(root), *args]
        return subprocess.run(
            program, capture_output=True, text=True, env=environment(warm, env), cwd=str(root),
            timeout=30, **kw,
        )  # fmt: skip

    run.popen, run.env, run.address, run.parent = popen, parent_env, address, parent
    yield run
    parent.stdin.close()
    parent.wait(10)
    parent.stdout.close()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def state(probe, warm: bool, **kw) -> dict:
    proc = probe(["state"], warm, **kw)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def same_process(warm: dict, cold: dict) -> None:
    names = ("tz", "tty", "cwd", "umask", "limits", "signals", "mask", "env", "argv", "path")
    for name in (*names, "flags", "fds"):
        assert warm[name] == cold[name], name
    assert warm["stdio"] == cold["stdio"]
    assert warm["threads"] == cold["threads"] == 1


@pytest.mark.parametrize(
    "args", [["exit", "0"], ["exit", "3"], ["exit", "70"], ["exit", "256"], ["exit", "-1"],
             ["exit", "a message"], ["exit", "none"], ["raise"], ["interrupt"]],
)  # fmt: skip
def test_a_warm_server_ends_with_the_status_and_stderr_of_a_cold_one(probe, args):
    warm, cold = probe(args, True), probe(args, False)
    assert warm.returncode == cold.returncode
    # a traceback's last lines: its first ones name the frames that ran the module (ours or
    # `<string>`), not the program's
    assert warm.stderr.splitlines()[-2:] == cold.stderr.splitlines()[-2:]
    if args == ["interrupt"]:
        assert warm.returncode == -signal.SIGINT
        assert warm.stderr.splitlines()[-1] == "KeyboardInterrupt"


def test_a_warm_server_has_the_process_state_a_cold_one_has(probe):
    warm, cold = state(probe, True), state(probe, False)
    assert warm["pid"] != warm["pgid"] or warm["pid"] != warm["sid"]  # forked, not exec'd
    same_process(warm, cold)


def test_a_warm_server_takes_the_launchers_umask_limits_and_signals(probe):
    """What a preexec_fn, or the test process itself, set on the launcher."""

    def restrict():
        os.umask(0o077)
        resource.setrlimit(resource.RLIMIT_NOFILE, (200, 200))
        _soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
        resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, hard))
        signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGUSR1])
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)

    warm = state(probe, True, preexec_fn=restrict)
    cold = state(probe, False, preexec_fn=restrict)
    assert cold["umask"] == 0o077 and cold["limits"]["RLIMIT_NOFILE"] == [200, 200]
    same_process(warm, cold)


def test_a_warm_server_is_in_the_launchers_process_group(probe):
    seen = state(probe, True)
    assert seen["pid"] != os.getpid() and seen["pgid"] == os.getpgid(0)


@pytest.mark.parametrize("group", [{"process_group": 0}, {"start_new_session": True}])
def test_a_launcher_leading_its_own_group_starts_cold(probe, group):
    """A group made to be signalled as one (os.killpg): a forked server either outside it or
    in it as well as behind the launcher, which passes the signal on, would not take it once."""
    proc = probe.popen(["count"], True, stdout=subprocess.PIPE, **group)
    assert int(proc.stdout.readline()) == proc.pid  # the server is the launcher: cold
    os.killpg(proc.pid, signal.SIGTERM)
    assert proc.stdout.readline() == b"1\n"  # one SIGTERM, as the group was sent one
    assert proc.wait(10) == 0
    proc.stdout.close()


def test_a_launcher_whose_flags_differ_from_the_warm_parents_starts_cold(probe):
    """sys.flags is the warm parent's in a forked child: PYTHONDONTWRITEBYTECODE is one."""
    env = {"PYTHONDONTWRITEBYTECODE": "1"}
    warm, cold = state(probe, True, env=env), state(probe, False, env=env)
    assert "dont_write_bytecode=1" in cold["flags"]
    same_process(warm, cold)


def test_stdin_eof_reaches_a_warm_server_and_its_stdout_closes_when_it_ends(probe):
    proc = probe.popen(["wait"], True, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    pid = int(proc.stdout.readline())
    assert pid != proc.pid
    proc.stdin.close()
    assert proc.stdout.readline() == b"eof\n"
    assert proc.stdout.read() == b""  # EOF: the launcher holds no copy of the pipe
    assert proc.wait(10) == 0
    proc.stdout.close()


def test_a_killed_launcher_takes_its_warm_server_with_it(probe):
    proc = probe.popen(["wait"], True, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    pid = int(proc.stdout.readline())
    proc.kill()
    assert proc.wait(10) == -signal.SIGKILL
    deadline = time.monotonic() + 10
    assert proc.stdout.read() == b""  # the server's end of the pipe closed: it is gone
    assert time.monotonic() < deadline
    wait_until(lambda: not _alive(pid), 10, "the warm parent to reap its server")
    proc.stdin.close()
    proc.stdout.close()


def test_a_launcher_with_stdin_closed_starts_cold(probe):
    """No descriptor 0 to send: a fresh interpreter runs with sys.stdin None."""
    warm = probe(["exit", "4"], True, preexec_fn=lambda: os.close(0))
    cold = probe(["exit", "4"], False, preexec_fn=lambda: os.close(0))
    assert warm.returncode == cold.returncode == 4, warm.stderr


def test_a_warm_parent_whose_worker_is_gone_leaves_nothing_behind(tmp_path):
    """A pytest worker killed (kill -9) closes the parent's stdin: its servers are killed and
    its socket's folder (/tmp/ormcp-warm-*) removed, as the fixture would have."""
    folder = tmp_path / "ormcp-warm-x"
    folder.mkdir()
    address = str(folder / "s")
    parent = subprocess.Popen(
        [sys.executable, str(ROOT / "tests" / "warmstart.py"), "serve", address, str(ROOT)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env={k: v for k, v in os.environ.items() if k != WARM},
    )
    assert parent.stdout.readline().strip() == b"ready"
    parent.stdin.close()
    assert parent.wait(10) == 0
    parent.stdout.close()
    assert not folder.exists()


def test_a_stopped_warm_server_has_exited_when_stop_returns(probe, tmp_path):
    """Killing the launcher (SIGKILL, which it cannot pass on) ends the server only once the
    warm parent sees it: `Server.stop` waits for that, for a test that restarts on the same port
    or state. The parent is held stopped to make the moment between the two last."""
    server = Server(["wait"], {**probe.env, WARM: probe.address}, tmp_path)
    pid = server.recv()
    assert pid != server.proc.pid
    os.kill(probe.parent.pid, signal.SIGSTOP)
    try:
        stopping = threading.Thread(target=server.stop)
        stopping.start()
        stopping.join(0.5)
        assert stopping.is_alive()  # the server still runs: stop() has not returned
    finally:
        os.kill(probe.parent.pid, signal.SIGCONT)
    stopping.join(10)
    assert not stopping.is_alive()
    wait_until(lambda: not _alive(pid), 10, "the warm parent to reap its server")


@pytest.mark.parametrize(
    "env",
    [{"TZ": "Asia/Tokyo"}, {"PYTHONIOENCODING": "latin-1:replace"}, {"PYTHONUNBUFFERED": ""},
     {"LANG": "C", "LC_ALL": "C"}],
)  # fmt: skip
def test_a_warm_server_reads_its_environment_as_a_cold_one(probe, env):
    same_process(state(probe, True, env=env), state(probe, False, env=env))


def test_a_warm_server_on_a_terminal_sees_one(probe):
    import pty

    seen = {}
    for warm in (True, False):
        master, slave = pty.openpty()
        proc = probe.popen(["state"], warm, stdin=slave, stdout=slave, stderr=subprocess.PIPE)
        os.close(slave)
        out = b""
        while b"\n" not in out:
            out += os.read(master, 65536)
        assert proc.wait(10) == 0, proc.stderr.read()
        proc.stderr.close()
        os.close(master)
        seen[warm] = json.loads(out)
    assert seen[True]["tty"] == [True, True, False]
    same_process(seen[True], seen[False])


@pytest.mark.parametrize("how", ["SIGTERM", "SIGINT", "SIGKILL"])
def test_a_signalled_warm_server_ends_as_a_cold_one(probe, how):
    codes = []
    for warm in (True, False):
        proc = probe.popen(
            ["wait"], warm, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            preexec_fn=default_action(how),
        )  # fmt: skip
        try:
            pid = int(proc.stdout.readline())
            proc.send_signal(getattr(signal, how))
            codes.append(proc.wait(10))
            # the server itself is gone too, not only its launcher: a later test counts them
            assert proc.stdout.read() == b""
            wait_until(lambda pid=pid: not _alive(pid), 10, "the signalled server to be reaped")
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
            proc.stdin.close()
            proc.stdout.close()
    assert codes == [-getattr(signal, how)] * 2  # each ended by the signal, as Python ends


def test_fifty_launchers_at_once_all_start_warm(probe):
    procs = [probe.popen(["exit", str(n)], True, stdout=subprocess.PIPE) for n in range(50)]
    assert [proc.wait(60) for proc in procs] == list(range(50))
    for proc in procs:
        proc.stdout.close()


def test_a_launcher_killed_before_it_reads_the_pid_leaves_the_warm_parent_serving(probe):
    """Killed between its message and the parent's reply (a test that stops a server the moment
    it spawned it): the parent's reply meets a closed socket. It kills that server and serves
    the next launcher warm; it fell over (EPIPE), and every later server started cold."""
    import marshal
    import socket

    read, write = os.pipe()
    job = {"argv": ["wait"], "env": probe.env, "cwd": os.getcwd(), "umask": 0o022}
    job = marshal.dumps({**job, "ignored": [], "mask": []})
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as launcher:
        launcher.connect(probe.address)
        socket.send_fds(launcher, [len(job).to_bytes(8, "big") + job], [read, write, 2])
    os.close(read)
    os.close(write)
    parent = probe.parent.pid
    children = f"/proc/{parent}/task/{parent}/children"
    wait_until(lambda: Path(children).read_text() == "", 10, "the orphaned server to be killed")
    assert probe.parent.poll() is None
    proc = probe.popen(["state"], True, stdout=subprocess.PIPE)
    assert json.loads(proc.communicate(timeout=30)[0])["pid"] != proc.pid  # still warm
