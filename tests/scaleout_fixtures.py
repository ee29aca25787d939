"""Real parts for the scale-out tests: a redis-server on a free loopback port, several
`mcpkit serve --state redis://...` processes, and HAProxy round-robin in front of them with no
stickiness. redis-server and haproxy are Debian packages `make test` installs when missing
(scripts/need-debian-packages)."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path

from .http_helpers import HttpServer


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(port: int, timeout: float = 10) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on port {port}")


def need(program: str) -> str:
    path = shutil.which(program) or shutil.which(program, path="/usr/sbin:/usr/bin:/sbin")
    if path is None:
        raise RuntimeError(f"{program} is missing: run `make test` (it installs it) or scripts/need-debian-packages")
    return path


class RedisServer:
    """A real redis-server in ``folder``; it keeps its data across stop()/start() (append-only
    file), like a production one would — or, with ``persist=False``, starts empty each time."""

    def __init__(self, folder: Path, *, persist: bool = True, port: int | None = None) -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self.persist = persist
        self.port = port or free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc: subprocess.Popen[bytes] | None = None
        self.start()

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [need("redis-server"), "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "yes" if self.persist else "no", "--appendfsync", "always", "--dir", str(self.folder),
             "--protected-mode", "no"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_port(self.port)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)

    def command(self, *args: str) -> str:
        out = subprocess.run([need("redis-cli"), "-p", str(self.port), *args], capture_output=True, text=True, timeout=10)
        return out.stdout.strip()


class Haproxy:
    """HAProxy round-robin over ``ports``: every request may land on any of them (no stickiness);
    a dead server is retried on another one."""

    def __init__(self, folder: Path, ports: list[int]) -> None:
        self.port = free_port()
        servers = "\n".join(f"    server s{i} 127.0.0.1:{p} check inter 300ms fall 1 rise 1" for i, p in enumerate(ports))
        config = folder / "haproxy.cfg"
        config.write_text(f"""global
    maxconn 512
defaults
    mode http
    timeout connect 2s
    timeout client 60s
    timeout server 60s
    timeout tunnel 60s
    retries 3
    option redispatch
    retry-on conn-failure empty-response response-timeout
frontend mcp
    bind 127.0.0.1:{self.port}
    default_backend workers
backend workers
    balance roundrobin
    option httpchk GET /healthz
{servers}
""")
        self.proc = subprocess.Popen([need("haproxy"), "-db", "-f", str(config)], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE)
        wait_port(self.port)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


class Via(HttpServer):
    """The HttpServer helpers (call, rpc, initialize) against any port: the proxy's, say."""

    def __init__(self, port: int) -> None:  # noqa: D107 - nothing is started
        self.port = port


class Cluster:
    """``n`` `mcpkit serve` processes sharing one Redis, behind HAProxy."""

    def __init__(self, folder: Path, redis: RedisServer, env: dict[str, str], n: int = 3, *args: str) -> None:
        self.servers: list[HttpServer] = []
        self.proxy: Haproxy | None = None
        try:
            for i in range(n):
                self.servers.append(HttpServer("--plugin", "scaleout", "--state", redis.url, *args,
                                               env={**env, "MCPKIT_DATA_DIR": str(folder / f"data{i}")}))
            self.proxy = Haproxy(folder, [s.port for s in self.servers])
            self.via = Via(self.proxy.port)
            self._wait_all_up()
        except BaseException:
            self.close()
            raise

    def _wait_all_up(self) -> None:
        pids = set()
        end = time.monotonic() + 15
        while len(pids) < len(self.servers) and time.monotonic() < end:
            try:
                status, _, body = self.via.call("GET", "/healthz")
                if status == 200:
                    import json

                    pids.add(json.loads(body)["pid"])
            except OSError:
                pass
            time.sleep(0.05)
        assert len(pids) == len(self.servers), f"HAProxy reaches {len(pids)} of {len(self.servers)} servers"

    def close(self) -> None:
        if self.proxy is not None:
            self.proxy.stop()
        for s in self.servers:
            s.__exit__(None, None, None)
