"""The console in a real headless Chromium against a real `mcpkit serve --transport http --console`
(issue 25): the page lists the plugins and tools, a try-it form calls a tool with typed arguments
and shows the result, a call another client makes shows in flight and then among the recent calls
without the page being reloaded (live updates over SSE), and screenshots are kept in
tests/artifacts/.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select

from .browser_helpers import browser, js_errors, screenshot, wait_for  # noqa: F401 (fixture)
from .http_helpers import ACCEPT, HttpServer, modern_headers

PLUGIN = str(Path(__file__).parent / "console_plugin.py")
STATELESS_META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {},
                  "io.modelcontextprotocol/clientInfo": {"name": "other-client", "version": "1"}}


UNTYPED = '''import mcpkit


@mcpkit.tool
def loose(x) -> str:
    """A parameter without a type hint (a load-time warning)."""
    return repr(x)


@mcpkit.hookimpl
def mcpkit_tools(config):
    return [loose]
'''


def console_server(*args: str, env: dict[str, str] | None = None) -> HttpServer:
    return HttpServer("--console", PLUGIN, "--plugin", "console_plugin", *args, env=env)


def mcp_call(srv: HttpServer, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """A tools/call from an ordinary MCP client (stateless era) on /mcp."""
    body = {"jsonrpc": "2.0", "id": 7, "method": "tools/call",
            "params": {"name": tool, "arguments": arguments, "_meta": STATELESS_META}}
    status, _, raw = srv.call("POST", "/mcp", body, headers={**modern_headers("tools/call", tool), "Accept": ACCEPT})
    assert status == 200, raw
    return json.loads(raw)


def card(driver: Any, tool: str) -> Any:
    return driver.find_element(By.CSS_SELECTOR, f'#tools .tool[data-tool="{tool}"]')


def arg(tool_card: Any, name: str) -> Any:
    return tool_card.find_element(By.CSS_SELECTOR, f'[data-arg="{name}"]')


def rows(driver: Any, table: str) -> list[list[str]]:
    return [[td.text for td in tr.find_elements(By.TAG_NAME, "td")]
            for tr in driver.find_elements(By.CSS_SELECTOR, f"#{table} tbody tr")]


def test_the_page_lists_plugins_and_tools_and_calls_a_tool_with_typed_arguments(browser: Any, tmp_path: Path) -> None:
    (tmp_path / "broken.py").write_text("import mcpkit\ndef oops(:\n")
    (tmp_path / "untyped.py").write_text(UNTYPED)
    with console_server(str(tmp_path / "broken.py"), "--plugin", "broken", str(tmp_path / "untyped.py"), "--plugin", "untyped") as srv:
        browser.get(f"http://127.0.0.1:{srv.port}/console")
        wait_for(lambda: browser.find_element(By.ID, "live").text == "live", what="the live event stream")
        plugin_row = wait_for(lambda: browser.find_element(By.CSS_SELECTOR, '#plugins tr[data-plugin="console_plugin"]'),
                              what="the plugin's row")
        assert "loaded" in plugin_row.text and PLUGIN in plugin_row.text and "5 tools" in plugin_row.text
        broken = browser.find_element(By.CSS_SELECTOR, '#plugins tr[data-plugin="broken"]').text
        assert "error: import failed: SyntaxError" in broken
        untyped = browser.find_element(By.CSS_SELECTOR, '#plugins tr[data-plugin="untyped"]').text
        assert "loaded" in untyped and "warning: tool 'loose': parameter 'x' has no type hint" in untyped
        card(browser, "loose").find_element(By.CSS_SELECTOR, '[data-arg="x"]')  # no type: a JSON box
        assert card(browser, "loose").find_element(By.CSS_SELECTOR, '[data-arg="x"]').tag_name == "textarea"
        tools = {c.get_attribute("data-tool") for c in browser.find_elements(By.CSS_SELECTOR, "#tools .tool")}
        assert tools == {"repeat", "slow", "mix", "fail", "brew", "loose"}

        # the form follows the input schema: a text box, a whole-number box, a true/false choice
        repeat = card(browser, "repeat")
        assert arg(repeat, "word").get_attribute("type") == "text"
        assert arg(repeat, "times").get_attribute("type") == "number" and arg(repeat, "times").get_attribute("step") == "1"
        assert arg(repeat, "shout").tag_name == "select"
        arg(repeat, "word").send_keys("ab")
        arg(repeat, "times").send_keys("2.5")  # not an integer: the page says so and calls nothing
        repeat.find_element(By.CSS_SELECTOR, "button.call").click()
        assert "times must be an integer" in wait_for(lambda: repeat.find_element(By.CSS_SELECTOR, ".result .output").text)
        arg(repeat, "times").clear()
        arg(repeat, "times").send_keys("3")
        Select(arg(repeat, "shout")).select_by_visible_text("true")
        repeat.find_element(By.CSS_SELECTOR, "button.call").click()
        out = wait_for(lambda: repeat.find_element(By.CSS_SELECTOR, ".result .output").text == "AB AB AB"
                       and repeat.find_element(By.CSS_SELECTOR, ".result"), what="the tool's answer")
        assert "ok" in out.text

        # an enum, a number and a JSON array
        mix = card(browser, "mix")
        assert sorted(o.text for o in Select(arg(mix, "color")).options) == ["blue", "green", "red"]
        Select(arg(mix, "color")).select_by_visible_text("blue")
        arg(mix, "ratio").clear()
        arg(mix, "ratio").send_keys("0.25")
        arg(mix, "tags").send_keys('["x", "y"]')
        mix.find_element(By.CSS_SELECTOR, "button.call").click()
        text = wait_for(lambda: mix.find_element(By.CSS_SELECTOR, ".result .output").text, what="the mix answer")
        assert json.loads(text) == {"color": "blue", "ratio": 0.25, "tags": ["x", "y"]}

        # a tool error shows as one; the calls went through the server's dispatch path: they are
        # among the recent calls, with the console as their client, and in the latency table
        fail = card(browser, "fail")
        fail.find_element(By.CSS_SELECTOR, "button.call").click()
        assert "failed on purpose" in wait_for(lambda: fail.find_element(By.CSS_SELECTOR, ".result.error .output").text)
        recent = wait_for(lambda: len(rows(browser, "recent")) >= 3 and rows(browser, "recent"), what="recent calls")
        assert {(r[2], r[4], r[5]) for r in recent} == {("repeat", "ok", "mcpkit-console"), ("mix", "ok", "mcpkit-console"),
                                                      ("fail", "tool_error", "mcpkit-console")}
        latency = {r[0]: r for r in rows(browser, "latency")}
        assert latency["fail"][1:3] == ["1", "1"] and latency["repeat"][1:3] == ["1", "0"]
        assert float(latency["repeat"][3]) >= 0 and float(latency["repeat"][4]) >= float(latency["repeat"][3])
        screenshot(browser, "console-try-it")
        assert js_errors(browser) == []


def test_a_call_in_flight_appears_and_disappears_without_reloading_the_page(browser: Any, tmp_path: Path) -> None:
    (tmp_path / "broken.py").write_text("import mcpkit\ndef oops(:\n")  # for the picture: a plugin that fails to load
    with console_server(str(tmp_path / "broken.py"), "--plugin", "broken") as srv:
        browser.get(f"http://127.0.0.1:{srv.port}/console")
        wait_for(lambda: browser.find_element(By.ID, "live").text == "live", what="the live event stream")
        browser.execute_script("window.__notReloaded = true")
        card(browser, "repeat")  # the catalog is in
        for times in (1, 2, 3):  # some history for the recent calls and the latency table (and the picture)
            mcp_call(srv, "repeat", {"word": "hi", "times": times})
        mcp_call(srv, "fail", {})
        wait_for(lambda: len(rows(browser, "recent")) == 4, what="the earlier calls")
        done: dict[str, Any] = {}
        caller = threading.Thread(target=lambda: done.update(mcp_call(srv, "slow", {"seconds": 3})))
        caller.start()
        row = wait_for(lambda: browser.find_element(By.CSS_SELECTOR, '#inflight tr[data-target="slow"]'), timeout=2.5,
                       what="the slow call in flight")
        assert "tools/call" in row.text and "other-client" in row.text
        assert browser.find_element(By.ID, "count-inflight").text == "1"
        wait_for(lambda: "s" in browser.find_element(By.CSS_SELECTOR, "#inflight td.running").text)
        screenshot(browser, "console")  # the docs' picture (docs/console.png) is this one
        caller.join(10)
        assert done["result"]["content"][0]["text"] == "slept 3.0"
        wait_for(lambda: not browser.find_elements(By.CSS_SELECTOR, '#inflight tr[data-target="slow"]'), timeout=3,
                 what="the finished call to leave the in-flight table")
        assert browser.find_element(By.ID, "count-inflight").text == "0"
        assert browser.find_element(By.ID, "inflight-empty").is_displayed()
        (slow,) = [r for r in rows(browser, "recent") if r[2] == "slow"]
        assert slow[4] == "ok" and slow[5] == "other-client" and 2900 <= float(slow[3]) < 6000
        assert browser.execute_script("return window.__notReloaded") is True
        assert js_errors(browser) == []


def test_a_task_shows_while_it_runs_and_its_end_is_told(browser: Any) -> None:
    with console_server(env={"MCPKIT_TASK_STORE": "memory"}) as srv:
        browser.get(f"http://127.0.0.1:{srv.port}/console")
        wait_for(lambda: browser.find_element(By.ID, "live").text == "live", what="the live event stream")
        meta = {**STATELESS_META, "io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}}
        body = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "brew", "arguments": {"seconds": 2}, "_meta": meta}}
        status, _, raw = srv.call("POST", "/mcp", body, headers={**modern_headers("tools/call", "brew"), "Accept": ACCEPT})
        assert status == 200, raw
        result = json.loads(raw)["result"]
        assert result["resultType"] == "task"  # it ran long: the answer is a task
        task_id = result["taskId"]
        row = wait_for(lambda: rows(browser, "tasks"), timeout=2, what="the running task")
        assert row[0][0] == task_id[:12] and row[0][1:3] == ["brew", "working"]
        assert browser.find_element(By.ID, "count-tasks").text == "1"
        wait_for(lambda: not rows(browser, "tasks"), timeout=5, what="the task to end")
        updates = browser.find_element(By.ID, "task-updates").text
        assert task_id[:12] in updates and "completed" in updates
        wait_for(lambda: browser.find_element(By.ID, "count-tasks").text == "0", timeout=7, what="no live task")


def test_a_browser_without_trust_signs_in_with_the_operator_token(browser: Any) -> None:
    """No address trusted (console_trusted = []): even this loopback browser needs the token; the
    page's form turns it into a cookie the page, its API calls and its event stream then carry."""
    with console_server(env={"MCPKIT_CONSOLE_TRUSTED": "", "MCPKIT_CONSOLE_TOKEN": "op-token-123"}) as srv:
        browser.get(f"http://127.0.0.1:{srv.port}/console")
        field = wait_for(lambda: browser.find_element(By.NAME, "token"), what="the sign-in form")
        assert browser.find_elements(By.ID, "tools") == []  # nothing of the console before the token
        field.send_keys("wrong")
        field.submit()
        assert "not the console token" in wait_for(lambda: browser.find_element(By.TAG_NAME, "main").text)
        browser.find_element(By.NAME, "token").send_keys("op-token-123")
        browser.find_element(By.NAME, "token").submit()
        wait_for(lambda: browser.find_element(By.ID, "live").text == "live", what="the live event stream")
        repeat = wait_for(lambda: card(browser, "repeat"), what="the tools")
        arg(repeat, "word").send_keys("ok")
        arg(repeat, "times").send_keys("2")
        repeat.find_element(By.CSS_SELECTOR, "button.call").click()
        assert wait_for(lambda: repeat.find_element(By.CSS_SELECTOR, ".result .output").text) == "ok ok"
        assert browser.current_url == f"http://127.0.0.1:{srv.port}/console"
        assert [e for e in js_errors(browser) if "status of 401" not in e] == []  # the two 401s were the sign-in pages
