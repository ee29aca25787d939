"""Plugin discovery through real entry points (dist-info folders on the path), selection,
configuration, conflicts and failures."""

from __future__ import annotations

import json
import os
import subprocess
import textwrap
from pathlib import Path

import pytest

from .helpers import MCPKIT, Server


def make_dist(root: Path, dist: str, plugin: str, module: str, code: str) -> None:
    """Install a plugin distribution the way pip would leave it: module + dist-info."""
    (root / f"{module}.py").write_text(textwrap.dedent(code))
    info = root / f"{dist.replace('-', '_')}-1.2.3.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.2.3\n")
    (info / "entry_points.txt").write_text(f"[mcpkit.plugins]\n{plugin} = {module}\n")


ECHO = """
    import sys
    import mcpkit

    CONFIG = {}

    @mcpkit.tool
    async def echo_config() -> str:
        '''Return the config this plugin got, and whether the HTTP stack is loaded.'''
        import json
        return json.dumps({"config": CONFIG, "http_loaded": any(m in sys.modules for m in ("hypercorn", "quart", "quart_trio"))})

    @mcpkit.hookimpl
    def mcpkit_tools(config):
        CONFIG.update(config)
        return [echo_config]
"""

CLASH = """
    import mcpkit

    @mcpkit.tool
    async def echo_config() -> str:
        return "I clash"

    @mcpkit.hookimpl
    def mcpkit_tools(config):
        return [echo_config]
"""

BROKEN = """
    raise ImportError("missing dependency frobnicate")
"""

LIFESPAN = """
    import contextlib, os
    import mcpkit

    @contextlib.asynccontextmanager
    async def held(path):
        with open(path, "a") as f: f.write("open\\n")
        try:
            yield
        finally:
            with open(path, "a") as f: f.write("closed\\n")

    @mcpkit.hookimpl
    def mcpkit_lifespan(config):
        return held(config["marker"])

    @mcpkit.hookimpl
    def mcpkit_cli_commands():
        import click
        @click.command("shout")
        @click.argument("word")
        def shout(word):
            '''Print WORD loudly.'''
            click.echo(word.upper() + "!")
        return [shout]
"""


@pytest.fixture
def site(tmp_path: Path) -> Path:
    root = tmp_path / "site"
    root.mkdir()
    return root


def env_for(site: Path, **extra: str) -> dict[str, str]:
    """The crafted plugins in ``site``, ahead of the fixture plugins (hello) the tests see."""
    return {"PYTHONPATH": os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")])), **extra}


def run_cli(site: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([MCPKIT, *args], capture_output=True, text=True, env={**os.environ, **env_for(site, **env)}, timeout=60, stdin=subprocess.DEVNULL)


def tool_names(srv: Server) -> list[str]:
    srv.initialize()
    return [t["name"] for t in srv.request("tools/list")["result"]["tools"]]


def test_every_installed_plugin_loads_and_config_reaches_it(site: Path, tmp_path: Path) -> None:
    make_dist(site, "acme-echo", "echo", "acme_echo", ECHO)
    cfg = tmp_path / "mcpkit.toml"
    cfg.write_text('[server]\ndefault_timeout = 3\n\n[plugins.echo]\ncolour = "blue"\nlimit = 3\n')
    with Server("--config", str(cfg), env=env_for(site, MCPKIT_PLUGIN__ECHO__LIMIT="7")) as srv:
        names = tool_names(srv)
        assert "echo_config" in names and "greet" in names  # hello is installed too
        out = json.loads(srv.request("tools/call", {"name": "echo_config", "arguments": {}})["result"]["content"][0]["text"])
    assert out == {"config": {"colour": "blue", "limit": 7}, "http_loaded": False}


def test_plugin_and_disable_select(site: Path) -> None:
    make_dist(site, "acme-echo", "echo", "acme_echo", ECHO)
    with Server("--plugin", "echo", env=env_for(site)) as srv:
        assert tool_names(srv) == ["echo_config"]
    with Server("--disable", "echo", env=env_for(site)) as srv:
        names = tool_names(srv)
        assert "echo_config" not in names and "greet" in names


def test_same_tool_name_in_two_plugins_is_a_startup_error(site: Path) -> None:
    make_dist(site, "acme-echo", "echo", "acme_echo", ECHO)
    make_dist(site, "other-echo", "clash", "other_echo", CLASH)
    proc = run_cli(site, "serve", "--plugin", "echo", "--plugin", "clash")
    assert proc.returncode != 0
    assert "echo_config" in proc.stderr and "'echo'" in proc.stderr and "'clash'" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_broken_plugin_is_logged_and_others_serve(site: Path) -> None:
    make_dist(site, "acme-echo", "echo", "acme_echo", ECHO)
    make_dist(site, "acme-broken", "broken", "acme_broken", BROKEN)
    with Server("--plugin", "echo", "--plugin", "broken", env=env_for(site)) as srv:
        assert tool_names(srv) == ["echo_config"]
        srv.close()
        assert b"broken" in srv.stderr and b"frobnicate" in srv.stderr
    strict = run_cli(site, "serve", "--plugin", "echo", "--plugin", "broken", "--strict")
    assert strict.returncode != 0 and "frobnicate" in strict.stderr


def test_plugins_command_lists_everything(site: Path) -> None:
    make_dist(site, "acme-echo", "echo", "acme_echo", ECHO)
    make_dist(site, "acme-broken", "broken", "acme_broken", BROKEN)
    text = run_cli(site, "plugins")
    assert text.returncode == 0
    assert "echo  (acme-echo 1.2.3)" in text.stdout and "tools: echo_config" in text.stdout
    assert "ERROR: import failed: ImportError: missing dependency frobnicate" in text.stdout
    strict = run_cli(site, "plugins", "--strict")  # the whole listing still, then exit 1
    assert (strict.returncode, strict.stdout) == (1, text.stdout), strict.stderr
    rows = {r["name"]: r for r in json.loads(run_cli(site, "plugins", "--json").stdout)}
    assert rows["hello"]["tools"][:2] == ["greet", "count"] and rows["hello"]["prompts"] == ["introduce"]
    assert rows["broken"]["loaded"] is False


def test_lifespan_and_cli_commands(site: Path, tmp_path: Path) -> None:
    marker = tmp_path / "marker.txt"
    make_dist(site, "acme-life", "life", "acme_life", LIFESPAN)
    with Server("--plugin", "life", "--plugin", "hello", env=env_for(site, MCPKIT_PLUGIN__LIFE__MARKER=json.dumps(str(marker)))) as srv:
        srv.initialize()
        assert marker.read_text() == "open\n"
        assert srv.close() == 0
    assert marker.read_text() == "open\nclosed\n"
    shout = run_cli(site, "shout", "hi")
    assert shout.returncode == 0 and shout.stdout == "HI!\n"
    assert "shout" in run_cli(site, "--help").stdout


def test_unknown_plugin_name_and_bad_config(site: Path, tmp_path: Path) -> None:
    proc = run_cli(site, "serve", "--plugin", "nosuch")
    assert proc.returncode != 0 and "nosuch" in proc.stderr
    bad = tmp_path / "bad.toml"
    bad.write_text("[server\n")
    proc = run_cli(site, "serve", "--config", str(bad))
    assert proc.returncode != 0 and "not valid TOML" in proc.stderr and "Traceback" not in proc.stderr


def test_version_flag() -> None:
    out = subprocess.run([MCPKIT, "--version"], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0 and out.stdout.startswith("mcpkit, version ")
