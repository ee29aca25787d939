"""``mcpkit new plugin NAME``: write a ready plugin distribution whose tests pass as generated.

The package has an entry point, a tool, a resource, a prompt, and tests on ``mcpkit.testing``.

``mcpkit new plugin --from ./weather.py`` graduates a one-file (or one-folder) plugin into the
same distribution, with the plugin's own code and a test per tool. The plugin is loaded first,
exactly as ``mcpkit serve ./weather.py`` loads it; one that does not load is refused with the
reason, and nothing is written. The generated tests run no tool: each checks that its tool is
served with the input schema it has now and, for a tool that takes arguments, that a wrong
argument is refused before the tool runs. A call whose answer you know is yours to add.
"""

from __future__ import annotations

import pprint
import re
import string
from pathlib import Path
from typing import Any

import click

from .plugins.paths import PluginPath, plugin_path

from ._version import __version__

_NAME = re.compile(r"^[a-z][a-z0-9]*(?:[-_][a-z0-9]+)*$")

PYPROJECT = """\
[build-system]
requires = ["setuptools>=77"]
build-backend = "setuptools.build_meta"

[project]
name = "$dist"
version = "0.1.0"
description = "$description"
readme = "README.md"
requires-python = ">=3.11"
dependencies = ["mcpkit>=$mcpkit_version"]

[project.optional-dependencies]
test = ["pytest>=8", "pytest-trio>=0.8"]

# mcpkit finds the plugin through this entry point; its name ($plugin) is the plugin's name
# in --plugin, --disable and the [plugins.$plugin] config table.
[project.entry-points."mcpkit.plugins"]
$plugin = "$module.plugin"

[tool.setuptools.packages.find]
where = ["src"]

[tool.pytest.ini_options]
trio_mode = true
pythonpath = ["src"]
testpaths = ["tests"]
"""

README = """\
# $dist

$description

An mcpkit plugin. Install it next to mcpkit and it is served:

```sh
pip install -e .                 # into the environment mcpkit runs from
mcpkit plugins                   # lists $plugin with its tools, or says what is wrong with it
mcpkit serve --plugin $plugin    # serve it alone on stdio
mcpkit call --stdio "mcpkit serve --plugin $plugin" ${plugin}_hello name=Ada
```

Tests run in memory through `mcpkit.testing`, no server process needed:

```sh
pip install -e '.[test]'
pytest
```

Settings come from the `[plugins.$plugin]` table of the mcpkit config file, or from
`MCPKIT_PLUGIN__${PLUGIN}__KEY=value` variables.
"""

INIT = '''\
"""$description"""
'''

PLUGIN = '''\
"""The $plugin plugin: its tools, resources and prompts, and the hooks that hand them to mcpkit."""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

import mcpkit


@mcpkit.tool(annotations={"readOnlyHint": True})
async def ${plugin}_hello(
    name: Annotated[str, msgspec.Meta(min_length=1, max_length=100, description="Who to greet")],
    ctx: mcpkit.Context,
) -> str:
    """Greet someone. (Replace me with your first real tool: the docstring is its description.)"""
    await ctx.report_progress(1, 1, "greeted")
    return f"{GREETING['text']}, {name}!"


@mcpkit.resource("$plugin://about", mime_type="text/plain")
def about() -> str:
    """What this plugin is."""
    return "$description"


@mcpkit.prompt
def ${plugin}_introduce(name: Annotated[str, msgspec.Meta(description="Who to introduce")]) -> str:
    """Ask the model to introduce someone."""
    return f"Please introduce {name} in two sentences."


#: Settings from [plugins.$plugin] (or MCPKIT_PLUGIN__${PLUGIN}__GREETING), set when mcpkit starts.
GREETING = {"text": "Hello"}


@mcpkit.hookimpl
def mcpkit_tools(config: dict[str, Any]) -> list[Any]:
    GREETING["text"] = str(config.get("greeting", "Hello"))
    return [${plugin}_hello]


@mcpkit.hookimpl
def mcpkit_resources(config: dict[str, Any]) -> list[Any]:
    return [about]


@mcpkit.hookimpl
def mcpkit_prompts(config: dict[str, Any]) -> list[Any]:
    return [${plugin}_introduce]
'''

