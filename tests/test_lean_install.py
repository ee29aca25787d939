"""`pip install mcpkit` stays lean: a real `pip install` of this checkout into a fresh venv brings
at most CORE_LIMIT distributions (docs/installing.md gives the number), none of the extras'
packages, and serves; the extras install on top and bring what they promise.

Cost: two pip runs that take the dependencies from the package index as `make install` does
(pip's own cache and any configured wheel folder make repeats quicker); about 15 s here.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from mcpkit._extras import EXTRAS

from .helpers import ROOT
from .http_helpers import ACCEPT, HttpServer, modern_headers

#: the most distributions `pip install mcpkit` may bring, mcpkit itself included (pip and
#: setuptools, which every venv has, not counted)
CORE_LIMIT = 32
#: what must never come with the core: the extras' packages and a web framework
NOT_CORE = {"coredis", "pyjwt", "cryptography", "hypercorn", "quart", "quart-trio", "flask", "werkzeug", "opentelemetry-api",
            "opentelemetry-sdk", "protobuf"}


def pip_install(venv: Path, *targets: str) -> None:
    """This test venv's pip, installing into ``venv`` (which has no pip of its own)."""
    proc = subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install",
                           "--quiet", "--disable-pip-version-check", *targets],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr


def installed(venv: Path) -> set[str]:
    """The distributions in ``venv``, by normalized name."""
    site = next((venv / "lib").glob("python3*/site-packages"))
    names = {metadata.Distribution.at(p).metadata["Name"] for p in site.glob("*.dist-info")}
    return {n.lower().replace("_", "-").replace(".", "-") for n in names} - {"pip", "setuptools"}


@pytest.fixture(scope="module")
def checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """What a clean checkout holds for the build (no .venv, no egg-info, no caches)."""
    src = tmp_path_factory.mktemp("checkout") / "mcpkit"
    shutil.copytree(ROOT / "mcpkit", src / "mcpkit", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    return src


@pytest.fixture(scope="module")
def core_venv(tmp_path_factory: pytest.TempPathFactory, checkout: Path) -> Path:
    venv = tmp_path_factory.mktemp("lean") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=60)
    pip_install(venv, str(checkout))
    return venv


def test_the_core_install_is_lean(core_venv: Path) -> None:
    names = installed(core_venv)
    assert "mcpkit" in names
    assert len(names) <= CORE_LIMIT, f"{len(names)} distributions: {sorted(names)}"
    assert not names & NOT_CORE, sorted(names & NOT_CORE)


def test_the_core_install_serves(core_venv: Path) -> None:
    with HttpServer("--plugin", "hello", exe=str(core_venv / "bin" / "mcpkit")) as srv:  # hello: the tests' fixture site
        status, _, body = srv.call("GET", "/healthz")
        assert status == 200 and json.loads(body)["status"] == "ok"
        call = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}}}
        status, _, body = srv.call("POST", "/mcp", call, headers={**modern_headers("tools/list"), "Accept": ACCEPT})
        assert status == 200 and "greet" in {t["name"] for t in json.loads(body)["result"]["tools"]}


def test_the_core_install_serves_the_console_page(core_venv: Path) -> None:
    """The console's page, script and style are package data: a real (not editable) install has them."""
    with HttpServer("--plugin", "hello", "--console", exe=str(core_venv / "bin" / "mcpkit")) as srv:
        for path, kind, mark in (("/console", "text/html", b"console.js"), ("/console/static/console.js", "text/javascript", b"EventSource"),
                                 ("/console/static/console.css", "text/css", b".tool")):
            status, headers, body = srv.call("GET", path)
            assert status == 200 and headers["content-type"].startswith(kind) and mark in body, path


def test_the_extras_install_on_top(core_venv: Path, checkout: Path) -> None:
    before = installed(core_venv)
    pip_install(core_venv, f"{checkout}[{','.join(EXTRAS)}]")
    added = installed(core_venv) - before
    assert {"coredis", "pyjwt", "cryptography", "hypercorn", "opentelemetry-sdk"} <= added, sorted(added)
    modules = sorted({m for ms in EXTRAS.values() for m in ms})
    code = f"import importlib; [importlib.import_module(m) for m in {modules!r}]"
    proc = subprocess.run([str(core_venv / "bin" / "python"), "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
