"""`lethe-lab dashboard` listens on loopback only unless told otherwise, and then says the server is open to anyone."""

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import pytest
from typer.testing import CliRunner

from lethe_core.cli import main as cli


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _listening(port: int) -> set[str]:
    """Local addresses (hex, as the kernel writes them) of the TCP sockets in LISTEN state on `port`, IPv4 and IPv6."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(FileNotFoundError), open(table) as f:
            for line in f.readlines()[1:]:
                local, state = line.split()[1], line.split()[3]
                address, hex_port = local.rsplit(":", 1)
                if state == "0A" and int(hex_port, 16) == port:
                    found.add(address)
    return found


@pytest.mark.skipif(not os.path.exists("/proc/net/tcp"), reason="reads the kernel's socket table")
def test_the_real_command_binds_loopback_only(tmp_path):
    port = _free_port()
    env = {**os.environ, "LETHE_HOME": str(tmp_path)}
    proc = subprocess.Popen([sys.executable, "-m", "lethe_core", "dashboard", "--port", str(port)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and proc.poll() is None:
            with contextlib.suppress(OSError):
                if urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2).read() == b"ok":
                    break
            time.sleep(0.5)
        assert proc.poll() is None, proc.stdout.read()
        assert _listening(port) == {"0100007F"}  # 127.0.0.1, and no IPv4 or IPv6 wildcard socket
    finally:
        proc.send_signal(signal.SIGTERM)  # the command exec'd into the server: this stops the server itself
        out, _ = proc.communicate(timeout=30)
    assert f"open http://127.0.0.1:{port}" in out and "no authentication" not in out
    assert _listening(port) == set()


def test_address_exposes_on_purpose_with_a_warning(monkeypatch):
    execs = []
    monkeypatch.setattr(os, "execv", lambda exe, argv: execs.append(argv))
    result = CliRunner().invoke(cli.app, ["dashboard", "--address", "0.0.0.0", "--port", "8765"])
    assert result.exit_code == 0, result.output
    (argv,) = execs
    assert argv[argv.index("--server.address") + 1] == "0.0.0.0" and argv[argv.index("--server.port") + 1] == "8765"
    assert "open http://0.0.0.0:8765" in result.output
    assert "no authentication: anyone who can reach 0.0.0.0:8765 can read these results and start replays" in result.output


@pytest.mark.parametrize("args", [["--address", "not a host!"], ["--port", "0"], ["--port", "70000"]])
def test_bad_address_or_port_is_refused_before_starting(monkeypatch, args):
    monkeypatch.setattr(os, "execv", lambda *a: pytest.fail("started the server"))
    result = CliRunner().invoke(cli.app, ["dashboard", *args])
    assert result.exit_code == 2
