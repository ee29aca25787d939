"""The shell commands the docs show are run as written (docs/*.md, docs/hosts/*.md, README.md).

Every ```sh block is either run here, in a temporary HOME and working folder and against a real
server on a loopback port, or listed with the reason it cannot be (a host application, the
network, an install into the project's own environment). A block nobody has classified fails the
suite, so a new command in the docs is either checked or knowingly left out.

The only edits made to a block: the docs' placeholders (`/path/to/mcpkit`, `URL`) and port 8000
become this checkout and the test server, and the example config's `/data/` folder becomes a
temporary one. `.venv` is the test venv without plugins from outside the project (project_venv).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sysconfig
from dataclasses import dataclass
from pathlib import Path

import pytest

from .conftest import FIXTURE_SITE
from .helpers import MCPKIT, ROOT
from .http_helpers import HttpServer
from .project_venv import project_venv
from .test_plugins import make_dist

PAGES = [*sorted((ROOT / "docs").rglob("*.md")), ROOT / "README.md"]
BLOCK = re.compile(r"```sh\n(.*?)```", re.S)


@dataclass(frozen=True)
class Plan:
    #: "script": the block as one bash script (-e); "each": every command on its own, each in a
    #: fresh HOME (the block lists alternatives); "servers": every command is a server that must
    #: start, announce itself and stop cleanly on SIGTERM; "skip": not run, for the reason in ``why``
    how: str
    #: what the output (stdout) must contain
    expect: tuple[str, ...] = ()
    why: str = ""


PLANS: dict[tuple[str, str], Plan] = {
    ("README.md", "make serve"): Plan("skip", why="tests/test_make_serve.py runs `make serve`; `make test` is this suite"),
    ("README.md", ".venv/bin/mcpkit install"): Plan("each", ("added server 'mcpkit'",)),
    ("README.md", ".venv/bin/mcpkit new plugin"): Plan(
        "skip", why="installs into the project's own .venv; tests/test_install_and_new.py runs `mcpkit new plugin`, "
                    "the generated tests and the installed plugin from a scratch folder"),
    ("docs/auth.md", "mcpkit serve --transport http --host 0.0.0.0"): Plan(
        "skip", why="binds every interface and needs the authorization server id.example.com "
                    "(tests/test_auth_server.py serves the same settings against a local one)"),
    ("docs/client.md", "mcpkit discover"): Plan("each", ("era:", "greet", '"name": "greet"', "Counted to 3.",
                                                         '"city": "Paris"', '"results"')),
    ("docs/deploy.md", "mcpkit serve --transport http --host 0.0.0.0"): Plan(
        "skip", why="needs Redis at redis.internal and an authorization server "
                    "(tests/test_scaleout.py runs workers on a real redis-server)"),
    ("docs/getting-started.md", "make serve"): Plan("skip", why="tests/test_make_serve.py runs it as a host would"),
    ("docs/getting-started.md", "python3 -m venv ~/mcpkit"): Plan(
        "skip", why="pip takes the dependencies from the package index; bench/bench_first_tool.py runs this path, "
                    "tests/test_dist.py installs the wheels without the index"),
    ("docs/getting-started.md", "cat > weather.py"): Plan("script", ("weather  (", "tools: outlook",
                                                                    "Oslo: sunny, 21 °C", '"weather": {')),
    ("docs/getting-started.md", ".venv/bin/mcpkit install claude-desktop"): Plan("script", ('"mcpServers"',)),
    ("docs/getting-started.md", ".venv/bin/mcpkit plugins"): Plan("script", ("codesearch  (mcpkit-codesearch", '"name": "openapi"')),
    ("docs/getting-started.md", "mcpkit serve --plugin codesearch"): Plan("each"),
    ("docs/getting-started.md", "printf"): Plan("script", ('"text":"Hello, Ada."',)),
    ("docs/getting-started.md", "echo"): Plan("script", ('"text":"Hello, Ada."',)),
    ("docs/getting-started.md", "export PYTHONPATH"): Plan("script", ("greet", "Hello, Ada!", "Counted to 5.", "era:")),
    ("docs/hosts/claude-code.md", "/path/to/mcpkit/.venv/bin/mcpkit install"): Plan("each", ("added server 'mcpkit'",)),
    ("docs/hosts/claude-code.md", "claude mcp add"): Plan("skip", why="needs the `claude` command (Claude Code)"),
    ("docs/hosts/claude-desktop.md", "/path/to/mcpkit/.venv/bin/mcpkit install"): Plan("each", ("added server 'mcpkit'",)),
    ("docs/hosts/claude-desktop.md", "mcpkit install claude-desktop --plugin"): Plan("each", ('"mcpkit"',)),
    ("docs/hosts/cursor.md", "/path/to/mcpkit/.venv/bin/mcpkit install"): Plan("each", ("added server 'mcpkit'",)),
    ("docs/hosts/inspector.md", "# the web UI"): Plan("skip", why="npx fetches the MCP Inspector from the network"),
    ("docs/hosts/inspector.md", "mcpkit install mcp-json"): Plan("each", ('"mcpServers"',)),
    ("docs/hosts/vscode.md", "/path/to/mcpkit/.venv/bin/mcpkit install"): Plan("each", ("added server 'mcpkit'",)),
    ("docs/http.md", "mcpkit serve --transport http --host 127.0.0.1"): Plan("servers"),
    ("docs/http.md", "curl -s http://127.0.0.1:8000/mcp/search"): Plan("script", ('{"results":[',)),
    ("docs/http.md", "curl -s http://127.0.0.1:8000/mcp -H"): Plan("script", ('"name":"greet"', "Hello, Ada.")),
    ("docs/http.md", "H='-H"): Plan("script", ('"name":"greet"', "Hello, Ada.")),
    ("docs/http.md", "curl -N"): Plan("skip", why="two terminals: the stream stays open and the session id is "
                                                  "copied by hand (tests/test_http.py drives legacy HTTP+SSE)"),
    ("docs/observability.md", "mcpkit serve --transport http --host 127.0.0.1 --metrics"): Plan("servers"),
    ("docs/observability.md", "pip install 'mcpkit[otel]'"): Plan(
        "skip", why="pip takes the packages from the package index; make install puts the otel extra in the test venv, "
                    "and tests/test_traces.py serves with --traces against a real OTLP receiver"),
    ("docs/installing.md", "make dist"): Plan("skip", why="tests/test_dist.py runs `make dist` and installs the wheels"),
    ("docs/installing.md", "python3 -m venv"): Plan(
        "skip", why="pip takes the dependencies from the package index; tests/test_dist.py installs the wheels without it"),
    ("docs/writing-plugins.md", "mcpkit plugins ./weather.py"): Plan(
        "skip", why="serves until stopped and installs into a host; tests/test_path_plugins.py runs each command "
                    "(plugins, serve over stdio and HTTP, install) on a plugin file"),
    ("docs/writing-plugins.md", "mcpkit dev ./weather.py"): Plan(
        "skip", why="serves until stopped; tests/test_dev_reload.py runs it with clients connected and edits the file"),
    ("docs/writing-plugins.md", "mcpkit new plugin --from"): Plan(
        "skip", why="installs into the environment mcpkit runs from; tests/test_path_plugins.py graduates a file "
                    "and runs the generated tests in a scratch folder"),
    ("docs/writing-plugins.md", "mcpkit new plugin notes"): Plan(
        "skip", why="installs into the environment mcpkit runs from; tests/test_install_and_new.py runs the same "
                    "steps in a scratch folder"),
}


def doc_blocks() -> list[tuple[str, str]]:
    """(page, block) for every ```sh block, page relative to the checkout."""
    return [(str(page.relative_to(ROOT)), m[1]) for page in PAGES for m in BLOCK.finditer(page.read_text())]


def plan_for(page: str, block: str) -> tuple[tuple[str, str], Plan]:
    first = block.strip().splitlines()[0]
    found = [(key, plan) for key, plan in PLANS.items() if key[0] == page and first.startswith(key[1])]
    assert len(found) == 1, f"{page}: the block starting {first!r} needs one entry in PLANS (found {len(found)})"
    return found[0]


def commands(block: str) -> list[str]:
    """The block's commands: continuation lines joined, comment lines left out."""
    out: list[str] = []
    for line in block.replace("\\\n", " ").splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            out.append(line)
    return out


def test_every_block_has_one_plan_and_every_plan_a_block() -> None:
    used = {plan_for(page, block)[0] for page, block in doc_blocks()}
    assert set(PLANS) == used, f"plans for blocks the docs no longer have: {sorted(set(PLANS) - used)}"
    assert all(plan.why for plan in PLANS.values() if plan.how == "skip")


@pytest.fixture(scope="module")
def example_config() -> str:
    """The config file docs/configuration.md shows, its /data/ folder made temporary."""
    page = (ROOT / "docs" / "configuration.md").read_text()
    return re.search(r"```toml\n(\[server\]\n.*?)```", page, re.S)[1]


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return project_venv(tmp_path_factory.mktemp("venv") / "venv")


@pytest.fixture(scope="module")
def doc_server(tmp_path_factory: pytest.TempPathFactory) -> HttpServer:
    """What the HTTP examples talk to: the hello fixture (greet) and codesearch (/mcp/search)."""
    data = tmp_path_factory.mktemp("server-data")
    with_home = {"HOME": str(data), "MCPKIT_DATA_DIR": str(data)}
    server = HttpServer("--plugin", "hello", "--plugin", "codesearch", env=with_home)
    yield server
    server.proc.send_signal(signal.SIGTERM)
    server.proc.wait(30)


def place(tmp: Path, example_config: str, venv: Path) -> tuple[dict[str, str], Path]:
    """A fresh HOME and working folder (the project's .venv and fixtures linked in); the env:
    the venv's commands first on PATH, the fixture plugins on PYTHONPATH (as `make test` sets it)."""
    home, work, data = tmp / "home", tmp / "work", tmp / "data"
    for folder in (home, work, data):
        folder.mkdir(parents=True)
    (work / ".venv").symlink_to(venv)
    (work / ".conformance").symlink_to(ROOT / ".conformance")
    config = example_config.replace("/data/", f"{data}/")
    (work / "mcpkit.toml").write_text(config)
    (home / "mcpkit.toml").write_text(config)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("MCPKIT_") and k not in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "APPDATA")}
    env.update(HOME=str(home), PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}", MCPKIT_DATA_DIR=str(data),
               PYTHONPATH=str(FIXTURE_SITE))
    return env, work


def as_run(text: str, port: int) -> str:
    """The docs' placeholders made concrete."""
    text = text.replace("/path/to/mcpkit", str(ROOT)).replace("127.0.0.1:8000", f"127.0.0.1:{port}")
    return re.sub(r"(?<=call )URL\b", f"http://127.0.0.1:{port}/mcp", text)


def assert_quiet(stderr: str, what: str, allowed: tuple[str, ...] = ()) -> None:
    """No traceback, no error and no warning in the log (a documented command is free of mistakes)."""
    lines = [line for line in stderr.splitlines() if not any(a in line for a in allowed)]
    noisy = [line for line in lines if "Traceback" in line or " ERROR " in line or " WARNING " in line]
    assert not noisy, f"{what}:\n{stderr}"


@pytest.mark.parametrize("page, block", doc_blocks(), ids=lambda v: v if v.endswith(".md") else v.split("\n")[0][:40])
def test_the_docs_commands_run(page: str, block: str, tmp_path: Path, example_config: str, venv: Path,
                               doc_server: HttpServer) -> None:
    _, plan = plan_for(page, block)
    if plan.how == "skip":
        pytest.skip(plan.why)
    if plan.how == "servers":
        for i, command in enumerate(commands(block)):
            env, work = place(tmp_path / str(i), example_config, venv)
            run_server(command, env, work)
        return
    runs = [as_run(block, doc_server.port)] if plan.how == "script" else [as_run(c, doc_server.port) for c in commands(block)]
    out = ""
    for i, script in enumerate(runs):
        env, work = place(tmp_path / str(i), example_config, venv)
        proc = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", script], cwd=work, env=env, capture_output=True,
                              text=True, timeout=120, stdin=subprocess.DEVNULL)
        assert proc.returncode == 0, f"{script}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
        assert_quiet(proc.stderr, script)
        out += proc.stdout
    for fragment in plan.expect:
        assert fragment in out, f"{fragment!r} not in the output of {page}'s block:\n{out}"


def run_server(command: str, env: dict[str, str], work: Path) -> None:
    """A long-running `mcpkit serve --transport http|sse`: on a free port, it must announce itself
    and stop cleanly (exit 0) on SIGTERM."""
    command = command.split("#")[0].replace("--port 8000", "--port 0")
    env = {**env, "MCPKIT_PORT": "0"}  # the default port may be taken on a shared machine
    proc = subprocess.Popen(["bash", "-c", f"exec {command}"], cwd=work, env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        banner = proc.stderr.readline()
        assert re.match(r"mcpkit: serving MCP on http://127\.0\.0\.1:\d+/", banner), banner
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0 and out == "", (command, proc.returncode, out, err)
    assert_quiet(err, command, allowed=("received SIGTERM; shutting down",))


def test_the_project_venv_hides_a_plugin_installed_beside_the_project(tmp_path: Path) -> None:
    """A scratch environment: the test venv's packages plus a plugin author's half-written
    plugin. Its own `mcpkit plugins` sees the plugin; the project venv made from it does not."""
    site = tmp_path / "site"
    site.mkdir()
    for entry in Path(sysconfig.get_paths()["purelib"]).iterdir():
        (site / entry.name).symlink_to(entry)
    make_dist(site, "acme-wip", "wip", "acme_wip", "raise ImportError('half-written')\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(FIXTURE_SITE)])}
    seen = subprocess.run([MCPKIT, "plugins", "--strict"], capture_output=True, text=True, env=env, timeout=60)
    assert seen.returncode == 1 and "wip  (acme-wip 1.2.3)" in seen.stdout and "half-written" in seen.stdout

    venv = project_venv(tmp_path / "venv", site)
    hidden = subprocess.run([str(venv / "bin" / "mcpkit"), "plugins", "--strict"], capture_output=True, text=True,
                            env={**os.environ, "PYTHONPATH": str(FIXTURE_SITE)}, timeout=60)
    assert hidden.returncode == 0 and "wip" not in hidden.stdout, hidden.stdout + hidden.stderr
    assert "codesearch  (mcpkit-codesearch" in hidden.stdout and "hello  (mcpkit-hello" in hidden.stdout
