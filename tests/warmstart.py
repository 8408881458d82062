"""A warm start for the servers the tests spawn.

Every server the suite starts is a real process on real pipes or sockets, running the module as
`python -m` runs it. What costs is not our module but the `openai` SDK's import: about 1.4 s of
CPU in each process that makes a call, and the suite starts the server over a thousand times.

So each pytest worker starts one *warm parent* that has imported the SDK and nothing of ours, and
waits. `conftest.PROGRAM` is a small launcher: it hands its stdin, stdout and stderr, its argv,
environment and working directory to the warm parent over a Unix socket, and the parent forks a
child that takes those descriptors as 0, 1 and 2, takes the environment, and runs
`openai_responses_mcp` as `__main__`; it then exits as Python does (non-daemon threads joined,
atexit run, stdio flushed), less the teardown of the modules it shares with the parent. The
launcher stays as the test's child: it passes on SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1 and
SIGUSR2, exits as the server exits (by the same signal when a signal ended it), and when the
launcher is killed the parent kills the server.

What differs from a cold start, and how the tests keep it honest:
- `openai` is already imported. Tests of what is imported, of memory or of /proc start cold
  (`spawn(..., cold=True)`), and so does every test run with ORMCP_TESTS_COLD=1.
- The child takes from the launcher's process what a fresh interpreter would inherit: its
  process group, umask, resource limits, ignored signals and signal mask (a test's
  preexec_fn). tests/test_warmstart.py runs the same stand-in program warm and cold and
  compares what each sees and how each ends.
- The launcher falls back to a cold start by itself for anything it cannot mirror exactly: an
  environment with PYTHON* variables other than PYTHONUNBUFFERED and PYTHONIOENCODING, or with
  a locale or PYTHONDONTWRITEBYTECODE (sys.flags) other than the parent's, OPENAI_LOG (which
  the SDK reads at import), a closed stdin, stdout or stderr, a process group or session of its
  own (process_group=0, start_new_session: os.killpg would signal the server twice, directly
  and through the launcher), a resource limit above the parent's, or no warm parent.
- The server's process id is not the launcher's: `Server.pid` refuses a warm start.
- A SIGKILL of the launcher reaches the server only through the warm parent, a moment later:
  `proc.wait()` can return while the server still runs. `Server.stop` waits for the server's
  stdout to close; a test that kills a launcher itself and needs the server gone waits the same.
- Every server forked from one parent shares its hash seed (`random` reseeds itself at fork).

Standard library only; the launcher side imports nothing heavy, as it runs in every spawn.
"""

from __future__ import annotations

# The launcher runs in every spawn, under `python -S`: it imports only modules built into the
# interpreter (no site, no json, no enum), about 10 ms of CPU where `import socket, json,
# signal` with site-packages took 50.
import _signal
import _socket
import marshal
import os
import sys

