"""Load-time plugin mistakes: each gets a message naming plugin, item and parameter, --strict makes
it fatal, and `mcpkit plugins` lists everything, conflicts marked. Namespacing resolves conflicts.
Real plugin distributions on PYTHONPATH, real `mcpkit` subprocesses."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import mcpkit
import mcpkit.testing
from mcpkit.plugins.loader import PluginError

from .helpers import Server
from .test_plugins import CLASH, ECHO, env_for, make_dist, run_cli, site, tool_names  # noqa: F401 (site: fixture)

PING = """
    import mcpkit

    @mcpkit.tool
    async def ping() -> str:
        return "pong"
"""

UNMARKED = PING + """
    def mcpkit_tools(config):          # no @mcpkit.hookimpl
        return [ping]
"""

MISSPELLED = PING + """
    @mcpkit.hookimpl
    def mcpkit_tool(config):           # the hook is mcpkit_tools
        return [ping]
"""

TWICE = PING + """
    @mcpkit.hookimpl
    def mcpkit_tools(config):
        return [ping, ping]
"""

TEMPLATE_MISMATCH = """
    import mcpkit

    @mcpkit.resource("notes://{title}")
    def note(name: str) -> str:
        return name

    @mcpkit.hookimpl
    def mcpkit_resources(config):
        return [note]
"""

BAD_HINT = """
    import mcpkit

    class Point:
        pass

    @mcpkit.tool
    async def plot(where: Point, label: str = "") -> str:
        return "ok"

    @mcpkit.hookimpl
    def mcpkit_tools(config):
        return [plot]
"""

UNTYPED = """
    import mcpkit

    @mcpkit.tool
    async def shout(word, times: int = 1) -> str:
        return str(word).upper() * times

    @mcpkit.hookimpl
    def mcpkit_tools(config):
        return [shout]
