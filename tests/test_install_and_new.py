"""`mcpkit install HOST` against a temporary HOME (real files, real subprocesses), and
`mcpkit new plugin NAME`: the generated distribution's tests pass, and once installed it serves."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import mcpkit.client as mc

from .helpers import MCPKIT


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "home"
    (path / "project").mkdir(parents=True)
    return path


def mcpkit(home: Path, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("XDG_CONFIG_HOME", "APPDATA")}
    env["HOME"] = str(home)
    return subprocess.run([MCPKIT, *args], capture_output=True, text=True, env=env, timeout=120,
                          cwd=str(cwd or home / "project"), stdin=subprocess.DEVNULL)


def read(path: Path) -> dict:
    return json.loads(path.read_text())


@pytest.mark.parametrize("host, args, where, key, typed", [
    ("claude-desktop", [], ".config/Claude/claude_desktop_config.json", "mcpServers", False),
    ("claude-code", [], ".claude.json", "mcpServers", True),
    ("claude-code", ["--scope", "project"], "project/.mcp.json", "mcpServers", True),
    ("cursor", [], ".cursor/mcp.json", "mcpServers", False),
    ("cursor", ["--scope", "project"], "project/.cursor/mcp.json", "mcpServers", False),
    ("vscode", [], ".config/Code/User/mcp.json", "servers", True),
    ("vscode", ["--scope", "project"], "project/.vscode/mcp.json", "servers", True),
])
def test_install_writes_each_hosts_file(home: Path, host: str, args: list[str], where: str, key: str, typed: bool) -> None:
    proc = mcpkit(home, "install", host, "--plugin", "hello", "--env", "GREETING=hi", *args)
    assert proc.returncode == 0, proc.stderr
    path = home / where
    assert f"added server 'mcpkit' in {path}" in proc.stdout
    entry = read(path)[key]["mcpkit"]
    assert entry == {**({"type": "stdio"} if typed else {}), "command": MCPKIT,
                     "args": ["serve", "--plugin", "hello"], "env": {"GREETING": "hi"}}


def test_claude_code_local_scope_and_other_keys_are_kept(home: Path) -> None:
    config = home / ".claude.json"
    config.write_text(json.dumps({"numStartups": 7, "mcpServers": {"other": {"command": "x"}},
                                  "projects": {"/elsewhere": {"mcpServers": {}}}}))
    assert mcpkit(home, "install", "claude-code", "--scope", "local", "--name", "tools").returncode == 0
    assert mcpkit(home, "install", "claude-code").returncode == 0
    data = read(config)
    assert data["numStartups"] == 7 and data["projects"]["/elsewhere"] == {"mcpServers": {}}
    assert set(data["mcpServers"]) == {"other", "mcpkit"}
    assert data["projects"][str((home / "project").resolve())]["mcpServers"]["tools"]["args"] == ["serve"]
    assert read(config.with_name(".claude.json.bak"))["mcpServers"] == {"other": {"command": "x"}}  # the state before


def test_never_clobbers(home: Path) -> None:
    path = home / ".cursor" / "mcp.json"
    path.parent.mkdir()
    path.write_text(json.dumps({"mcpServers": {"mcpkit": {"command": "someone-elses"}, "keep": {"command": "y"}}}))
    refused = mcpkit(home, "install", "cursor")
    assert refused.returncode == 1 and "already has a different server named 'mcpkit'" in refused.stderr
    assert read(path)["mcpServers"]["mcpkit"] == {"command": "someone-elses"}
    forced = mcpkit(home, "install", "cursor", "--force")
    assert forced.returncode == 0 and "replaced server 'mcpkit'" in forced.stdout
    assert read(path)["mcpServers"]["keep"] == {"command": "y"} and read(path)["mcpServers"]["mcpkit"]["command"] == MCPKIT
    assert read(path.with_name("mcp.json.bak"))["mcpServers"]["mcpkit"] == {"command": "someone-elses"}
    again = mcpkit(home, "install", "cursor")
    assert again.returncode == 0 and "nothing to change" in again.stdout

    jsonc = home / ".config" / "Code" / "User" / "mcp.json"
    jsonc.parent.mkdir(parents=True)
    jsonc.write_text('{\n  // my servers\n  "servers": {}\n}\n')
    bad = mcpkit(home, "install", "vscode")
    assert bad.returncode == 1 and "is not plain JSON" in bad.stderr and '"command"' in bad.stderr
    assert jsonc.read_text().startswith('{\n  // my servers')


def test_dry_run_and_bad_input(home: Path) -> None:
    proc = mcpkit(home, "install", "claude-desktop", "--dry-run")
    assert proc.returncode == 0 and "dry run, nothing written" in proc.stdout and '"command"' in proc.stdout
    assert not (home / ".config").exists()
    assert mcpkit(home, "install", "claude-desktop", "--plugin", "nosuch").returncode == 2
    assert mcpkit(home, "install", "claude-desktop", "--env", "NOEQUALS").returncode == 2
    assert mcpkit(home, "install", "claude-desktop", "--scope", "project").returncode == 2
    assert not (home / ".config").exists()


async def test_mcp_json_snippet_runs_a_working_server(home: Path, tmp_path: Path) -> None:
    proc = mcpkit(home, "install", "mcp-json", "--plugin", "hello", "--name", "greeter")
    assert proc.returncode == 0, proc.stderr
    entry = json.loads(proc.stdout)["mcpServers"]["greeter"]
    async with mc.connect([entry["command"], *entry["args"]], server_stderr=subprocess.DEVNULL) as client:
        assert (await client.call_tool("greet", {"name": "Ada"})).text == "Hello, Ada."
    target = tmp_path / "servers.json"
    target.write_text('{"mcpServers": {"a": {"command": "b"}}}')
    assert mcpkit(home, "install", "mcp-json", "--file", str(target)).returncode == 0
    assert set(read(target)["mcpServers"]) == {"a", "mcpkit"}


def test_new_plugin_passes_its_tests_and_serves_once_installed(tmp_path: Path) -> None:
    root = tmp_path / "weather"
    proc = subprocess.run([MCPKIT, "new", "plugin", "weather", "--dir", str(root), "--description", "Weather tools"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "wrote" in proc.stdout and "pip install -e" in proc.stdout
    py = read_toml(root / "pyproject.toml")
    assert py["project"]["name"] == "mcpkit-weather"
    assert py["project"]["entry-points"]["mcpkit.plugins"] == {"weather": "mcpkit_weather.plugin"}
    assert py["project"]["dependencies"][0].startswith("mcpkit>=")

    tests = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"], cwd=root,
                           capture_output=True, text=True, timeout=120)
    assert tests.returncode == 0 and "5 passed" in tests.stdout, tests.stdout + tests.stderr

    site = tmp_path / "site"
    pip = subprocess.run([sys.executable, "-m", "pip", "install", "-qq", "--no-deps", "--target", str(site), str(root)],
                         capture_output=True, text=True, timeout=300)
    assert pip.returncode == 0, pip.stderr
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}
    listed = subprocess.run([MCPKIT, "plugins", "--plugin", "weather", "--strict"], capture_output=True, text=True,
                            env=env, timeout=60)
    assert listed.returncode == 0, listed.stderr
    assert "weather  (mcpkit-weather 0.1.0)" in listed.stdout and "tools: weather_hello" in listed.stdout
    assert "resources: weather://about" in listed.stdout and "WARNING" not in listed.stdout
    called = subprocess.run([MCPKIT, "call", "--stdio", f"{MCPKIT} serve --plugin weather", "weather_hello", "name=Ada"],
                            capture_output=True, text=True, env=env, timeout=60)
    assert (called.returncode, called.stdout) == (0, "Hello, Ada!\n"), called.stderr


def read_toml(path: Path) -> dict:
    import tomllib

    return tomllib.loads(path.read_text())


def test_new_plugin_refuses_bad_names_and_full_folders(tmp_path: Path) -> None:
    bad = subprocess.run([MCPKIT, "new", "plugin", "Bad Name!"], capture_output=True, text=True, cwd=tmp_path)
    assert bad.returncode == 2 and "lower-case letters" in bad.stderr
    (tmp_path / "mcpkit-x" / "keep.txt").parent.mkdir()
    (tmp_path / "mcpkit-x" / "keep.txt").write_text("mine")
    full = subprocess.run([MCPKIT, "new", "plugin", "x"], capture_output=True, text=True, cwd=tmp_path)
    assert full.returncode == 1 and "not empty" in full.stderr
    assert sorted(p.name for p in (tmp_path / "mcpkit-x").iterdir()) == ["keep.txt"]