# What a forked child can take from the launcher's environment exactly as a fresh interpreter
# would; any other PYTHON* variable (or OPENAI_LOG, read when `openai` is imported) starts cold.
MIRRORED = {"PYTHONUNBUFFERED", "PYTHONIOENCODING", "PYTHONDONTWRITEBYTECODE"}
FORWARDED = ("SIGTERM", "SIGINT", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2")
MODULE = "openai_responses_mcp"
LOCALE = ("LANG", "LC_ALL", "LC_CTYPE", "PYTHONUTF8", "PYTHONCOERCECLOCALE")
# ... and sys.flags from these: a child has the warm parent's flags
FLAGS = ("PYTHONDONTWRITEBYTECODE",)
ADDRESS = "ORMCP_TEST_ZYGOTE"  # the warm parent's socket, in the environment the launcher gets
_RETIRED: list = []  # the parent's stdio objects: collected, they would close 0, 1 and 2


def can_mirror(env: dict) -> bool:
    names = set(env)
    return "OPENAI_LOG" not in names and all(
        not name.startswith("PYTHON") or name in MIRRORED for name in names
    )


# -- The launcher: the test's child -----------------------------------------------------------


def launch(address: str) -> None:
    """Runs the server in a child of the warm parent at `address`; returns only when it cannot
    (the caller then starts cold), else exits as the server exited."""
    env = dict(os.environ)
    if not can_mirror(env) or not _stdio_open():
        return
    pending: list[int] = []
    child = [0]

    def forward(number, _frame):
        if child[0]:
            os.kill(child[0], number)
        else:
            pending.append(number)

    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        sock.connect(address)
    except OSError:
        sock.close()
        return
    numbers = [getattr(_signal, name) for name in FORWARDED]
    # What a fresh interpreter would inherit from this process, taken before it changes any:
    # the signals it ignores (and that stay ignored across exec), its signal mask, its umask.
    ignored = [n for n in _signal.valid_signals() if _signal.getsignal(n) == _signal.SIG_IGN]
    mask = list(_signal.pthread_sigmask(_signal.SIG_BLOCK, []))
    umask = os.umask(0o22)
    os.umask(umask)
    before = {number: _signal.signal(number, forward) for number in numbers}
    job = {"argv": sys.argv[1:], "env": env, "cwd": os.getcwd(), "umask": umask}
    job = marshal.dumps({**job, "ignored": ignored, "mask": mask})
    fds = (0).to_bytes(4, sys.byteorder) + (1).to_bytes(4, sys.byteorder)
    fds += (2).to_bytes(4, sys.byteorder)
    head = len(job).to_bytes(8, "big")
    sock.sendmsg([head + job], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, fds)])
    replies = _Lines(sock)
    pid = replies.number(b"pid")
    if pid is None:  # the parent cannot mirror this environment: start cold, signals as they were
        sock.close()
        for number, handler in before.items():
            _signal.signal(number, handler)
        for number in pending:
            os.kill(os.getpid(), number)
        return
    child[0] = pid
    # From here the server holds the pipes: the launcher lets go of them, so a pipe closes when
    # the server closes it, as it would with no launcher between.
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    for number in pending:
        os.kill(pid, number)
    status = replies.number(b"exit")
    if status is None:  # the warm parent died under us: the server must not outlive the test
        _kill(pid)
        os._exit(70)
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        _signal.signal(number, _signal.SIG_DFL)
        os.kill(os.getpid(), number)
    os._exit(os.waitstatus_to_exitcode(status))


def _stdio_open() -> bool:
    """A closed stdin, stdout or stderr cannot be sent; a fresh interpreter runs with it None."""
    try:
        for fd in (0, 1, 2):
            os.fstat(fd)
    except OSError:
        return False
    return True


class _Lines:
    """The parent's replies, a line each: `pid N`, then `exit STATUS` (or `cold`)."""

    def __init__(self, sock):
        self.sock, self.buffer = sock, b""

    def number(self, word: bytes) -> int | None:
        while b"\n" not in self.buffer:
            chunk = self.sock.recv(4096)
            if not chunk:
                return None
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        name, _, value = line.partition(b" ")
        return int(value) if name == word else None


def _kill(pid) -> None:
    try:
        os.kill(pid, _signal.SIGKILL)
    except (OSError, TypeError):
        pass


# -- The warm parent: one per pytest worker ----------------------------------------------------


def warm() -> None:
    """Imports what a server imports for its first call, and starts nothing: no thread may be
    running when the parent forks."""
    import openai

    client = openai.OpenAI(api_key="sk-warm", base_url="http://127.0.0.1:9/v1")
    for name in ("responses", "models"):
        getattr(client, name)
    client.close()
    import gc
    import http.server  # noqa: F401
    import sqlite3  # noqa: F401
    import zoneinfo  # noqa: F401

    gc.collect()
    gc.freeze()  # what is here now stays shared: a child's collections never walk or copy it


def serve(address: str, root: str) -> dict:
    """Forks a child per launcher. Returns only in a child, with the job it is to run."""
    import selectors
    import socket

    _signal.signal(_signal.SIGINT, _signal.SIG_IGN)  # a ^C is for the tests and their servers
    warm()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(address)
    listener.listen(128)
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ, ("accept", None))
    selector.register(sys.stdin, selectors.EVENT_READ, ("parent", None))  # EOF: pytest is gone
    print("ready", flush=True)
    served: dict[int, tuple] = {}  # pid -> (connection, pidfd)
    while True:
        for key, _ in selector.select():
            kind, pid = key.data
            if kind == "accept":
                job = _accept(listener, selector, served)
                if job is not None:  # the child
                    return job
            elif kind == "gone":  # the launcher died (killed): so does its server
                selector.unregister(key.fileobj)
                _kill(pid)
            elif kind == "exited":
                _report(selector, served, pid)
            else:  # its worker ended, even killed: nothing of ours stays behind
                for pid in served:
                    _kill(pid)
                _remove(address)
                os._exit(0)


