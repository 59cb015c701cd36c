"""Opening a page in Debian's headless Chromium through chromedriver (selenium), to see what a
reader would: what got drawn and what the console said."""
from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any, NamedTuple

import pytest


class Rendered(NamedTuple):
    charts: dict[str, int]  # element id -> traces drawn in it
    console: list[dict[str, Any]]  # the console's entries of level SEVERE


def require() -> tuple[str, str]:
    chromium = shutil.which("chromium")
    driver = shutil.which("chromedriver")
    if chromium is None or driver is None:
        pytest.skip("Debian's chromium and chromium-driver are not installed")
    return chromium, driver


def render(page: Path, element_ids: tuple[str, ...], timeout_s: float = 30) -> Rendered:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.support.ui import WebDriverWait

    chromium, driver = require()
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    browser = webdriver.Chrome(options=options, service=Service(driver))
    try:
        browser.set_page_load_timeout(timeout_s)
        browser.get(page.resolve().as_uri())
        count = ("return Object.fromEntries(arguments[0].map(id => {const e = document.getElementById(id);"
                 " return [id, e && e.querySelectorAll('g.trace').length || 0];}))")
        # Plotly draws once the page's scripts ran; wait for every chart to hold its traces.
        WebDriverWait(browser, timeout_s).until(
            lambda b: all(b.execute_script(count, list(element_ids)).values()))
        charts = browser.execute_script(count, list(element_ids))
        console = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
        return Rendered(charts, console)
    finally:
        browser.quit()
