"""`mcpkit tools`, `mcpkit call` and `mcpkit discover` run as real subprocesses against real servers."""

from __future__ import annotations

import json
import os
import re
import shlex
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from .helpers import MCPKIT, STATELESS
from .http_helpers import HttpServer

SERVE = shlex.join([MCPKIT, "serve", "--plugin", "hello"])
HELLO_TOOLS = ["greet", "count", "forecast", "word_count", "fail", "sleepy", "ask_name"]


def run(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([MCPKIT, *args], capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


def assert_clean_failure(proc: subprocess.CompletedProcess[str], *fragments: str) -> str:
    """Exit code 2, exactly one `mcpkit: ...` line on stderr, nothing on stdout, no traceback."""
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("mcpkit: "), lines[0]
    assert proc.stdout == ""
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def http_server():
    with HttpServer("--plugin", "hello") as srv:
        yield srv


@pytest.fixture(params=["stdio", "http"])
def target(request, http_server) -> list[str]:
    """How to name the server on the command line: a subprocess, or our HTTP server's URL."""
    if request.param == "stdio":
        return ["--stdio", SERVE]
    return [f"http://127.0.0.1:{http_server.port}/mcp"]


@pytest.fixture(scope="module")
def static_site(tmp_path_factory):
    """`python -m http.server` on a free port: HTTP that is not MCP."""
    root = tmp_path_factory.mktemp("site")
    (root / "index.html").write_text("<h1>not an MCP server</h1>")
    proc = subprocess.Popen([sys.executable, "-u", "-m", "http.server", "0", "--bind", "127.0.0.1",
                             "--directory", str(root)],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    found: list[int] = []
    ready = threading.Event()

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            m = re.search(rb"port (\d+)", line)
            if m and not found:
                found.append(int(m.group(1)))
                ready.set()

    threading.Thread(target=pump, daemon=True).start()
    if not ready.wait(20):
        proc.kill()
        raise RuntimeError("python -m http.server did not start")
    yield f"http://127.0.0.1:{found[0]}"
    proc.terminate()
    proc.wait(10)


# --- mcpkit tools ------------------------------------------------------------------------------

def test_tools_table(target: list[str]) -> None:
    proc = run("tools", *target)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    lines = proc.stdout.splitlines()
    assert re.match(r"TOOL\s+ARGUMENTS\s+DESCRIPTION$", lines[0])
    rows = {line.split()[0]: line for line in lines[1:]}
    assert set(HELLO_TOOLS) <= set(rows)
    assert re.match(r"greet\s+name \[excited\]\s+Say hello to someone\.$", rows["greet"])
    assert re.match(r"forecast\s+city\s+A \(made-up", rows["forecast"])


def test_tools_json(target: list[str]) -> None:
    proc = run("tools", *target, "--json")
    assert proc.returncode == 0, proc.stderr
    tools = json.loads(proc.stdout)
    assert [t["name"] for t in tools][: len(HELLO_TOOLS)] == HELLO_TOOLS
    greet = next(t for t in tools if t["name"] == "greet")
    assert greet["inputSchema"]["properties"]["excited"]["type"] == "boolean"


def test_tools_handshake_mode() -> None:
    proc = run("tools", "--stdio", SERVE, "--mode", "handshake", "--json")
    assert proc.returncode == 0, proc.stderr
    assert "greet" in {t["name"] for t in json.loads(proc.stdout)}


# --- mcpkit discover ---------------------------------------------------------------------------

def test_discover_text_stdio() -> None:
    proc = run("discover", "--stdio", SERVE)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert re.search(rf"^supports:\s+{STATELESS} \(stateless\), 2025-11-25 \(initialize handshake\)$", out, re.M)
    assert re.search(r"^server:\s+mcpkit \S+$", out, re.M)
    assert re.search(r"^era:\s+stateless \(per-request _meta\)$", out, re.M)
    assert re.search(rf"^version:\s+{STATELESS}$", out, re.M)
    assert re.search(r"^transport:\s+stdio$", out, re.M)
    assert re.search(r"^capabilities: .*tools \(listChanged\)", out, re.M)


@pytest.mark.parametrize("mode, era, version", [("auto", "stateless", STATELESS),
                                                ("handshake", "handshake", "2025-11-25")])
def test_discover_json(target: list[str], mode: str, era: str, version: str) -> None:
    proc = run("discover", *target, "--mode", mode, "--json")
    assert proc.returncode == 0, proc.stderr
    info = json.loads(proc.stdout)
    assert (info["era"], info["protocolVersion"]) == (era, version)
    assert info["transport"] == ("stdio" if target[0] == "--stdio" else "http")
    assert info["serverInfo"]["name"] == "mcpkit"
    assert "tools" in info["capabilities"]


def test_discover_pinned_version() -> None:
    proc = run("discover", "--stdio", SERVE, "--protocol-version", "2025-06-18", "--json")
    assert proc.returncode == 0, proc.stderr
    info = json.loads(proc.stdout)
    assert (info["era"], info["protocolVersion"]) == ("handshake", "2025-06-18")


def test_discover_legacy_sse(http_server: HttpServer) -> None:
    proc = run("discover", f"http://127.0.0.1:{http_server.port}/sse", "--json")
    assert proc.returncode == 0, proc.stderr
    info = json.loads(proc.stdout)
    assert (info["era"], info["transport"]) == ("handshake", "sse")


# --- mcpkit call -------------------------------------------------------------------------------

def test_call_converts_integers(target: list[str]) -> None:
    # "3" must reach the server as the integer 3: the schema says integer (and a string would
    # fail the client's own schema check with exit code 2).
    proc = run("call", *target, "count", "to=3", "delay=0", "--no-progress")
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "Counted to 3.\n", "")


def test_call_progress_lines_when_not_a_terminal(target: list[str]) -> None:
    proc = run("call", *target, "count", "to=3", "delay=0")
    assert (proc.returncode, proc.stdout) == (0, "Counted to 3.\n"), proc.stderr
    assert proc.stderr.splitlines() == ["progress: 1/3  counted 1", "progress: 2/3  counted 2",
                                        "progress: 3/3  counted 3"]


STEPS = """
    import mcpkit

    @mcpkit.tool
    async def steps(ctx: mcpkit.Context) -> str:
        await ctx.report_progress(278.001, 279, "files")
        await ctx.report_progress(279.001, 279, "phase moved")  # past the total by a server's nudge
        await ctx.report_progress(1234567.5)                   # no total: a plain count
        return "done"

    @mcpkit.hookimpl
    def mcpkit_tools(config):
        return [steps]
"""


def test_call_progress_never_shows_past_the_total_or_float_noise(tmp_path: Path) -> None:
    from .test_plugins import env_for, make_dist

    make_dist(tmp_path, "acme-steps", "steps", "acme_steps", STEPS)
    serve = shlex.join([MCPKIT, "serve", "--plugin", "steps"])
    proc = subprocess.run([MCPKIT, "call", "--stdio", serve, "steps"], capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL, env={**os.environ, **env_for(tmp_path)})
    assert (proc.returncode, proc.stdout) == (0, "done\n"), proc.stderr
    assert proc.stderr.splitlines() == ["progress: 278/279  files", "progress: 279/279  phase moved",
                                        "progress: 1234567.5"]


def test_call_progress_bar_on_a_terminal() -> None:
    """stderr on a pseudo-terminal: click's bar, redrawn in place, ended before the result."""
    import os
    import pty

    leader, follower = pty.openpty()
    proc = subprocess.Popen([MCPKIT, "call", "--stdio", SERVE, "count", "to=4", "delay=0.05"],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=follower)
    os.close(follower)
    screen = b""
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:  # EIO: the other end closed
            break
        if not chunk:
            break
        screen += chunk
    os.close(leader)
    out, _ = proc.communicate(timeout=60)
    assert (proc.returncode, out) == (0, b"Counted to 4.\n")
    text = screen.decode()
    assert "\r" in text and "100%" in text and "counted 4" in text and "progress:" not in text
    assert text.rstrip().endswith("\x1b[?25h") or text.endswith("\n")  # the line is finished


@pytest.mark.parametrize("flag, text", [("excited=true", "Hello, Ada!"), ("excited=yes", "Hello, Ada!"),
                                        ("excited=false", "Hello, Ada."), ("excited=0", "Hello, Ada.")])
def test_call_converts_booleans(flag: str, text: str) -> None:
    proc = run("call", "--stdio", SERVE, "greet", "name=Ada", flag)
    assert (proc.returncode, proc.stdout) == (0, text + "\n"), proc.stderr


def test_call_args_json(target: list[str]) -> None:
    proc = run("call", *target, "greet", "--args", '{"name": "Bo", "excited": true}')
    assert (proc.returncode, proc.stdout) == (0, "Hello, Bo!\n"), proc.stderr
    # KEY=VALUE pairs go on top of --args.
    proc = run("call", *target, "greet", "--args", '{"name": "Bo", "excited": true}', "excited=false")
    assert (proc.returncode, proc.stdout) == (0, "Hello, Bo.\n"), proc.stderr


def test_call_string_with_spaces() -> None:
    proc = run("call", "--stdio", SERVE, "word_count", "text=one two three")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {"result": 3}


def test_call_prints_the_result_once(target: list[str]) -> None:
    """The text block repeats the structured result: it is shown once, as indented JSON."""
    proc = run("call", *target, "forecast", "city=Paris")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["city"] == "Paris" and data["conditions"] in ("sunny", "cloudy", "rainy")
    assert proc.stdout == json.dumps(data, indent=2) + "\n"
    only = run("call", *target, "forecast", "city=Paris", "--structured")
    assert (only.returncode, only.stdout) == (0, proc.stdout)
    none = run("call", *target, "greet", "name=Ada", "--structured")
    assert none.returncode == 1 and "returned no structured content" in none.stderr


def test_call_against_the_official_sdk_shows_text_not_its_wrapper() -> None:
    """An SDK server answers `5` as text plus {"result": 5}: the text is the answer."""
    sdk = shlex.join([sys.executable, str(Path(__file__).parent / "sdk_fixture_server.py"), "stdio"])
    proc = run("call", "--stdio", sdk, "greet", "name=Ada", "--no-progress")
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "Hello, Ada.\n", "")
    unknown = run("call", "--stdio", sdk, "nosuch")  # checked against the list: one line, stderr only
    assert_clean_failure(unknown, "E203", "unknown tool 'nosuch'", "greet")


def test_call_json(target: list[str]) -> None:
    proc = run("call", *target, "forecast", "city=Lima", "--json")
    assert proc.returncode == 0, proc.stderr
    raw = json.loads(proc.stdout)
    assert raw["isError"] is False
    assert raw["structuredContent"]["city"] == "Lima"
    assert raw["content"][0]["type"] == "text"


def test_call_tool_error_exits_1(target: list[str]) -> None:
    proc = run("call", *target, "fail", "message=boom")
    assert (proc.returncode, proc.stdout, proc.stderr) == (1, "boom\n", "")


def test_call_tool_without_arguments_over_stdio() -> None:
    """`mcpkit call --stdio CMD TOOL` with no KEY=VALUE at all (click used to want one more argument)."""
    proc = run("call", "--stdio", SERVE, "fail")
    assert (proc.returncode, proc.stdout, proc.stderr) == (1, "something went wrong\n", "")
    proc = run("call", "--stdio", SERVE, "--json", "fail")
    assert proc.returncode == 1 and json.loads(proc.stdout)["isError"] is True


def test_call_tool_error_json_exits_1() -> None:
    proc = run("call", "--stdio", SERVE, "fail", "--json")
    assert proc.returncode == 1
    assert json.loads(proc.stdout)["content"][0]["text"] == "something went wrong"


# --- failures: exit code 2, one line on stderr, never a traceback ----------------------------

def test_unreachable_url() -> None:
    port = _closed_port()
    assert_clean_failure(run("tools", f"http://127.0.0.1:{port}/mcp"), "E102", f"127.0.0.1:{port}")


def test_stdio_command_that_prints_garbage() -> None:
    assert_clean_failure(run("tools", "--stdio", "echo garbage"), "E105")


def test_stdio_command_that_prints_garbage_and_exits_later() -> None:
    line = assert_clean_failure(run("tools", "--stdio", "sh -c 'echo garbage; sleep 1'"), "E105")
    assert "garbage" in line


def test_stdio_command_that_prints_garbage_then_hangs() -> None:
    line = assert_clean_failure(run("tools", "--stdio", "sh -c 'echo garbage; exec cat >/dev/null'",
                                    "--timeout", "2"))
    assert "E101" in line


def test_stdio_command_that_does_not_exist() -> None:
    assert_clean_failure(run("tools", "--stdio", "/nonexistent/mcp-server --flag"), "E102", "/nonexistent/mcp-server")


@pytest.mark.parametrize("path", ["/", "/mcp", "/index.html"])
def test_http_server_that_is_not_mcp(static_site: str, path: str) -> None:
    line = assert_clean_failure(run("tools", static_site + path))
    assert "E107" in line and "501" in line


def test_discover_http_server_that_is_not_mcp(static_site: str) -> None:
    assert_clean_failure(run("discover", static_site + "/mcp", "--mode", "handshake"), "E107")


@pytest.mark.parametrize("pair, message", [
    ("to=abc", "argument 'to': 'abc' is not an integer"),
    ("to=1.5", "argument 'to': '1.5' is not an integer"),
    ("delay=fast", "argument 'delay': 'fast' is not a number"),
])
def test_bad_conversion(pair: str, message: str) -> None:
    assert_clean_failure(run("call", "--stdio", SERVE, "count", pair), message)


def test_bad_boolean() -> None:
    assert_clean_failure(run("call", "--stdio", SERVE, "greet", "name=Ada", "excited=maybe"),
                         "argument 'excited': 'maybe' is not a boolean")


def test_value_outside_schema() -> None:
    assert_clean_failure(run("call", "--stdio", SERVE, "count", "to=5000"), "E103", "at most 1000")


def test_pair_without_equals() -> None:
    assert_clean_failure(run("call", "--stdio", SERVE, "greet", "Ada"), "KEY=VALUE", "'Ada'")


def test_bad_args_json() -> None:
    assert_clean_failure(run("call", "--stdio", SERVE, "greet", "--args", "{bad"), "--args is not valid JSON")
    assert_clean_failure(run("call", "--stdio", SERVE, "greet", "--args", "[1]"), "--args must be a JSON object")


def test_unknown_tool(target: list[str]) -> None:
    assert_clean_failure(run("call", *target, "no_such_tool"), "E203", "unknown tool 'no_such_tool'",
                         "the server's tools: greet, count,")


def test_wrong_url_path(http_server: HttpServer) -> None:
    line = assert_clean_failure(run("tools", f"http://127.0.0.1:{http_server.port}/nope"), "E102")
    assert "HTTP 404 both to POST" in line and "/mcp" in line


def test_a_stdio_server_that_dies_is_quoted() -> None:
    cmd = shlex.join([sys.executable, "-c", "import sys; print('missing API key', file=sys.stderr); sys.exit(3)"])
    assert_clean_failure(run("tools", "--stdio", cmd), "E105", "(the server's stderr: missing API key)")


def test_tools_columns_line_up() -> None:
    """Short names and arguments under wider headers, long names never cut."""
    proc = run("tools", "--stdio", SERVE)
    lines = proc.stdout.splitlines()
    starts = {line.index("Say hello") if "Say hello" in line else None for line in lines} - {None}
    header_desc = lines[0].index("DESCRIPTION")
    assert starts == {header_desc}
    assert all(not line.endswith(" ") for line in lines)


def test_no_tool_name() -> None:
    assert_clean_failure(run("call", "--stdio", SERVE), "name of the tool")


@pytest.mark.parametrize("command", ["tools", "discover"])
def test_missing_target(command: str) -> None:
    assert_clean_failure(run(command), "give a server URL or --stdio COMMAND")


def test_both_targets(http_server: HttpServer) -> None:
    assert_clean_failure(run("tools", f"http://127.0.0.1:{http_server.port}/mcp", "--stdio", SERVE),
                         "exactly one")


def test_target_that_is_not_a_url() -> None:
    assert_clean_failure(run("tools", "mcpkit serve"), "must be an http(s):// URL", "--stdio")


def test_unsupported_protocol_version() -> None:
    assert_clean_failure(run("discover", "--stdio", SERVE, "--protocol-version", "1999-01-01"), "E207")


def test_bad_header() -> None:
    assert_clean_failure(run("tools", "http://127.0.0.1:1/mcp", "--header", "no-colon"), "--header needs NAME:VALUE")


def test_elicitation_is_refused_cleanly() -> None:
    """The command line answers no elicitation: a tool that asks fails cleanly instead of hanging."""
    assert_clean_failure(run("call", "--stdio", SERVE, "ask_name"), "E206", "elicitation")