CONFTEST = '''\
import pytest

from $module import plugin


@pytest.fixture
def mcpkit_plugins():
    """What the mcpkit_client fixture (from mcpkit.testing) serves, by entry-point name."""
    return {"$plugin": plugin}
'''

TESTS = '''\
"""The plugin served in memory by mcpkit.testing: a real server and client, no subprocess."""

import mcpkit.testing

from $module import plugin


async def test_hello(mcpkit_client):
    progress = []
    result = await mcpkit_client.call_tool("${plugin}_hello", {"name": "Ada"}, progress=lambda *p: progress.append(p))
    assert (result.text, result.is_error) == ("Hello, Ada!", False)
    assert progress == [(1, 1, "greeted")]


async def test_arguments_are_checked(mcpkit_client):
    result = await mcpkit_client.call_tool("${plugin}_hello", {"name": ""}, validate=False)
    assert result.is_error and "name" in result.text


async def test_about(mcpkit_client):
    (contents,) = await mcpkit_client.read_resource("$plugin://about")
    assert contents["text"] == "$description"


async def test_prompt(mcpkit_client):
    prompt = await mcpkit_client.get_prompt("${plugin}_introduce", {"name": "Ada"})
    assert "Ada" in prompt["messages"][0]["content"]["text"]


async def test_config_reaches_the_plugin():
    config = {"plugins": {"$plugin": {"greeting": "Ahoy"}}}
    async with mcpkit.testing.connect({"$plugin": plugin}, config=config) as client:
        assert (await client.call_tool("${plugin}_hello", {"name": "Ada"})).text == "Ahoy, Ada!"
'''

FILES = {
    "pyproject.toml": PYPROJECT,
    "README.md": README,
    "src/$module/__init__.py": INIT,
    "src/$module/plugin.py": PLUGIN,
    "tests/conftest.py": CONFTEST,
    "tests/test_plugin.py": TESTS,
}


def names_for(name: str) -> dict[str, str]:
    """``weather`` -> plugin ``weather``, distribution ``mcpkit-weather``, module ``mcpkit_weather``."""
    if not _NAME.fullmatch(name):
        raise click.BadParameter(f"{name!r}: use lower-case letters, digits, and - or _ between them (e.g. weather, "
                                 f"acme-search)", param_hint="NAME")
    base = name[len("mcpkit-"):] if name.startswith(("mcpkit-", "mcpkit_")) else name
    plugin = base.replace("-", "_")
    dist = f"mcpkit-{base.replace('_', '-')}"
    return {"plugin": plugin, "PLUGIN": plugin.upper(), "dist": dist, "module": dist.replace("-", "_")}


def write_plugin(name: str, directory: Path | None, description: str | None) -> tuple[Path, list[Path]]:
    values = names_for(name)
    values["description"] = description or f"mcpkit plugin {values['plugin']}: tools for AI assistants"
    values["mcpkit_version"] = __version__
    if '"' in values["description"] or "\\" in values["description"]:
        raise click.BadParameter("keep quotes and backslashes out of the description", param_hint="--description")
    root = directory or Path(values["dist"])
    if root.exists() and any(root.iterdir()):
        raise click.ClickException(f"{root} exists and is not empty; choose another --dir")
    written: list[Path] = []
    for rel, template in FILES.items():
        path = root / string.Template(rel).substitute(values)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(string.Template(template).substitute(values), encoding="utf-8")
        written.append(path)
    return root, written


CONFTEST_FROM = '''\
import pytest

$import_line


@pytest.fixture
def mcpkit_plugins():
    """What the mcpkit_client fixture (from mcpkit.testing) serves, by entry-point name."""
    return {"$plugin": plugin}
'''

TESTS_HEAD = '''\
"""The $plugin plugin served in memory by mcpkit.testing: a real server and client, no subprocess.

Written by `mcpkit new plugin --from $source`: one test per tool, each checking that the tool is
served with the input schema it had then and (when it takes arguments) that a wrong argument is
refused before it runs. Add calls whose answers you know where the comments say.
"""


async def _tool(client, name):
    tools = {tool["name"]: tool for tool in await client.list_tools()}
    assert name in tools, f"{name} is not served (served: {sorted(tools)})"
    return tools[name]


async def test_what_is_served(mcpkit_client):
    assert sorted(tool["name"] for tool in await mcpkit_client.list_tools()) == $tool_names
'''

