"""Runs an MCP server on stdio between an agent and itself, and records both directions.

    python mcp_recorder.py DIR -- COMMAND [ARGS...]

What the agent writes is passed to the server and appended to DIR/stdin; what the server writes
is passed to the agent and appended to DIR/stdout; stderr is the server's own. DIR/pid holds the
server's process id, so a test can see whether it outlives the agent. The recorder is as
transparent as a pipe: it closes the server's stdin when the agent closes its own, passes on
SIGTERM and SIGINT, and exits with the server's code once the server has exited. If the agent
kills it outright, the server's pipes close as they would have with the agent itself.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path


def pump(source: int, target, record: Path) -> None:
    """Copies bytes from fd `source` to file `target`, appending each chunk to `record`."""
    with open(record, "ab", buffering=0) as log:
        while chunk := os.read(source, 65536):
            log.write(chunk)
            try:
                target.write(chunk)
                target.flush()
            except (BrokenPipeError, ValueError):
                break
    try:
        target.close()
    except OSError:
        pass


def main() -> int:
    folder, command = Path(sys.argv[1]), sys.argv[sys.argv.index("--") + 1 :]
    folder.mkdir(parents=True, exist_ok=True)
    server = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    (folder / "pid").write_text(str(server.pid))
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda number, _frame: server.send_signal(number))
    stdout = os.fdopen(sys.stdout.fileno(), "wb", buffering=0, closefd=False)
    threads = [
        threading.Thread(target=pump, args=(0, server.stdin, folder / "stdin"), daemon=True),
        threading.Thread(
            target=pump, args=(server.stdout.fileno(), stdout, folder / "stdout"), daemon=True
        ),
    ]
    for thread in threads:
        thread.start()
    code = server.wait()
    threads[1].join(5)  # the server's last words reach the agent
    return code


if __name__ == "__main__":
    sys.exit(main())
