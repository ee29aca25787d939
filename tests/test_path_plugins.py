"""Plugins given by path (`mcpkit serve ./weather.py`): real `mcpkit` processes over stdio and
HTTP, `mcpkit plugins PATH`, the plugin_paths setting, `mcpkit install HOST PATH`,
`mcpkit.testing` with a path, and `mcpkit new plugin --from PATH` (its generated tests run)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import mcpkit.client as mc
import mcpkit.testing
from mcpkit.client.transports.stdio import StdioTransport

from .helpers import MCPKIT
from .http_helpers import HttpServer

WEATHER = '''\
"""Weather for the assistant."""
from typing import Annotated

import msgspec

import mcpkit
from weather_data import SKY  # a module next to the file imports as it would from a script


@mcpkit.tool
def outlook(city: Annotated[str, msgspec.Meta(min_length=1)], days: int = 1) -> str:
    """The outlook for a city."""
    return f"{city}: {SKY} for {days} day(s), {SETTINGS['unit']}"


SETTINGS = {"unit": "C"}


@mcpkit.hookimpl
def mcpkit_tools(config):
    SETTINGS["unit"] = config.get("unit", "C")
    return [outlook]
'''


@pytest.fixture
def weather(tmp_path: Path) -> Path:
    folder = tmp_path / "work"
    folder.mkdir()
    (folder / "weather_data.py").write_text('SKY = "sunny"\n')
    path = folder / "weather.py"
    path.write_text(WEATHER)
    return path


def run(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([MCPKIT, *args], capture_output=True, text=True, timeout=120, cwd=cwd,
                          env={**os.environ, **(env or {})}, stdin=subprocess.DEVNULL)


async def test_serve_a_file_over_stdio_next_to_the_installed_plugins(weather: Path) -> None:
    command = [MCPKIT, "serve", "./weather.py", "--plugin", "hello", "--plugin", "weather"]
    transport = StdioTransport(command, cwd=str(weather.parent), stderr=subprocess.DEVNULL)
    async with mc.connect(command, transport=transport) as client:
        names = {tool["name"] for tool in await client.list_tools()}
        assert {"outlook", "greet"} <= names  # the file's tool and the installed hello plugin's
        assert (await client.call_tool("outlook", {"city": "Oslo", "days": 2})).text == "Oslo: sunny for 2 day(s), C"
        refused = await client.call_tool("outlook", {"city": ""}, validate=False)
        assert refused.is_error and "city" in refused.text


def test_serve_a_file_over_http(weather: Path) -> None:
    with HttpServer("--plugin-path", str(weather), "--plugin", "weather") as srv:
        sid = srv.initialize()
        status, _, reply = srv.rpc("tools/call", {"name": "outlook", "arguments": {"city": "Lima"}}, session=sid)
        assert status == 200 and reply["result"]["content"][0]["text"] == "Lima: sunny for 1 day(s), C"
        status, _, body = srv.call("GET", "/healthz")
        assert json.loads(body)["plugins"] == ["weather"]


def test_a_file_named_like_a_standard_module_shadows_nothing(tmp_path: Path) -> None:
    (tmp_path / "http.py").write_text(WEATHER.replace("from weather_data import SKY", 'SKY = "fog"'))
    with HttpServer(str(tmp_path / "http.py"), "--plugin", "http") as srv:  # the server imports http.client
        sid = srv.initialize()
        reply = srv.rpc("tools/call", {"name": "outlook", "arguments": {"city": "Rome"}}, session=sid)[2]
        assert reply["result"]["content"][0]["text"] == "Rome: fog for 1 day(s), C"


def test_a_package_folder_with_relative_imports_and_its_table(tmp_path: Path) -> None:
    pkg = tmp_path / "almanac"
    pkg.mkdir()
    (pkg / "sun.py").write_text("def rise(city: str) -> str:\n    return f'{city}: 06:12'\n")
    (pkg / "__init__.py").write_text(textwrap.dedent('''\
        import mcpkit
        from .sun import rise

        @mcpkit.tool
        def sunrise(city: str) -> str:
            """When the sun rises."""
            return rise(city)

        @mcpkit.hookimpl
        def mcpkit_tools(config, plugin):
            return [sunrise]
        '''))
    config = tmp_path / "mcpkit.toml"
    config.write_text('[server]\nplugin_paths = ["almanac"]\nplugins = ["almanac"]\n\n[plugins.almanac]\nprefix = "sky"\n')
    listed = run("plugins", "--config", str(config), "--json")
    assert listed.returncode == 0, listed.stderr
    (row,) = json.loads(listed.stdout)
    assert (row["name"], row["path"], row["tools"], row["error"]) == ("almanac", str(pkg), ["sky_sunrise"], None)
    # the variable does the same, with the OS's path separator
    env = {"MCPKIT_PLUGIN_PATHS": os.pathsep.join([str(pkg), str(tmp_path / "missing.py")])}
    missing = run("plugins", "--plugin", "almanac", env=env)
    assert missing.returncode == 1 and "missing.py: no such file or folder" in missing.stderr


def test_mcpkit_plugins_reports_a_files_mistakes_like_an_installed_plugins(tmp_path: Path) -> None:
    (tmp_path / "sloppy.py").write_text(textwrap.dedent('''\
        import mcpkit

        @mcpkit.tool
        def echo(text) -> str:
            return text

        def mcpkit_tools(config):
            return [echo]

        @mcpkit.hookimpl
        def mcpkit_tool(config):
            return [echo]
        '''))
    (tmp_path / "broken.py").write_text("import mcpkit\n\ndef oops(:\n")
    out = run("plugins", "sloppy.py", "broken.py", "--plugin", "sloppy", "--plugin", "broken", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert f"sloppy  ({tmp_path / 'sloppy.py'})" in lines
    assert "  WARNING: function mcpkit_tools is not marked @mcpkit.hookimpl, so it is never called" in lines
    assert any("hook 'mcpkit_tool' is not an mcpkit hook, so it is never called (did you mean mcpkit_tools?)" in line
               for line in lines)
    assert any(line.startswith("  ERROR: import failed: SyntaxError") and "line 3" in line for line in lines), lines
    strict = run("plugins", "sloppy.py", "broken.py", "--plugin", "sloppy", "--plugin", "broken", "--strict", cwd=tmp_path)
    assert strict.returncode == 1 and "problems (fatal with --strict)" in strict.stderr
    # serve refuses under --strict, with the plugin's name and the reason, as for an installed one
    served = run("serve", "broken.py", "--plugin", "broken", "--strict", cwd=tmp_path)
    assert served.returncode == 1 and "plugin broken: import failed: SyntaxError" in served.stderr


def test_conflicts_and_names_follow_the_installed_rules(tmp_path: Path, weather: Path) -> None:
    (tmp_path / "rival.py").write_text(WEATHER.replace("from weather_data import SKY", 'SKY = "rain"'))
    clash = run("serve", str(weather), str(tmp_path / "rival.py"), "--plugin", "weather", "--plugin", "rival")
    assert clash.returncode == 1
    assert "tool 'outlook' is offered by both plugin 'weather' and plugin 'rival'" in clash.stderr
    assert '[plugins.rival] prefix = "rival"' in clash.stderr
    # a file named like an installed plugin is served instead of it, and says so
    (tmp_path / "hello.py").write_text(WEATHER.replace("from weather_data import SKY", 'SKY = "mild"'))
    listed = run("plugins", str(tmp_path / "hello.py"), "--plugin", "hello", "--json")
    (row,) = json.loads(listed.stdout)
    assert row["tools"] == ["outlook"] and row["path"] == str(tmp_path / "hello.py")
    assert "is served instead of the installed plugin hello" in listed.stderr
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "weather.py").write_text(WEATHER)
    twice = run("plugins", str(weather), str(tmp_path / "a" / "weather.py"))
    assert twice.returncode == 1 and "two plugin paths are both named 'weather'" in twice.stderr
    gone = run("serve", str(tmp_path / "gone.py"))
    assert gone.returncode == 2 and "does not exist" in gone.stderr
    (tmp_path / "notes.txt").write_text("x")
    text = run("plugins", str(tmp_path / "notes.txt"))
    assert text.returncode == 1 and "not a Python file (.py) or a package folder" in text.stderr


async def test_mcpkit_testing_takes_a_path(weather: Path) -> None:
    config = {"plugins": {"weather": {"unit": "F"}}}
    async with mcpkit.testing.connect(weather, config=config) as client:
        assert (await client.call_tool("outlook", {"city": "Oslo"})).text == "Oslo: sunny for 1 day(s), F"
        assert [(info.name, info.path) for info in client.app.plugins] == [("weather", str(weather))]


async def test_install_runs_the_file_through_this_installation(tmp_path: Path, weather: Path) -> None:
    out = run("install", "mcp-json", str(weather), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    entry = json.loads(out.stdout)["mcpServers"]["weather"]  # named after the plugin
    assert entry == {"command": MCPKIT, "args": ["serve", str(weather)]}
    command = [entry["command"], *entry["args"]]
    async with mc.connect(command, transport=StdioTransport(command, cwd="/", stderr=subprocess.DEVNULL)) as client:
        assert (await client.call_tool("outlook", {"city": "Kyiv"})).text == "Kyiv: sunny for 1 day(s), C"
    (tmp_path / "typo.py").write_text("def f(:\n")
    refused = run("install", "mcp-json", str(tmp_path / "typo.py"), cwd=tmp_path)
    assert refused.returncode == 1 and "typo.py, line 1" in refused.stderr and "nothing was written" in refused.stderr


def test_new_plugin_from_a_file_graduates_it_with_a_passing_test_per_tool(tmp_path: Path, weather: Path) -> None:
    (weather.parent / "weather.py").write_text(WEATHER.replace("from weather_data import SKY", 'SKY = "sunny"')
                                               + textwrap.dedent('''
        from typing import Literal

        @mcpkit.tool
        def units(system: Literal["metric", "imperial"] = "metric") -> dict:
            """The unit system."""
            return {"system": system}

        @mcpkit.hookimpl
        def mcpkit_prompts(config):
            return []
        '''))
    (weather.parent / "weather.py").write_text((weather.parent / "weather.py").read_text().replace(
        "return [outlook]", "return [outlook, units]"))
    root = tmp_path / "dist"
    made = run("new", "plugin", "--from", str(weather), "--dir", str(root))
    assert made.returncode == 0, made.stderr
    assert (root / "src/mcpkit_weather/plugin.py").read_text() == weather.read_text()
    pyproject = (root / "pyproject.toml").read_text()
    assert 'weather = "mcpkit_weather.plugin"' in pyproject and 'description = "Weather for the assistant."' in pyproject
    tests = (root / "tests/test_plugin.py").read_text()
    assert "async def test_outlook(" in tests and "async def test_units(" in tests
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly"],
                            cwd=root, capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": ""})
    assert result.returncode == 0 and "3 passed" in result.stdout, result.stdout + result.stderr
    # the generated tests can fail: a tool whose schema changed is caught
    plugin = root / "src/mcpkit_weather/plugin.py"
    plugin.write_text(plugin.read_text().replace("days: int = 1", "days: int = 2"))
    changed = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly"],
                             cwd=root, capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": ""})
    assert changed.returncode == 1 and "1 failed, 2 passed" in changed.stdout, changed.stdout


def test_new_plugin_from_refuses_a_file_that_does_not_load(tmp_path: Path) -> None:
    (tmp_path / "weather.py").write_text("import mcpkit\nimport no_such_module_anywhere\n")
    out = run("new", "plugin", "--from", "weather.py", cwd=tmp_path)
    assert out.returncode == 1
    assert "does not load, so nothing was written: import failed: ModuleNotFoundError" in out.stderr
    assert not (tmp_path / "mcpkit-weather").exists()
    (tmp_path / "weather.py").write_text(WEATHER.replace("from weather_data import SKY", 'SKY = "sunny"'))
    named = run("new", "plugin", "other", "--from", "weather.py", cwd=tmp_path)
    assert named.returncode == 2 and "the plugin in weather.py is named 'weather'" in named.stderr
