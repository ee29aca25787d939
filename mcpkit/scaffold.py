"""``mcpkit new plugin NAME``: write a ready plugin distribution whose tests pass as generated.

The package has an entry point, a tool, a resource, a prompt, and tests on ``mcpkit.testing``.
"""

from __future__ import annotations

import re
import string
from pathlib import Path

import click

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


@click.group("new")
def new_cmd() -> None:
    """Start something new from a template."""


@new_cmd.command("plugin")
@click.argument("name")
@click.option("--dir", "directory", type=click.Path(file_okay=False, path_type=Path),
              help="Where to write it [default: ./mcpkit-NAME].")
@click.option("--description", help="One line saying what the plugin does.")
def new_plugin(name: str, directory: Path | None, description: str | None) -> None:
    """Write a plugin distribution NAME: pyproject with the entry point, a tool, a resource, a
    prompt, and tests that run in memory with mcpkit.testing."""
    root, written = write_plugin(name, directory, description)
    for path in written:
        click.echo(f"  wrote {path}")
    values = names_for(name)
    click.echo(f"\nnext:\n  cd {root}\n  pip install -e '.[test]'   # into mcpkit's environment\n"
               f"  pytest\n  mcpkit plugins --plugin {values['plugin']}")