def _remove(address: str) -> None:
    """The socket, and its folder if nothing else is in it (the worker's `tempfile.mkdtemp`)."""
    for remove, path in ((os.unlink, address), (os.rmdir, os.path.dirname(address))):
        try:
            remove(path)
        except OSError:
            pass


def _accept(listener, selector, served):
    import selectors
    import socket

    conn, _ = listener.accept()
    try:
        message, fds, _flags, _addr = socket.recv_fds(conn, 1 << 20, 3)
    except OSError:
        conn.close()
        return None
    size = int.from_bytes(message[:8], "big") + 8 if len(message) >= 8 else 0
    while len(message) < size:
        more = conn.recv(size - len(message))
        if not more:
            break
        message += more
    job = marshal.loads(message[8:]) if len(fds) == 3 and len(message) == size else None
    if job is not None:
        job = _launcher_process(conn, job) if _same_locale(job["env"]) else None
    if job is None:
        for fd in fds:
            os.close(fd)
        _send(conn, b"cold\n")
        conn.close()
        return None
    pid = os.fork()
    if pid == 0:
        listener.close()
        for other, pidfd in served.values():
            other.close()
            os.close(pidfd)
        selector.close()
        conn.close()
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        return job
    for fd in fds:
        os.close(fd)
    pidfd = os.pidfd_open(pid)
    served[pid] = (conn, pidfd)
    if not _send(conn, b"pid %d\n" % pid):  # the launcher is gone (killed) already: so goes
        _kill(pid)  # its server, reaped when its pidfd says so
    selector.register(conn, selectors.EVENT_READ, ("gone", pid))
    selector.register(pidfd, selectors.EVENT_READ, ("exited", pid))
    return None


def _send(conn, line: bytes) -> bool:
    """A line to a launcher, which may have been killed since it connected: the parent, which
    every later server needs, must not fall over for that (EPIPE)."""
    try:
        conn.sendall(line)
    except OSError:
        return False
    return True


def _same_locale(env: dict) -> bool:
    """A fresh interpreter picks stdio's encoding from the locale, and sys.flags from its
    environment: mirror only the same ones."""
    return all(env.get(name) == os.environ.get(name) for name in LOCALE + FLAGS)


def _launcher_process(conn, job: dict) -> dict | None:
    """Adds to the job what the server takes from the launcher's process and not from its
    message: its process group, and its resource limits (a test's preexec_fn). None where a
    forked child cannot mirror them: a process group or session of the launcher's own, or a
    limit above the warm parent's hard limit."""
    import resource
    import socket
    import struct

    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    launcher = struct.unpack("3i", creds)[0]
    try:
        # A group of its own (start_new_session, process_group=0) is made to be signalled as a
        # group: a server in it would take a signal twice, from the group and from the
        # launcher, and one outside it would miss a SIGSTOP or SIGKILL sent to it.
        if os.getsid(launcher) != os.getsid(0) or os.getpgid(launcher) == launcher:
            return None
        job["pgid"] = os.getpgid(launcher)
        limits = {}
        for name in dir(resource):
            if name.startswith("RLIMIT_"):
                number = getattr(resource, name)
                theirs, ours = resource.prlimit(launcher, number), resource.getrlimit(number)
                if _unlimited(theirs[1]) > _unlimited(ours[1]):
                    return None
                if theirs != ours:
                    limits[number] = theirs
    except OSError:  # the launcher is gone already
        return None
    job["limits"] = limits
    return job


def _unlimited(value: int) -> float:
    import resource

    return float("inf") if value == resource.RLIM_INFINITY else value


def _report(selector, served, pid) -> None:
    conn, pidfd = served.pop(pid)
    _, status = os.waitpid(pid, 0)
    selector.unregister(pidfd)
    os.close(pidfd)
    try:
        selector.unregister(conn)
    except KeyError:
        pass  # already gone
    _send(conn, b"exit %d\n" % status)
    conn.close()


