"""A page seen in a real browser: Debian's headless chromium driven by selenium (both optional), for the
report's screenshot and its browser test. Nothing is fetched: no network, a fresh profile, no updates."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from scratchformer.errors import N_, InputError

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run")


def missing() -> str | None:
    """Why no browser can be driven here (a sentence), or None when one can."""
    try:
        import selenium  # noqa: F401 (only whether it is there)
    except ImportError:
        return "selenium is not installed (pip install selenium)"
    for path, package in ((CHROMIUM, "chromium"), (CHROMEDRIVER, "chromium-driver")):
        if not Path(path).is_file():
            return f"{path} is missing (apt-get install {package})"
    return None


@contextmanager
def chromium(width: int = 1280, height: int = 1600) -> Iterator[object]:
    """A headless chromium WebDriver with the browser's console log kept; quit and its profile removed after."""
    reason = missing()
    if reason:
        raise InputError(N_("cannot open a browser: {reason}"), reason=reason)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="scratchformer-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (*FLAGS, f"--user-data-dir={profile}", f"--window-size={width},{height}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def screenshot(page: str | Path, png: str | Path, width: int = 1280, height: int = 1600) -> dict:
    """Open the HTML file `page`, save its first `width` x `height` pixels to `png`; returns what the browser
    saw: {"title", "images" (count), "images_loaded" (all decoded), "console" (log entries)}."""
    with chromium(width, height) as driver:
        driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",  # the viewport itself, not the window
                               {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})
        driver.get(Path(page).resolve().as_uri())
        seen = {"title": driver.title, "images": driver.execute_script("return document.images.length"),
                "images_loaded": driver.execute_script(
                    "return Array.from(document.images).every(i => i.complete && i.naturalWidth > 0)")}
        driver.save_screenshot(str(png))
        seen["console"] = driver.get_log("browser")
    return seen