"""

def plugin_rows(site: Path, *args: str, **env: str) -> dict[str, dict]:
    proc = run_cli(site, "plugins", "--json", *args, **env)
    assert "Traceback" not in proc.stderr
    return {row["name"]: row for row in json.loads(proc.stdout)}


@pytest.mark.parametrize("code, fragments", [
    (UNMARKED, ["function mcpkit_tools is not marked @mcpkit.hookimpl, so it is never called"]),
    (MISSPELLED, ["hook 'mcpkit_tool' is not an mcpkit hook", "did you mean mcpkit_tools?"]),
    (UNTYPED, ["tool 'shout': parameter 'word' has no type hint", "`word: str`"]),
])
def test_warnings_name_plugin_and_item_and_strict_makes_them_fatal(site: Path, code: str, fragments: list[str]) -> None:
    make_dist(site, "acme-oops", "oops", "acme_oops", code)
    row = plugin_rows(site, "--plugin", "oops")["oops"]
    assert row["loaded"] is True and row["error"] is None
    assert len(row["warnings"]) == 1 and all(f in row["warnings"][0] for f in fragments), row["warnings"]
    text = run_cli(site, "plugins", "--plugin", "oops").stdout
    assert f"WARNING: {row['warnings'][0]}" in text
    with Server("--plugin", "oops", env=env_for(site)) as srv:  # served, with the warning on stderr
        srv.initialize()
        srv.close()
        assert f"plugin oops: {fragments[0]}".encode() in srv.stderr
    strict = run_cli(site, "serve", "--plugin", "oops", "--strict")
    assert strict.returncode == 1 and "Traceback" not in strict.stderr
    assert "plugin oops: " in strict.stderr and fragments[0] in strict.stderr and "--strict" in strict.stderr


@pytest.mark.parametrize("code, fragments", [
    (TEMPLATE_MISMATCH, ["resource 'notes://{title}'", "{title} is not a parameter", "parameters: name"]),
    (BAD_HINT, ["tool 'plot': parameter 'where': type hint Point is not supported"]),
])
def test_definitions_that_cannot_work_are_load_errors(site: Path, code: str, fragments: list[str]) -> None:
    make_dist(site, "acme-oops", "oops", "acme_oops", code)
    make_dist(site, "acme-echo", "echo", "acme_echo", ECHO)
    row = plugin_rows(site, "--plugin", "oops")["oops"]
    assert row["loaded"] is False and all(f in row["error"] for f in fragments), row["error"]
    with Server("--plugin", "oops", "--plugin", "echo", env=env_for(site)) as srv:  # the others serve
        assert tool_names(srv) == ["echo_config"]
        srv.close()
        assert b"plugin oops: " + fragments[0].encode() in srv.stderr
    strict = run_cli(site, "serve", "--plugin", "oops", "--strict")
    assert strict.returncode == 1 and fragments[0] in strict.stderr and "Traceback" not in strict.stderr


def test_one_plugin_offering_a_name_twice(site: Path) -> None:
    make_dist(site, "acme-twice", "twice", "acme_twice", TWICE)
    row = plugin_rows(site, "--plugin", "twice")["twice"]
    assert row["tools"] == ["ping"]
    assert row["warnings"] == ["plugin 'twice' offers tool 'ping' twice; the second one is left out"]


def test_plugins_command_lists_everything_and_marks_conflicts(site: Path) -> None:
    make_dist(site, "acme-echo", "echo", "acme_echo", ECHO)
    make_dist(site, "other-echo", "clash", "other_echo", CLASH)
    make_dist(site, "acme-oops", "oops", "acme_oops", UNMARKED)
    proc = run_cli(site, "plugins")
    assert proc.returncode == 0, proc.stderr  # one rule: listing succeeds, whatever it finds
    out = proc.stdout
    assert "clash  (other-echo 1.2.3)" in out and "echo  (acme-echo 1.2.3)" in out and "hello  (" in out
    assert out.count("tools: echo_config [CONFLICT]") == 2
    assert "CONFLICT: tool 'echo_config' is already offered by plugin 'clash'" in out
    assert '[plugins.echo] prefix = "echo"' in out
    rows = plugin_rows(site)
    assert rows["echo"]["conflicts"][0] == {"kind": "tool", "name": "echo_config", "with": "clash", "served": False,
                                            "resolve": rows["echo"]["conflicts"][0]["resolve"]}
    assert rows["clash"]["conflicts"][0]["served"] is True
    # --strict: the same full listing (a conflict, an unmarked hook), then exit 1
    strict = run_cli(site, "plugins", "--strict")
    assert strict.returncode == 1 and "Traceback" not in strict.stderr
    assert strict.stdout == out and "fatal with --strict" in strict.stderr.splitlines()[-1]
    assert run_cli(site, "plugins", "--strict", "--plugin", "echo").returncode == 0  # nothing wrong with echo


def test_conflict_error_names_both_plugins_and_the_setting(site: Path) -> None:
    make_dist(site, "acme-echo", "echo", "acme_echo", ECHO)
    make_dist(site, "other-echo", "clash", "other_echo", CLASH)
    proc = run_cli(site, "serve", "--plugin", "echo", "--plugin", "clash")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    line = proc.stderr.strip().splitlines()[-1]
    assert "'clash'" in line and "'echo'" in line and "prefix" in line and "rename" in line and "--disable" in line


def test_prefix_and_rename_serve_both(site: Path, tmp_path: Path) -> None:
    make_dist(site, "acme-echo", "echo", "acme_echo", ECHO)
    make_dist(site, "other-echo", "clash", "other_echo", CLASH)
    cfg = tmp_path / "mcpkit.toml"
    cfg.write_text('[plugins.echo]\nprefix = "acme"\ncolour = "red"\n')
    with Server("--config", str(cfg), "--plugin", "echo", "--plugin", "clash", env=env_for(site)) as srv:
        assert sorted(tool_names(srv)) == ["acme_echo_config", "echo_config"]
        mine = srv.request("tools/call", {"name": "acme_echo_config", "arguments": {}})["result"]
        theirs = srv.request("tools/call", {"name": "echo_config", "arguments": {}})["result"]
    assert json.loads(mine["content"][0]["text"])["config"] == {"colour": "red"}  # prefix is mcpkit's, not the plugin's
    assert theirs["content"][0]["text"] == "I clash"
    env = env_for(site, MCPKIT_PLUGIN__CLASH__RENAME='{echo_config = "clash_echo"}')
    with Server("--plugin", "echo", "--plugin", "clash", env=env) as srv:
        assert sorted(tool_names(srv)) == ["clash_echo", "echo_config"]
    rows = plugin_rows(site, "--plugin", "clash", MCPKIT_PLUGIN__CLASH__RENAME='{nothing = "x"}')
    assert rows["clash"]["warnings"] == ["rename: the plugin offers nothing named 'nothing'"]


def test_unknown_names_on_the_command_line_are_errors(site: Path) -> None:
    proc = run_cli(site, "serve", "--disable", "nosuch")
    assert proc.returncode == 1 and "no installed plugin named 'nosuch'" in proc.stderr and "hello" in proc.stderr
    listed = run_cli(site, "plugins", MCPKIT_DISABLE="nosuch")  # from the environment: a warning
    assert listed.returncode == 0 and "no installed plugin named 'nosuch'" in listed.stderr


def test_setting_errors_name_the_variable(site: Path) -> None:
    proc = run_cli(site, "plugins", MCPKIT_DEFAULT_TIMEOUT="abc")
    assert proc.returncode == 1
    assert "MCPKIT_DEFAULT_TIMEOUT=abc: expected a number" in proc.stderr and "Traceback" not in proc.stderr


class _Nothing:
    """A plugin object with no hooks at all."""


class _NotAList:
    @mcpkit.hookimpl
    def mcpkit_tools(self) -> object:
        @mcpkit.tool
        async def lonely() -> str:
            return ""
        return lonely  # not in a list


class _NotAnItem:
    @mcpkit.hookimpl
    def mcpkit_prompts(self) -> list[object]:
        return ["a prompt?"]


class _Empty:
    @mcpkit.hookimpl
    def mcpkit_tools(self) -> list[object]:
        return []


class _BadHookArgument:
    @mcpkit.hookimpl
    def mcpkit_tools(self, settings: dict) -> list[object]:  # the hook's argument is `config`
        return []


@pytest.mark.parametrize("plugin, config, message, fatal_only_when_strict", [
    (_Nothing(), {}, "implements no mcpkit hook", True),
    (_NotAList(), {}, "mcpkit_tools returned ToolDef; it must return a list", False),
    (_NotAnItem(), {}, "returned 'a prompt?', which is not a tool, resource, prompt or completion", False),
    (_BadHookArgument(), {}, "invalid hook", False),
    (_Empty(), {"prefix": 5}, "[plugins.oops] prefix must be a string", False),
    (_Empty(), {"rename": {"a": 1}}, "[plugins.oops] rename must be a table", False),
])
def test_more_load_time_mistakes(plugin: object, config: dict, message: str, fatal_only_when_strict: bool) -> None:
    cfg = {"plugins": {"oops": config}}
    with pytest.raises(PluginError, match=re.escape(message)) as raised:
        mcpkit.testing.build_app({"oops": plugin}, cfg, strict=True)
    assert str(raised.value).startswith("plugin oops: ")
    app, _, _ = mcpkit.testing.build_app({"oops": plugin}, cfg, strict=False)
    (info,) = app.plugins
    if fatal_only_when_strict:  # a warning: the plugin still loads
        assert info.loaded and any(message in w for w in info.warnings)
    else:  # an error: the plugin is left out
        assert not info.loaded and message in (info.error or "")