def become(job: dict, root: str) -> None:
    """In the child: take the job's process-wide state as a fresh interpreter would have it,
    run the module as __main__, and exit as the interpreter would."""
    import runpy
    import time

    _launcher_state(job)
    os.chdir(job["cwd"])
    os.environ.clear()
    os.environ.update(job["env"])
    time.tzset()
    _fresh_stdio(job["env"])
    sys.argv = ["-c", *job["argv"]]
    sys.path[0] = root
    sys.dont_write_bytecode = False
    _signal.pthread_sigmask(_signal.SIG_SETMASK, job["mask"])
    try:
        runpy.run_module(MODULE, run_name="__main__", alter_sys=True)
    except SystemExit as stop:
        _exit(_exit_code(stop.code))
    except KeyboardInterrupt:  # as Python ends on one: the traceback, then killed by SIGINT
        sys.excepthook(*sys.exc_info())
        _exit(None)
    except BaseException:  # noqa: BLE001 - an uncaught error: the traceback, then exit 1
        sys.excepthook(*sys.exc_info())
        _exit(1)
    _exit(0)


def _launcher_state(job: dict) -> None:
    """The process state a fresh interpreter started by the launcher would have: its process
    group, umask and resource limits, its ignored signals (SIGINT else as Python sets it)."""
    import resource

    os.setpgid(0, job["pgid"])
    os.umask(job["umask"])
    for number, limit in job["limits"].items():
        resource.setrlimit(number, limit)
    for number in _signal.valid_signals():
        if number in (_signal.SIGKILL, _signal.SIGSTOP):
            continue
        ignored = _signal.getsignal(number) == _signal.SIG_IGN
        if number in job["ignored"]:
            if not ignored:
                _signal.signal(number, _signal.SIG_IGN)
        elif number == _signal.SIGINT:
            _signal.signal(number, _signal.default_int_handler)
        elif ignored:
            _signal.signal(number, _signal.SIG_DFL)


def _exit_code(code) -> int:
    """As the interpreter reads SystemExit's argument."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def _exit(code: int | None) -> None:
    """Ends the child as Py_Finalize would, up to the part nothing can see: non-daemon threads
    joined, atexit run, stdio flushed; then no teardown of the modules it shares with the
    parent (it would walk the whole SDK's objects for nothing). None: as an unhandled ^C
    ends a process, by SIGINT."""
    import atexit
    import threading

    threading._shutdown()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    if code is None:
        _signal.signal(_signal.SIGINT, _signal.SIG_DFL)
        os.kill(os.getpid(), _signal.SIGINT)
    os._exit(code & 0xFF)


def _fresh_stdio(env: dict) -> None:
    """sys.stdin, stdout and stderr over descriptors 0, 1 and 2, made as CPython makes them."""
    import codecs
    import io

    buffered = not env.get("PYTHONUNBUFFERED")
    encoding, _, errors = env.get("PYTHONIOENCODING", "").partition(":")
    if encoding:  # by its codec's name, as the interpreter names it ("latin-1": "iso8859-1")
        encoding = codecs.lookup(encoding).name
    old = (sys.__stdin__, sys.__stdout__, sys.__stderr__)
    _RETIRED.extend(old)
    streams = []
    for fd, mode in ((0, "rb"), (1, "wb"), (2, "wb")):
        raw = io.FileIO(fd, mode, closefd=False)
        # -u leaves stdin buffered, and makes stdout and stderr write straight to the fd
        if fd == 0:
            binary: io.RawIOBase | io.BufferedIOBase = io.BufferedReader(raw)
        else:
            binary = io.BufferedWriter(raw) if buffered else raw
        streams.append(
            io.TextIOWrapper(
                binary,
                encoding=encoding or old[fd].encoding,
                errors=(fd != 2 and errors) or old[fd].errors,  # stderr: backslashreplace
                newline="\n",
                line_buffering=fd != 0 and buffered and (fd == 2 or raw.isatty()),
                write_through=fd != 0 and not buffered,
            )
        )
    sys.stdin, sys.stdout, sys.stderr = streams
    sys.__stdin__, sys.__stdout__, sys.__stderr__ = streams


if __name__ == "__main__":
    _job = serve(sys.argv[2], sys.argv[3])
    _job["env"].pop(ADDRESS, None)  # never the server's to see
    become(_job, sys.argv[3])
