"""Mistakes in the config file and the environment are reported, not ignored: a misspelled
section, a table or variable for a plugin that is not installed, an MCPKIT_* variable nothing
reads. Each is one warning at start with a suggestion, the server serves anyway, --strict makes
them fatal; a value outside a fixed set lists the set. Real `mcpkit` subprocesses, real files."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from mcpkit.plugins.config import Config
from mcpkit.plugins.config_check import config_problems

from .helpers import MCPKIT, ROOT, Server

MISTAKES = """\
[sever]
port = 9

[plugins.helo]
greeting = "hi"

[hello]
greeting = "hi"
"""

MISTAKEN_ENV = {"MCPKIT_LOG_LEVL": "info", "MCPKIT_PLUGIN__HELO__GREETING": "hi", "MCPKIT_AUTH__ISUER": "x"}

#: each mistake's warning, with the suggestion it must carry
WARNINGS = [
    "unknown section [sever], so it is ignored; did you mean [server]?",
    "unknown section [hello], so it is ignored; a plugin's table is [plugins.hello]",
    "[plugins.helo] is for a plugin that is not installed, so it is ignored; did you mean [plugins.hello]?",
    "environment variable MCPKIT_LOG_LEVL is not read by mcpkit, so it is ignored; did you mean MCPKIT_LOG_LEVEL?",
    "environment variable MCPKIT_PLUGIN__HELO__GREETING is for a plugin that is not installed, so it is ignored; "
    "did you mean MCPKIT_PLUGIN__HELLO__GREETING?",
    "environment variable MCPKIT_AUTH__ISUER is not read by mcpkit, so it is ignored; did you mean MCPKIT_AUTH__ISSUER?",
]


def run(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([MCPKIT, *args], capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
                          env={**os.environ, **env})


def test_each_mistake_is_warned_once_with_a_suggestion_and_the_server_serves(tmp_path: Path) -> None:
    cfg = tmp_path / "mcpkit.toml"
    cfg.write_text(MISTAKES)
    with Server("--config", str(cfg), "--plugin", "hello", env=MISTAKEN_ENV) as srv:
        srv.initialize()
        assert srv.request("tools/call", {"name": "greet", "arguments": {"name": "Ada"}})["result"]["content"]
        assert srv.close() == 0
    stderr = srv.stderr.decode()
    for warning in WARNINGS:
        assert stderr.count(warning) == 1, (warning, stderr)
    assert f"config file {cfg}: unknown section [sever]" in stderr and "Traceback" not in stderr

    listed = run("plugins", "--config", str(cfg), "--plugin", "hello", **MISTAKEN_ENV)  # the same on the listing
    assert listed.returncode == 0 and all(listed.stderr.count(w) == 1 for w in WARNINGS), listed.stderr


def test_strict_makes_a_config_mistake_fatal(tmp_path: Path) -> None:
    cfg = tmp_path / "mcpkit.toml"
    cfg.write_text("[sever]\nport = 9\n")
    served = run("serve", "--config", str(cfg), "--plugin", "hello", "--strict")
    assert served.returncode == 1 and "Traceback" not in served.stderr
    assert served.stderr.strip().endswith("unknown section [sever], so it is ignored; did you mean [server]? "
                                          "(sections: [server], [plugins.NAME], [upstreams.NAME]) (fatal with --strict)"), served.stderr
    listed = run("plugins", "--plugin", "hello", "--strict", MCPKIT_LOG_LEVL="info")
    assert listed.returncode == 1 and "hello  (mcpkit-hello" in listed.stdout  # listed, then refused
    assert "did you mean MCPKIT_LOG_LEVEL?" in listed.stderr and "1 problem (fatal with --strict)" in listed.stderr


@pytest.mark.parametrize("env, table, expected", [
    ({"MCPKIT_LOG_LEVEL": "verbose"}, "",
     "invalid server setting MCPKIT_LOG_LEVEL=verbose: 'verbose' is not one of: debug, info, warning, error"),
    ({}, '[server]\nresponse_mode = "stream"\n',
     "response_mode: 'stream' is not one of: auto, sse, json"),
    ({}, '[server.auth]\nisuer = "https://id.example.com"\n',
     "auth: unknown key 'isuer'; did you mean 'issuer'?"),
])
def test_bad_values_list_what_is_accepted(tmp_path: Path, env: dict[str, str], table: str, expected: str) -> None:
    cfg = tmp_path / "mcpkit.toml"
    cfg.write_text(table)
    proc = run("serve", "--config", str(cfg), "--plugin", "hello", **env)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert expected in proc.stderr.strip().splitlines()[-1], proc.stderr


def test_a_file_naming_only_plugins_that_are_not_installed_is_an_error(tmp_path: Path) -> None:
    """docs/configuration.md: an unknown name in the file is a warning, unless nothing would be served."""
    cfg = tmp_path / "mcpkit.toml"
    cfg.write_text('[server]\nplugins = ["helo"]\n')
    proc = run("serve", "--config", str(cfg))
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert "no installed plugin named 'helo'; did you mean 'hello'?" in proc.stderr
    assert "nothing to serve" in proc.stderr
    cfg.write_text('[server]\nplugins = ["helo", "hello"]\n')
    with Server("--config", str(cfg)) as srv:
        srv.initialize()
        assert srv.close() == 0
    assert srv.stderr.count(b"no installed plugin named 'helo'; did you mean 'hello'?") == 1
    assert b"serving 7 tools from plugin hello" in srv.stderr


def test_every_variable_mcpkit_reads_is_known() -> None:
    """A variable named in mcpkit's code, a bundled plugin's code or the docs is never reported."""
    sources = [*(ROOT / "mcpkit").rglob("*.py"), *(ROOT / "plugins").glob("*/src/**/*.py"), *(ROOT / "docs").glob("*.md")]
    lines = [line for path in sources for line in path.read_text().splitlines()
             if "did you mean" not in line]  # the docs' examples of mistakes
    named = {m for line in lines for m in re.findall(r"MCPKIT_[A-Z0-9_]+", line)}
    named = {n for n in named if not n.endswith("_") and "__NAME__" not in n}  # prefixes, the docs' placeholder
    assert len(named) > 15
    installed = ["codesearch", "openapi", "invocation_log", "hello", "life", "echo", "docs", "clash", "conformance"]
    assert config_problems(Config(), installed, {name: "x" for name in named}) == []
