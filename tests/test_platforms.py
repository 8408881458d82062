"""The module's Windows branches, simulated on any system (os.name patched, msvcrt faked).

CI runs the whole suite on Windows and macOS too (.github/workflows/ci.yml); these tests keep
the Windows branches covered where the suite runs on Linux only (.ci/run).
"""

from __future__ import annotations

import io
import os
import signal
import sys
import types

import pytest

import openai_responses_mcp as mcp


class _WindowsOs(types.ModuleType):
    """The module's `os` as on Windows: name "nt" and O_BINARY; the rest is the real os."""

    name = "nt"
    O_BINARY = 0x8000

    def __getattr__(self, attribute: str):
        return getattr(os, attribute)


@pytest.fixture
def windows(monkeypatch):
    """os.name == "nt" as the module sees it (pytest and pathlib keep the real os)."""
    monkeypatch.setattr(mcp, "os", _WindowsOs("os"))


def test_the_config_file_lives_under_appdata_on_windows(windows):
    env = {"APPDATA": r"C:\Users\ann\AppData\Roaming", "HOME": "/unused"}
    assert mcp.default_config_path(env) == os.path.join(
        env["APPDATA"], "openai-responses-mcp", "config.yaml"
    )


def test_without_appdata_windows_falls_back_to_the_home_config_folder(windows):
    path = mcp.default_config_path({"HOME": "/home/ann"})
    assert path == os.path.join("/home/ann", ".config", "openai-responses-mcp", "config.yaml")


def test_the_state_file_lives_under_localappdata_on_windows(windows):
    env = {"LOCALAPPDATA": r"C:\Users\ann\AppData\Local", "XDG_STATE_HOME": "/unused"}
    assert mcp.default_state_path(env) == os.path.join(
        env["LOCALAPPDATA"], "openai-responses-mcp", "state.sqlite3"
    )


def test_without_localappdata_windows_falls_back_to_the_home_state_folder(windows):
    path = mcp.default_state_path({"HOME": "/home/ann"})
    assert path == os.path.join(
        "/home/ann", ".local", "state", "openai-responses-mcp", "state.sqlite3"
    )


@pytest.mark.skipif(os.name == "nt", reason="the non-Windows branch")
def test_elsewhere_the_state_file_follows_xdg_state_home():
    env = {"LOCALAPPDATA": "/unused", "XDG_STATE_HOME": "/xdg", "HOME": "/home/ann"}
    assert mcp.default_state_path(env) == os.path.join(
        "/xdg", "openai-responses-mcp", "state.sqlite3"
    )
    assert mcp.default_state_path({"HOME": "/home/ann"}) == os.path.join(
        "/home/ann", ".local", "state", "openai-responses-mcp", "state.sqlite3"
    )


def test_the_state_file_follows_the_environment_the_config_was_loaded_from(monkeypatch):
    """The environment handed to load_config decides the default state file, as it decides
    the config file: the process's own variables must not send it to the real home."""
    monkeypatch.setenv("XDG_STATE_HOME", "/process-state")
    monkeypatch.setenv("LOCALAPPDATA", "/process-state")
    env = {"XDG_STATE_HOME": "/given", "LOCALAPPDATA": "/given", "XDG_CONFIG_HOME": "/none"}
    config = mcp.load_config({}, env)
    assert mcp.state_path(config) == os.path.join("/given", "openai-responses-mcp", "state.sqlite3")


def test_an_unknown_time_zone_on_windows_suggests_tzdata(windows):
    with pytest.raises(mcp.ConfigError, match=r"on Windows, `pip install tzdata`"):
        mcp._check_timezone("Mars/Olympus_Mons", "env POLICY_TIMEZONE")


def test_stdio_is_switched_to_binary_mode_on_windows(windows, monkeypatch, tmp_path):
    """Without O_BINARY, Windows would turn every \\n into \\r\\n and break Content-Length."""
    calls = []
    monkeypatch.setitem(
        sys.modules, "msvcrt", types.SimpleNamespace(setmode=lambda fd, m: calls.append((fd, m)))
    )
    read_fd, write_fd = os.pipe()
    os.close(write_fd)  # end of input at once
    out = open(tmp_path / "out", "wb")  # noqa: SIM115 - closed below
    out_fd = out.fileno()
    monkeypatch.setattr(sys, "stdin", types.SimpleNamespace(fileno=lambda: read_fd))
    monkeypatch.setattr(sys, "stdout", types.SimpleNamespace(fileno=out.fileno))
    handlers = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    config = mcp.load_config({}, {"HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path)})
    log = mcp.Log()
    try:
        code = mcp.serve_stdio(
            mcp.Dispatcher(config, log, mcp.build_engine(config, log)), config, log
        )
    finally:
        for signum, handler in handlers.items():
            signal.signal(signum, handler)
        os.close(read_fd)
        out.close()
    assert code == 0
    assert calls == [(read_fd, 0x8000), (out_fd, 0x8000)]


def test_doctor_gives_powershell_lines_on_windows(windows, monkeypatch, tmp_path):
    config = mcp.load_config({}, {"HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path)})
    command = [r"C:\Tools\openai-responses-mcp.exe"]
    monkeypatch.setattr(mcp, "client_command", lambda config=None: (command, [], None))
    lines = "\n".join(mcp.client_lines({}, config))
    assert 'OPENAI_API_KEY="$env:OPENAI_API_KEY"' in lines
    assert r'-- "C:\Tools\openai-responses-mcp.exe" "--stdio"' in lines
    out = io.StringIO()
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert mcp._doctor_key(mcp.Doctor(out), config) is None
    assert '$env:OPENAI_API_KEY = "<your key>" in PowerShell' in out.getvalue()


def test_doctor_finds_the_exe_script_beside_python_on_windows(windows, monkeypatch, tmp_path):
    script = tmp_path / "openai-responses-mcp.exe"
    script.write_bytes(b"")
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python.exe"))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert mcp.client_command()[0] == [str(script)]


def test_ctrl_break_stops_the_server_gracefully_on_windows():
    # Windows never sends SIGTERM; a service manager stops a console program with
    # CTRL_BREAK_EVENT, which Python sees as SIGBREAK.
    windows_signal = types.SimpleNamespace(SIGTERM=15, SIGINT=2, SIGBREAK=21)
    assert mcp.stop_signals(windows_signal) == (15, 2, 21)


def test_posix_stops_on_sigterm_and_sigint_only():
    posix_signal = types.SimpleNamespace(SIGTERM=signal.SIGTERM, SIGINT=signal.SIGINT)
    assert mcp.stop_signals(posix_signal) == (signal.SIGTERM, signal.SIGINT)
    assert mcp.stop_signals(signal)[:2] == (signal.SIGTERM, signal.SIGINT)
