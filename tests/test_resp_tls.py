"""The pipelined Redis client over TLS (``rediss://``, issue 27), against a real redis-server
serving TLS with a certificate of its own (trusted through ``SSL_CERT_FILE``, as an operator with
a private CA would): concurrent callers share one TLS connection and each gets its own replies;
a connection killed mid-pipeline fails exactly the commands pending on it and the next command
connects again; a caller cancelled while others wait leaves them their replies; a server whose
certificate nobody trusts is refused with an OSError (what the state link turns into "Redis out of
reach"), never another exception."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any, Iterator

import pytest
import trio

from mcpkit.server.resp import RespPool

from .scaleout_fixtures import free_port, need, wait_port
from .test_resp_pipelining import killed_mid_pipeline


class TlsRedis:
    def __init__(self, folder: Path) -> None:
        self.cert, key = folder / "redis.crt", folder / "redis.key"
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(self.cert),
                        "-days", "1", "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
                       check=True, capture_output=True)
        self.port = free_port()
        self.url = f"rediss://127.0.0.1:{self.port}/0"
        self.proc = subprocess.Popen(
            [need("redis-server"), "--port", "0", "--tls-port", str(self.port), "--bind", "127.0.0.1",
             "--tls-cert-file", str(self.cert), "--tls-key-file", str(key), "--tls-ca-cert-file", str(self.cert),
             "--tls-auth-clients", "no", "--save", "", "--appendonly", "no", "--dir", str(folder), "--protected-mode", "no"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_port(self.port)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)


@pytest.fixture
def tls_redis(tmp_path: Path) -> Iterator[TlsRedis]:
    server = TlsRedis(tmp_path)
    yield server
    server.stop()


@pytest.fixture
def trusted(tls_redis: TlsRedis, monkeypatch: pytest.MonkeyPatch) -> TlsRedis:
    monkeypatch.setenv("SSL_CERT_FILE", str(tls_redis.cert))  # the default context's trust, read at connect
    return tls_redis


def test_concurrent_callers_share_one_tls_connection(trusted: TlsRedis) -> None:
    async def main() -> None:
        pool = RespPool(trusted.url)
        got: dict[int, list[Any]] = {}

        async def one(n: int) -> None:
            got[n] = await pool.execute(("INCRBY", f"k{n}", n), ("GET", f"k{n}"), ("ECHO", "x" * (n * 50)))

        async with trio.open_nursery() as nursery:
            for n in range(200):
                nursery.start_soon(one, n)
        assert got == {n: [n, str(n).encode(), b"x" * (n * 50)] for n in range(200)}
        assert pool.connections == 1
        (clients,) = await pool.execute(("CLIENT", "LIST"))
        assert clients.count(b"\n") == 1  # one connection on the server's side too
        pool.close()

    trio.run(main)


def test_a_tls_connection_killed_mid_pipeline_fails_only_its_pending_commands(trusted: TlsRedis) -> None:
    async def main() -> None:
        pool, killer = RespPool(trusted.url), RespPool(trusted.url)

        async def kill(client_id: int) -> None:
            assert await killer.execute(("CLIENT", "KILL", "ID", str(client_id))) == [1]

        await killed_mid_pipeline(pool, kill)
        pool.close()
        killer.close()

    trio.run(main)


def test_a_cancelled_tls_caller_leaves_the_others_their_replies(trusted: TlsRedis) -> None:
    async def main() -> None:
        pool = RespPool(trusted.url)
        await pool.execute(("PING",))
        got: dict[str, Any] = {}

        async def slow() -> None:
            with trio.move_on_after(0.05):
                got["slow"] = await pool.execute(("BLPOP", "nothing", "0.3"))

        async def quick(n: int) -> None:
            await trio.sleep(0.01)  # queued behind the slow one on the same connection
            got[f"q{n}"] = await pool.execute(("ECHO", str(n)))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(slow)
            for n in range(5):
                nursery.start_soon(quick, n)
        assert "slow" not in got and {got[f"q{n}"][0] for n in range(5)} == {str(n).encode() for n in range(5)}
        assert await pool.execute(("ECHO", "after")) == [b"after"] and pool.connections == 1
        pool.close()

    trio.run(main)


def test_an_untrusted_certificate_is_an_oserror(tls_redis: TlsRedis, monkeypatch: pytest.MonkeyPatch,
                                                tmp_path: Path) -> None:
    other = tmp_path / "other.crt"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(tmp_path / "other.key"),
                    "-out", str(other), "-days", "1", "-subj", "/CN=someone-else"], check=True, capture_output=True)
    monkeypatch.setenv("SSL_CERT_FILE", str(other))

    async def main() -> None:
        pool = RespPool(tls_redis.url)
        with pytest.raises(OSError, match="certificate"):
            await pool.execute(("PING",))
        pool.close()

    trio.run(main)


def test_a_server_whose_state_redis_is_untrusted_says_why_and_serves_on(tls_redis: TlsRedis) -> None:
    """`MCPKIT_STATE=rediss://…` with a certificate the system does not trust: one log line
    naming the certificate problem (not only "cannot be reached"), and the server up."""
    import os
    import select
    import time

    from .helpers import MCPKIT

    port = free_port()
    env = {**os.environ, "MCPKIT_STATE": tls_redis.url}
    env.pop("SSL_CERT_FILE", None)
    proc = subprocess.Popen([str(MCPKIT), "serve", "--transport", "http", "--port", str(port)],
                            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, env=env, text=True)
    lines: list[str] = []
    try:
        end = time.monotonic() + 20
        assert proc.stderr is not None
        while time.monotonic() < end and not any("serving MCP" in line for line in lines):
            if select.select([proc.stderr], [], [], 0.5)[0]:
                lines.append(proc.stderr.readline())
        assert any("serving MCP" in line for line in lines), lines
        (problem,) = [line for line in lines if "cannot be reached at start-up" in line]
        assert "certificate verify failed" in problem, problem  # what went wrong, not only that it did
        assert "Traceback" not in "".join(lines)
    finally:
        proc.terminate()
        proc.wait(10)
