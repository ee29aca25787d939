"""The lean core and its extras, in venvs that really lack the extras' packages (tests/project_venv.py:
the test venv minus those distributions): the core serves stdio and HTTP (the plain routes
included) without any of them, and a setting that needs a missing extra stops the start with one
line naming it, never a traceback."""

from __future__ import annotations

import json
import os
import subprocess
import tomllib
from pathlib import Path

import pytest

from mcpkit._extras import EXTRAS, require

from .helpers import ROOT
from .http_helpers import ACCEPT, HttpServer, modern_headers
from .project_venv import project_venv

#: what the core no longer brings: the extras' packages, and the web framework the plain routes ran on
NOT_CORE = ("coredis", "pyjwt", "cryptography", "hypercorn", "quart", "quart-trio", "flask", "werkzeug", "opentelemetry-sdk")
STATELESS_META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}


@pytest.fixture(scope="module")
def lean(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv with the core's packages only."""
    return project_venv(tmp_path_factory.mktemp("lean") / "venv", without=NOT_CORE)


def run(venv: Path, *args: str, env: dict[str, str] | None = None, code: str | None = None) -> subprocess.CompletedProcess[str]:
    """``mcpkit ARGS`` (or ``python -c CODE``) in ``venv``, from a folder outside the checkout."""
    cmd = [str(venv / "bin" / "python"), "-c", code] if code is not None else [str(venv / "bin" / "mcpkit"), *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
                          env={**os.environ, **(env or {})}, cwd=venv)


def test_the_venv_lacks_what_it_should(lean: Path) -> None:
    code = "import importlib.util as u; print([m for m in ('coredis', 'jwt', 'cryptography', 'hypercorn', 'quart', 'werkzeug', 'flask') if u.find_spec(m)])"
    assert run(lean, code=code).stdout.strip() == "[]"


def test_the_core_serves_http_without_any_extra(lean: Path) -> None:
    with HttpServer("--plugin", "hello", "--auth-token", "dev-secret", exe=str(lean / "bin" / "mcpkit")) as srv:
        status, h, body = srv.call("GET", "/healthz", headers={"X-Request-ID": "lean-1"})
        assert status == 200 and h["x-request-id"] == "lean-1" and json.loads(body)["plugins"] == ["hello"]
        status, h, body = srv.call("GET", "/no/such/path", headers={"Authorization": "Bearer dev-secret"})
        assert status == 404 and json.loads(body)["error"]["code"] == "NOT_FOUND"
        status, h, body = srv.call("DELETE", "/healthz")
        assert status == 405 and h["allow"] == "GET, HEAD, OPTIONS" and json.loads(body)["error"]["code"] == "METHOD_NOT_ALLOWED"
        status, h, body = srv.call("POST", "/mcp/search", {"query": "abc"}, headers={"Authorization": "Bearer dev-secret"})
        assert status == 404 and h["x-mcp-version"] == "2" and json.loads(body)["error"]["code"] == "NOT_FOUND"
        call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": "greet", "arguments": {"name": "lean"}, "_meta": STATELESS_META}}
        assert srv.call("POST", "/mcp", call, headers=modern_headers("tools/call", "greet"))[0] == 401
        status, _, body = srv.call("POST", "/mcp", call, headers={**modern_headers("tools/call", "greet"),
                                                                  "Authorization": "Bearer dev-secret", "Accept": ACCEPT})
        assert status == 200 and "lean" in json.loads(body)["result"]["content"][0]["text"]
        assert b"Traceback" not in srv.stderr


def test_the_core_serves_stdio_without_any_extra(lean: Path) -> None:
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    proc = subprocess.run([str(lean / "bin" / "mcpkit"), "serve", "--plugin", "hello"], input=json.dumps(init) + "\n",
                          capture_output=True, text=True, timeout=60, cwd=lean)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.splitlines()[0])["result"]["serverInfo"]["name"] == "mcpkit"


REDIS = "state = redis://… needs the redis extra: pip install 'mcpkit[redis]'"
OAUTH = "auth verifier = jwt needs the oauth extra: pip install 'mcpkit[oauth]'"
HYPERCORN = "http_server = hypercorn (--server hypercorn) needs the hypercorn extra: pip install 'mcpkit[hypercorn]'"
OTEL = "traces = true (--traces) needs the otel extra: pip install 'mcpkit[otel]'"
OTEL_METRICS = ("OTLP metrics export (OTEL_METRICS_EXPORTER=otlp) needs the otel extra: "
                "pip install 'mcpkit[otel]'")
JWT_AUTH = ("--auth", "jwt", "--auth-issuer", "https://issuer.example", "--auth-resource", "http://127.0.0.1:8000/mcp")


