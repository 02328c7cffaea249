"""Headless Chromium driven by Selenium, for the report tests and the report benchmark.

Debian's ``chromium`` and ``chromium-driver`` packages (installed by ``.ci/run`` and ``make
browser``); Selenium is given both paths, so it never runs selenium-manager and never downloads
a browser or a driver. (A module with its own name rather than conftest.)
"""
from __future__ import annotations

import os
import shutil

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
WINDOW = (1400, 1000)


def missing() -> str:
    """Why no browser can be driven here, or ``""``."""
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip extra `dev`)"
    absent = [path for path in (CHROMIUM, CHROMEDRIVER) if not shutil.which(path)]
    return f"{', '.join(absent)} missing (Debian packages chromium chromium-driver; `make browser`)" if absent else ""


def start():
    """A headless Chromium at ``WINDOW`` size, one device pixel per CSS pixel."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     f"--window-size={WINDOW[0]},{WINDOW[1]}", "--force-device-scale-factor=1",
                     "--disable-background-networking", "--disable-component-update", "--no-first-run"):
        options.add_argument(argument)
    # the local page may use the clipboard (the copy button) without a prompt
    options.add_experimental_option("prefs", {"profile.content_settings.exceptions.clipboard": {
        "file://*,*": {"setting": 1}}})
    return webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER, env=dict(os.environ)), options=options)