TOOL_TEST = '''

async def test_${func}(mcpkit_client):
    tool = await _tool(mcpkit_client, $name)
    expected = $schema
    assert tool["inputSchema"] == expected
$refusal    # result = await mcpkit_client.call_tool($name, {...arguments...})
    # assert result.text == "...what it answers..."
'''

REFUSAL = '''    refused = await mcpkit_client.call_tool($name, $bad, validate=False)
    assert refused.is_error and $param in refused.text, refused.text
'''


def load_for_graduation(source: Path) -> tuple[PluginPath, Any]:
    """The plugin at ``source`` and the app serving it alone; ClickException when it does not load."""
    from .plugins import loader
    from .plugins.config import Config
    from .server.settings import load_settings

    try:
        pp = plugin_path(source)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--from") from None
    loaded = loader.load_objects({pp.name: pp})
    try:
        app = loader.build_app(loaded, Config(), load_settings({"task_store": "memory"}, environ={}))
    except loader.PluginError as exc:
        raise click.ClickException(f"{source} does not load, so nothing was written: {exc}") from None
    info = loaded.infos[0]
    if not info.loaded:
        raise click.ClickException(f"{source} does not load, so nothing was written: {info.error} "
                                   f"(`mcpkit plugins {source}` shows what mcpkit makes of it)")
    return pp, app


def plugin_files(pp: PluginPath, module: str) -> tuple[dict[str, bytes], str]:
    """The package's files (relative path -> bytes) and the entry point's value."""
    if not pp.is_package:
        return {f"src/{module}/plugin.py": pp.path.read_bytes()}, f"{module}.plugin"
    files: dict[str, bytes] = {}
    for path in sorted(pp.path.rglob("*")):
        rel = path.relative_to(pp.path)
        if path.is_file() and "__pycache__" not in rel.parts and not any(p.startswith(".") for p in rel.parts):
            files[f"src/{module}/{rel.as_posix()}"] = path.read_bytes()
    return files, module


def tests_for(app: Any, plugin: str, source: str) -> str:
    """tests/test_plugin.py: the listing, then one test per tool."""
    tools = app.registry.tools
    out = string.Template(TESTS_HEAD).substitute(plugin=plugin, source=source, tool_names=repr(sorted(tools)))
    used: set[str] = set()
    for name, tool in tools.items():
        func = re.sub(r"\W", "_", name).lower() or "tool"
        while func in used or func == "what_is_served":
            func += "_"
        used.add(func)
        schema = tool.input_schema
        refusal = ""
        bad = _bad_arguments(schema)
        if bad is not None:
            args, param = bad
            refusal = string.Template(REFUSAL).substitute(name=repr(name), bad=repr(args), param=repr(param))
        out += string.Template(TOOL_TEST).substitute(
            func=func, name=repr(name), refusal=refusal,
            schema=pprint.pformat(schema, width=88, sort_dicts=False).replace("\n", "\n" + " " * len("    expected = ")))
    return out


def _bad_arguments(schema: dict[str, Any]) -> tuple[dict[str, Any], str] | None:
    """Arguments the schema refuses, and the parameter the refusal names: a required one left
    out, else an optional one of the wrong JSON type. None when nothing can be wrong."""
    props = schema.get("properties") or {}
    required = [p for p in schema.get("required", []) if p in props]
    if required:
        return {}, required[0]
    for param, spec in props.items():
        kind = spec.get("type") if isinstance(spec, dict) else None
        if isinstance(spec, dict) and isinstance(spec.get("enum"), list):
            return {param: "not one of the choices"}, param
        if kind == "string":
            return {param: 12345}, param
        if kind in ("integer", "number", "boolean", "array", "object"):
            return {param: "not a valid value"}, param
    return None