@pytest.mark.parametrize(("without", "args", "env", "line"), [
    (("coredis",), ("--state", "redis://127.0.0.1:1/0"), {}, REDIS),
    (("coredis",), ("--transport", "http", "--port", "0", "--state", "redis://:hunter2@127.0.0.1:1/0"), {}, REDIS),
    (("coredis",), ("--transport", "http", "--port", "0", "--workers", "2"), {"MCPKIT_STATE": "rediss://127.0.0.1:1/0"},
     REDIS.replace("redis://", "rediss://")),
    (("pyjwt",), ("--transport", "http", "--port", "0", *JWT_AUTH), {}, OAUTH),
    (("cryptography",), ("--transport", "http", "--port", "0", *JWT_AUTH), {}, OAUTH),
    (("hypercorn",), ("--transport", "http", "--port", "0", "--server", "hypercorn"), {}, HYPERCORN),
    (("hypercorn",), ("--transport", "http", "--port", "0", "--server", "hypercorn", "--workers", "2"), {}, HYPERCORN),
    (("hypercorn",), ("--transport", "sse", "--port", "0"), {"MCPKIT_HTTP_SERVER": "hypercorn"}, HYPERCORN),
    (("opentelemetry-sdk",), ("--traces",), {}, OTEL),
    (("opentelemetry-sdk",), ("--transport", "http", "--port", "0", "--traces"), {}, OTEL),
    (("opentelemetry-sdk",), ("--transport", "http", "--port", "0", "--workers", "2"), {"MCPKIT_TRACES": "true"}, OTEL),
    (("opentelemetry-sdk",), ("--transport", "http", "--port", "0", "--metrics"), {"OTEL_METRICS_EXPORTER": "otlp"},
     OTEL_METRICS),
    (("opentelemetry-sdk",), (), {"OTEL_METRICS_EXPORTER": "otlp,console"}, OTEL_METRICS),
], ids=["redis-stdio", "redis-http", "redis-workers", "jwt", "jwt-crypto", "hypercorn", "hypercorn-workers", "hypercorn-env",
        "otel-stdio", "otel-http", "otel-workers-env", "otel-metrics-http", "otel-metrics-stdio"])
def test_a_setting_without_its_extra_stops_in_one_line(tmp_path: Path, without: tuple[str, ...], args: tuple[str, ...],
                                                       env: dict[str, str], line: str) -> None:
    venv = project_venv(tmp_path / "venv", without=without)
    proc = run(venv, "serve", "--plugin", "hello", *args, env=env)
    assert proc.returncode == 1 and proc.stderr == f"Error: {line}\n", proc.stderr
    assert "hunter2" not in proc.stderr and proc.stdout == ""


def test_a_verifier_that_needs_no_extra_starts_without_them(lean: Path) -> None:
    """Only the jwt verifier needs PyJWT: the static token and introspection start without it."""
    introspection = {"MCPKIT_AUTH__INTROSPECTION_ENDPOINT": "https://issuer.example/introspect"}
    for args, env in ((("--auth-token", "t"), {}), (("--auth", "introspection", "--auth-issuer", "https://issuer.example"), introspection)):
        with HttpServer("--plugin", "hello", *args, env=env, exe=str(lean / "bin" / "mcpkit")) as srv:
            assert srv.call("GET", "/healthz")[0] == 200


@pytest.mark.parametrize(("code", "line"), [
    ("OAuth(dpop=True)", "OAuth(dpop=True) needs the oauth extra: pip install 'mcpkit[oauth]'"),
    ("OAuth(grant='client_credentials', client_id='robot', private_key='PEM')",
     "OAuth(private_key=...) (private_key_jwt) needs the oauth extra: pip install 'mcpkit[oauth]'"),
    ("DPoPKey()", "a DPoP-bound token needs the oauth extra: pip install 'mcpkit[oauth]'"),
    ("signed_assertion('PEM', 'ES256', iss='a', sub='a', aud='b')",
     "a signed client assertion (private_key_jwt) needs the oauth extra: pip install 'mcpkit[oauth]'"),
])
def test_the_client_names_the_oauth_extra(lean: Path, code: str, line: str) -> None:
    program = ("from mcpkit.client.oauth import OAuth\nfrom mcpkit.client.oauth._dpop import DPoPKey\n"
               "from mcpkit.client.oauth.grants import signed_assertion\nfrom mcpkit._extras import MissingExtra\n"
               f"try:\n    {code}\nexcept MissingExtra as exc:\n    print(exc)\nelse:\n    print('no error')\n")
    proc = run(lean, code=program)
    assert proc.stdout == line + "\n", proc.stderr


def test_a_plugins_redis_client_names_the_redis_extra(lean: Path) -> None:
    program = ("import mcpkit\nfrom mcpkit._extras import MissingExtra\n"
               "try:\n    mcpkit.redis_client('redis://127.0.0.1:1/0')\nexcept MissingExtra as exc:\n    print(exc)\n")
    proc = run(lean, code=program)
    assert proc.stdout == "mcpkit.redis_client() needs the redis extra: pip install 'mcpkit[redis]'\n", proc.stderr


def test_the_client_signs_with_the_extra_installed(tmp_path: Path) -> None:
    """The same calls work where the extra is present (the test venv has it)."""
    program = ("from mcpkit.client.oauth import OAuth\nfrom mcpkit.client.oauth._dpop import DPoPKey\n"
               "OAuth(dpop=True); key = DPoPKey(); print(key.proof('POST', 'https://as.example/token').count('.'))")
    venv = project_venv(tmp_path / "venv")
    proc = run(venv, code=program)
    assert proc.stdout == "2\n", proc.stderr


def test_every_extra_named_is_declared_and_installed_by_make() -> None:
    """The extra a message names exists in pyproject.toml, and `make install` (which `make serve`
    and `make test` run) put its packages into this venv."""
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for extra in EXTRAS:
        assert declared.get(extra), f"pyproject.toml declares no [{extra}] extra"
        require(extra, "this test")
