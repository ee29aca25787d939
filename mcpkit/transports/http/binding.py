"""The listening sockets and the TLS context, for either HTTP server: what would stop the
server (a port in use, an address not of this machine, a certificate that cannot be used)
fails here, before any plugin starts or worker forks, as a :class:`StartupError` that says
what to change."""

from __future__ import annotations

import errno
import os
import socket
import ssl

from ...server.errors import StartupError
from ...server.settings import Settings


def listen(settings: Settings) -> list[socket.socket]:
    """The listening sockets of ``settings`` (host, port), the TLS files checked first: what
    would stop the server fails here, before any plugin starts or worker forks."""
    if settings.certfile:
        tls_context(settings.certfile, settings.keyfile)
    return [bind(settings.host, settings.port)]


def bind(host: str, port: int, backlog: int = 1024) -> socket.socket:
    """A listening TCP socket (IPv6 when the host is an IPv6 literal). What stops it is a
    :class:`StartupError` that says what to change."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        sock = socket.socket(family, socket.SOCK_STREAM)
    except OSError as exc:
        raise StartupError(f"cannot listen on {host}: {exc.strerror or exc}") from exc
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(backlog)
        sock.setblocking(False)
    except (OSError, OverflowError) as exc:
        sock.close()
        raise StartupError(_cannot_bind(host, port, exc)) from exc
    return sock


def _cannot_bind(host: str, port: int, exc: Exception) -> str:
    if isinstance(exc, OverflowError):
        return f"port {port} is out of range: pass --port from 0 to 65535 (0 picks a free one)"
    if isinstance(exc, socket.gaierror):
        return (f"cannot listen on {host!r}: the name does not resolve ({exc.strerror}); pass --host with an address "
                "of this machine, such as 127.0.0.1")
    code = getattr(exc, "errno", None)
    if code == errno.EADDRINUSE:
        return f"port {port} is in use on {host}: pass --port with a free one (0 picks one) or stop the other server"
    if code == errno.EACCES and 0 < port < 1024:
        return (f"no permission to listen on port {port} (ports below 1024 need root or CAP_NET_BIND_SERVICE): "
                "pass --port 1024 or higher")
    if code == errno.EADDRNOTAVAIL:
        return (f"cannot listen on {host}: it is not an address of this machine; pass --host with one that is "
                "(127.0.0.1 for this machine only, 0.0.0.0 for every interface)")
    return f"cannot listen on {host} port {port}: {getattr(exc, 'strerror', None) or exc}; check --host and --port"


def tls_context(certfile: str, keyfile: str | None) -> ssl.SSLContext:
    """The server's TLS context; a certificate or key that cannot be used is a
    :class:`StartupError` that names the file."""
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        ctx.load_cert_chain(certfile, keyfile)
    except (OSError, ssl.SSLError) as exc:
        raise StartupError(_cannot_load(certfile, keyfile, exc)) from exc
    ctx.set_alpn_protocols(["http/1.1"])
    return ctx


def _cannot_load(certfile: str, keyfile: str | None, exc: Exception) -> str:
    files = [certfile] + ([keyfile] if keyfile else [])
    if isinstance(exc, ssl.SSLError) and exc.reason == "KEY_VALUES_MISMATCH":
        return f"the TLS key {keyfile} does not belong to the certificate {certfile}: pass the matching --keyfile"
    if not isinstance(exc, ssl.SSLError):
        missing = next((f for f in files if not os.path.isfile(f)), None)
        if missing is not None:
            return f"TLS file {missing} does not exist: pass --certfile (and --keyfile) with PEM files that do"
        return f"cannot read TLS file {' or '.join(files)}: {exc.strerror or exc}"
    return (f"cannot load a TLS certificate and key from {' and '.join(files)}: --certfile takes a PEM certificate "
            "chain, --keyfile its PEM private key (or leave it out when the key is in the certificate file)")
