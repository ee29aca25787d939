"""A real headless browser for the console tests: Debian's chromium driven through Debian's
chromedriver with Selenium (`make test-tools` installs both). Nothing is downloaded at run time:
the driver is given by path and Selenium Manager is told to stay offline.

Screenshots go to tests/artifacts/ (kept out of git), and each path is printed.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
ARTIFACTS = Path(__file__).parent / "artifacts"


def _need(path: str, package: str) -> None:
    if not (os.path.exists(path) or shutil.which(os.path.basename(path))):
        raise RuntimeError(f"{path} is missing: run `make test-tools` (it installs {package}) or "
                           f"scripts/need-debian-packages chromium chromium-driver")


def headless_chromium(width: int = 1400, height: int = 1000) -> Any:
    os.environ["SE_OFFLINE"] = "true"  # Selenium Manager must never fetch a driver or a browser
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    _need(CHROMIUM, "chromium")
    _need(CHROMEDRIVER, "chromium-driver")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM if os.path.exists(CHROMIUM) else shutil.which("chromium")  # type: ignore[assignment]
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                f"--window-size={width},{height}", "--no-first-run", "--disable-extensions"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver_path = CHROMEDRIVER if os.path.exists(CHROMEDRIVER) else shutil.which("chromedriver")
    return webdriver.Chrome(service=Service(executable_path=driver_path), options=options)


@pytest.fixture
def browser() -> Iterator[Any]:
    driver = headless_chromium()
    try:
        yield driver
    finally:
        driver.quit()


def wait_for(check: Callable[[], Any], timeout: float = 10, what: str = "the page") -> Any:
    """Poll ``check`` until it returns something true (its value), or fail naming ``what``."""
    end = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < end:
        try:
            value = check()
            if value:
                return value
        except Exception as exc:  # the element is not there yet, or was replaced meanwhile
            last = exc
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}" + (f" ({last!r})" if last else ""))


def screenshot(driver: Any, name: str) -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    driver.save_screenshot(str(path))
    print(f"screenshot: {path}")
    return path


def js_errors(driver: Any) -> list[str]:
    """Errors the page's scripts logged (network 404s of the browser's own favicon aside)."""
    return [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE" and "favicon" not in e["message"]]
