"""`mcpkit dev --transport http` with the console (issues 25 and 26): dev prints the console's
address, and a page open in a real headless Chromium follows each save without being reloaded:
a new tool appears with its try-it form (and answers), a broken save is reported while the last
good tools stay listed, and fixing it recovers."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
from pathlib import Path
from typing import Any

from selenium.webdriver.common.by import By

from .browser_helpers import browser, js_errors, screenshot, wait_for  # noqa: F401 (fixture)
from .helpers import MCPKIT

V1 = '''import mcpkit


@mcpkit.tool
def outlook(city: str) -> str:
    """The outlook for a city."""
    return f"{city}: sunny"


@mcpkit.hookimpl
def mcpkit_tools(config):
    return [outlook]
'''
V2 = V1.replace("    return [outlook]", "    return [outlook, humidity]") + '''

@mcpkit.tool
def humidity(city: str, percent: int = 40) -> str:
    """Humidity, saved while the page was open."""
    return f"{city}: {percent}% humid"
'''


def save(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.saving")  # as editors save: a new file renamed over the old
    tmp.write_text(text)
    os.replace(tmp, path)


class DevServer:
    def __init__(self, plugin: Path) -> None:
        self.proc = subprocess.Popen([MCPKIT, "dev", str(plugin), "--plugin", plugin.stem, "--transport", "http", "--port", "0"],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     start_new_session=True)
        self.lines: list[str] = []
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line.decode(errors="replace"))

    def text(self) -> str:
        return "".join(self.lines)

    def close(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


def tool_names(driver: Any) -> set[str]:
    return {c.get_attribute("data-tool") for c in driver.find_elements(By.CSS_SELECTOR, "#tools .tool")}


def test_the_console_follows_each_save_without_a_reload(tmp_path: Path, browser: Any) -> None:
    plugin = tmp_path / "weather.py"
    plugin.write_text(V1)
    dev = DevServer(plugin)
    try:
        m = wait_for(lambda: re.search(r"mcpkit dev: try it in the browser: (http://127\.0\.0\.1:\d+/console)", dev.text()),
                     timeout=30, what="dev's console address")
        wait_for(lambda: "watching" in dev.text(), timeout=10, what="the watcher")
        browser.get(m.group(1))
        wait_for(lambda: browser.find_element(By.ID, "live").text == "live", what="the live event stream")
        wait_for(lambda: tool_names(browser) == {"outlook"}, what="the first version's tool")
        browser.execute_script("window.__notReloaded = true")

        save(plugin, V2)
        wait_for(lambda: tool_names(browser) == {"outlook", "humidity"}, timeout=10, what="the saved tool on the page")
        assert "reloaded weather" in browser.find_element(By.ID, "banner").text
        assert "+humidity" in browser.find_element(By.ID, "reloads").text
        humidity = browser.find_element(By.CSS_SELECTOR, '#tools .tool[data-tool="humidity"]')
        humidity.find_element(By.CSS_SELECTOR, '[data-arg="city"]').send_keys("Oslo")
        percent = humidity.find_element(By.CSS_SELECTOR, '[data-arg="percent"]')
        assert percent.get_attribute("value") == "40" and percent.get_attribute("step") == "1"
        percent.clear()
        percent.send_keys("77")
        humidity.find_element(By.CSS_SELECTOR, "button.call").click()
        assert wait_for(lambda: humidity.find_element(By.CSS_SELECTOR, ".result .output").text) == "Oslo: 77% humid"
        screenshot(browser, "console-dev-reload")

        save(plugin, V2 + "\ndef broken(:\n")  # a broken save: reported, the last good tools stay
        banner = wait_for(lambda: "reload failed" in browser.find_element(By.ID, "banner").text
                          and browser.find_element(By.ID, "banner"), timeout=10, what="the failed reload")
        assert "SyntaxError" in banner.text and "bad" in banner.get_attribute("class")
        assert tool_names(browser) == {"outlook", "humidity"}

        save(plugin, V1)  # fixed, and humidity taken out again
        wait_for(lambda: tool_names(browser) == {"outlook"}, timeout=10, what="the removed tool to leave the page")
        assert "-humidity" in browser.find_element(By.ID, "banner").text
        assert browser.execute_script("return window.__notReloaded") is True
        assert js_errors(browser) == []
    finally:
        dev.close()