def write_from(source: Path, name: str | None, directory: Path | None,
               description: str | None) -> tuple[Path, list[Path], dict[str, str]]:
    """Write the distribution for the plugin at ``source`` (see ``mcpkit new plugin --from``)."""
    pp, app = load_for_graduation(source)
    values = names_for(name or pp.name.replace("_", "-").lower())
    values["description"] = description or _docstring(pp) or f"mcpkit plugin {values['plugin']}"
    values["description"] = values["description"].replace('"', "'").replace("\\", "/")
    values["mcpkit_version"] = __version__
    if name is not None and values["plugin"] != pp.name:
        raise click.BadParameter(f"the plugin in {source} is named {pp.name!r} (its [plugins.{pp.name}] table); "
                                 f"leave NAME out, or rename the file first", param_hint="NAME")
    root = directory or Path(values["dist"])
    if root.exists() and any(root.iterdir()):
        raise click.ClickException(f"{root} exists and is not empty; choose another --dir")
    files, entry = plugin_files(pp, values["module"])
    import_line = (f"import {values['module']} as plugin" if pp.is_package
                   else f"from {values['module']} import plugin")
    text: dict[str, str] = {
        "pyproject.toml": string.Template(PYPROJECT).substitute(values).replace(
            f'"{values["module"]}.plugin"', f'"{entry}"'),
        "README.md": string.Template(README_FROM).substitute(values, source=source),
        "tests/conftest.py": string.Template(CONFTEST_FROM).substitute(values, import_line=import_line),
        "tests/test_plugin.py": tests_for(app, values["plugin"], str(source)),
    }
    if not pp.is_package:
        text[f"src/{values['module']}/__init__.py"] = f'"""{values["description"]}"""\n'
    written: list[Path] = []
    for rel, data in [*files.items(), *((r, t.encode()) for r, t in text.items())]:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        written.append(path)
    return root, written, values


def _docstring(pp: PluginPath) -> str | None:
    import ast

    origin = pp.path / "__init__.py" if pp.is_package else pp.path
    try:
        doc = ast.get_docstring(ast.parse(origin.read_bytes()))
    except SyntaxError:
        return None
    return doc.strip().splitlines()[0] if doc and doc.strip() else None


README_FROM = """\
# $dist

$description

An mcpkit plugin, graduated from `$source` by `mcpkit new plugin --from`. Install it next to
mcpkit and it is served:

```sh
pip install -e '.[test]'         # into the environment mcpkit runs from
pytest                           # a test per tool, in memory (mcpkit.testing)
mcpkit plugins --plugin $plugin  # lists $plugin with its tools, or says what is wrong with it
mcpkit serve --plugin $plugin    # serve it alone on stdio
```

Settings come from the `[plugins.$plugin]` table of the mcpkit config file, or from
`MCPKIT_PLUGIN__${PLUGIN}__KEY=value` variables.
"""


@click.group("new")
def new_cmd() -> None:
    """Start something new from a template."""


@new_cmd.command("plugin")
@click.argument("name", required=False)
@click.option("--dir", "directory", type=click.Path(file_okay=False, path_type=Path),
              help="Where to write it [default: ./mcpkit-NAME].")
@click.option("--description", help="One line saying what the plugin does [default with --from: the module's docstring].")
@click.option("--from", "source", type=click.Path(exists=True, path_type=Path), metavar="PATH",
              help="Graduate this plugin file or package folder (what `mcpkit serve PATH` serves): its code, "
                   "its name, and a test per tool [NAME: the file's].")
def new_plugin(name: str | None, directory: Path | None, description: str | None, source: Path | None) -> None:
    """Write a plugin distribution NAME: pyproject with the entry point, a tool, a resource, a
    prompt, and tests that run in memory with mcpkit.testing. With --from PATH: the plugin in
    that file or folder, with a test per tool."""
    if source is not None:
        root, written, values = write_from(source, name, directory, description)
    elif name is None:
        raise click.UsageError("name the plugin (mcpkit new plugin weather), or graduate a file (--from ./weather.py)")
    else:
        root, written = write_plugin(name, directory, description)
        values = names_for(name)
    for path in written:
        click.echo(f"  wrote {path}")
    click.echo(f"\nnext:\n  cd {root}\n  pip install -e '.[test]'   # into mcpkit's environment\n"
               f"  pytest\n  mcpkit plugins --plugin {values['plugin']}")
