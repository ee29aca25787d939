"""Start-up failures a newcomer hits (issue 22, item 18): each is one line on stderr that says
what is wrong and what to do, a non-zero exit status, and no traceback. Real `mcpkit serve`
processes against a real port in use, names that do not resolve, unreadable certificates."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from pathlib import Path
from typing import Iterator

import pytest

from .helpers import MCPKIT


def _serve(*args: str, env: dict[str, str] | None = None, user: str | None = None) -> tuple[int, list[str]]:
    cmd = [MCPKIT, "serve", "--plugin", "hello", *args]
    if user is not None:
        cmd = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups", *cmd]
    done = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, timeout=60, env={**os.environ, **(env or {})})
    assert done.stdout == b""
    return done.returncode, done.stderr.decode(errors="replace").splitlines()


def _one_line(code: int, lines: list[str], *words: str) -> None:
    assert code != 0
    assert len(lines) == 1 and "Traceback" not in lines[0], lines
    assert lines[0].startswith("Error: ") and all(w in lines[0] for w in words), lines


@pytest.fixture
def taken_port() -> Iterator[int]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


@pytest.mark.parametrize("extra", [[], ["--server", "hypercorn"], ["--workers", "2"], ["--workers", "2", "--server", "hypercorn"]],
                         ids=["mcpkit", "hypercorn", "workers", "hypercorn-workers"])
def test_a_port_in_use_is_one_line(taken_port: int, extra: list[str]) -> None:
    code, lines = _serve("--transport", "http", "--port", str(taken_port), *extra)
    _one_line(code, lines, f"port {taken_port} is in use", "--port")


@pytest.mark.parametrize("host, words", [
    ("no-such-host.invalid", ("does not resolve", "--host")),
    ("999.1.1.1", ("does not resolve", "--host")),
    ("192.0.2.1", ("not an address of this machine", "--host")),  # TEST-NET-1: never local
])
def test_a_bad_host_is_one_line(host: str, words: tuple[str, ...]) -> None:
    code, lines = _serve("--transport", "http", "--host", host, "--port", "0")
    _one_line(code, lines, host, *words)


def test_a_port_out_of_range_is_one_line() -> None:
    _one_line(*_serve("--transport", "http", "--port", "70000"), "out of range", "--port")


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None, reason="needs root to drop to another user")
def test_a_low_port_without_permission_is_one_line() -> None:
    code, lines = _serve("--transport", "http", "--port", "81", user="65534")  # nobody
    _one_line(code, lines, "port 81", "--port 1024 or higher")


@pytest.mark.parametrize("kind", ["mcpkit", "hypercorn"])
def test_tls_files_that_cannot_be_used_are_one_line(tmp_path: Path, kind: str) -> None:
    not_pem = tmp_path / "cert.txt"
    not_pem.write_text("not a certificate\n")
    env = {"MCPKIT_HTTP_SERVER": kind}
    code, lines = _serve("--transport", "http", "--port", "0", env={**env, "MCPKIT_CERTFILE": str(not_pem)})
    _one_line(code, lines, str(not_pem), "PEM")
    missing = tmp_path / "gone.pem"  # from the config or the environment, so the option's own check does not apply
    code, lines = _serve("--transport", "http", "--port", "0", env={**env, "MCPKIT_CERTFILE": str(missing)})
    _one_line(code, lines, str(missing), "does not exist")


def test_a_bad_state_url_and_a_config_that_does_not_parse_are_one_line(tmp_path: Path) -> None:
    _one_line(*_serve("--transport", "http", "--port", "0", "--state", "http://127.0.0.1:6379"), "redis://")
    broken = tmp_path / "mcpkit.toml"
    broken.write_text("[server\nport = 1\n")
    _one_line(*_serve("--config", str(broken)), str(broken), "not valid TOML")


def test_the_log_level_debug_shows_the_traceback(taken_port: int) -> None:
    code, lines = _serve("--transport", "http", "--port", str(taken_port), env={"MCPKIT_LOG_LEVEL": "debug"})
    assert code != 0 and lines[-1].startswith("Error: port") and any("Traceback" in line for line in lines)
