"""Mistakes in the config file and the environment that would otherwise pass in silence.

A misspelled section (``[sever]``), a ``[plugins.NAME]`` table or ``MCPKIT_PLUGIN__NAME__KEY``
variable for a plugin that is not installed, an ``MCPKIT_*`` variable mcpkit never reads: each is
one warning on the log with a suggestion. None stops the server; ``--strict`` makes them fatal.
(Unknown keys inside ``[server]`` and bad values are errors already: see ``load_settings``.)
"""

from __future__ import annotations

import difflib
import logging
import os
from typing import Any, Iterable, Mapping

from ..server.settings import Settings, setting_variables
from .config import PLUGIN_ENV_PREFIX, SECTIONS, Config, plugin_env_name

log = logging.getLogger("mcpkit.config")

#: ``MCPKIT_*`` variables read outside the [server] settings, and who reads them
OTHER_VARIABLES = {
    "MCPKIT_CONFIG": "the config file (mcpkit serve, mcpkit plugins)",
    "MCPKIT_PLUGINS": "plugins to load, like --plugin",
    "MCPKIT_DISABLE": "plugins to leave out, like --disable",
    "MCPKIT_PLUGIN_PATHS": "plugin files or folders to load, like --plugin-path (separated by the OS's path separator)",
    "MCPKIT_DATA_DIR": "where plugins keep data (mcpkit.data_dir)",
    "MCPKIT_HTTP_WORKER": "set by mcpkit serve --workers for its worker processes",
    "MCPKIT_CONSOLE_SHARE": "set by mcpkit serve --workers --console: the folder of the workers' console snapshots",
    "MCPKIT_CLIENT_TOKEN": "the client's --auth-token",
    "MCPKIT_OAUTH_CLIENT_ID": "the client's --oauth-client-id",
    "MCPKIT_OAUTH_CLIENT_SECRET": "the client's --oauth-client-secret",
    "MCPKIT_TOKEN_FILE": "the client's OAuth token file",
}


def config_problems(config: Config, installed: Iterable[str], environ: Mapping[str, str] | None = None) -> list[str]:
    """One sentence per mistake, with a suggestion where one is close."""
    installed = sorted(installed)
    env = os.environ if environ is None else environ
    where = f"config file {config.path}" if config.path else "config"
    problems = [f"{where}: {problem}" for problem in _stray(config.stray, installed)]
    for name in config.plugins:
        if name not in installed:
            problems.append(f"{where}: [plugins.{name}] is for a plugin that is not installed, so it is ignored"
                            f"{_suggest(name, installed, '[plugins.{}]')}{_installed(installed)}")
    problems.extend(_variables(env, installed))
    return problems


def report_config_problems(config: Config, installed: Iterable[str], *, strict: bool = False) -> list[str]:
    """Log each mistake once (a warning); with ``strict`` the first one is an error (ValueError)."""
    problems = config_problems(config, installed)
    if strict and problems:
        raise ValueError(f"{problems[0]} (fatal with --strict)")
    for problem in problems:
        log.warning("%s", problem)
    return problems


def _stray(stray: dict[str, Any], installed: list[str]) -> list[str]:
    out = []
    for key, value in stray.items():
        if not isinstance(value, dict):
            home = "it belongs under [server]" if key in Settings.__struct_fields__ else "keys belong in a section"
            out.append(f"{key!r} is outside any section, so it is ignored; {home}")
        elif key in installed:
            out.append(f"unknown section [{key}], so it is ignored; a plugin's table is [plugins.{key}]")
        else:
            out.append(f"unknown section [{key}], so it is ignored{_suggest(key, list(SECTIONS), '[{}]')}"
                       f" (sections: [server], [plugins.NAME], [upstreams.NAME])")
    return out


def _variables(env: Mapping[str, str], installed: list[str]) -> list[str]:
    known = setting_variables() | set(OTHER_VARIABLES)
    by_env_name = {plugin_env_name(name): name for name in installed}
    out = []
    for var in sorted(env):
        if not var.startswith("MCPKIT_") or var in known:
            continue
        if var.startswith(PLUGIN_ENV_PREFIX):
            plugin, sep, key = var[len(PLUGIN_ENV_PREFIX):].partition("__")
            if not (sep and key):
                out.append(f"environment variable {var} names no key, so it is ignored "
                           f"(the form is {PLUGIN_ENV_PREFIX}<PLUGIN>__<KEY>)")
            elif plugin not in by_env_name:
                template = f"{PLUGIN_ENV_PREFIX}{{}}__{key}"
                out.append(f"environment variable {var} is for a plugin that is not installed, so it is ignored"
                           f"{_suggest(plugin, list(by_env_name), template)}{_installed(installed)}")
            continue
        suffixes = sorted(name.removeprefix("MCPKIT_") for name in known)  # the shared prefix would match anything
        out.append(f"environment variable {var} is not read by mcpkit, so it is ignored"
                   f"{_suggest(var.removeprefix('MCPKIT_'), suffixes, 'MCPKIT_{}')}")
    return out


def _suggest(name: str, candidates: list[str], template: str) -> str:
    close = difflib.get_close_matches(name, candidates, n=1, cutoff=0.6)
    return f"; did you mean {template.format(close[0])}?" if close else ""


def _installed(installed: list[str]) -> str:
    return f" (installed: {', '.join(installed) or 'none'})"
