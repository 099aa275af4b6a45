"""A page as a user sees it: Debian's Chromium, headless, driven through Debian's Selenium and chromedriver.

browser() opens one; screenshot() saves the whole page as a PNG and says how much of it is not background
(a page whose content failed to render is one colour); images() lists every <img> with whether it loaded.
"""
import contextlib
import os
import shutil

from PIL import Image
from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service


@contextlib.contextmanager
def browser(width=1400, height=1000):
    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    driver_path = shutil.which("chromedriver") or "/usr/bin/chromedriver"
    for path, package in ((chromium, "chromium"), (driver_path, "chromium-driver")):
        if not os.path.exists(path):
            raise SystemExit(f"{path} is missing: install Debian's {package} (scripts/install_deps.sh test)")
    options = Options()
    options.binary_location = chromium
    # --no-sandbox: tests run as root, where Chromium's sandbox refuses to start; the pages are our own.
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                f"--window-size={width},{height}", "--hide-scrollbars", "--force-device-scale-factor=1"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()


def screenshot(driver, path, full_page=True):
    """Saves the page (all of its height with full_page) to `path`; returns the share of its pixels that
    differ from its most common colour, the background."""
    if full_page:
        width = driver.execute_script("return document.documentElement.scrollWidth")
        height = driver.execute_script("return Math.max(document.body.scrollHeight, document.documentElement.scrollHeight)")
        driver.set_window_size(max(width, 800), min(max(height, 600), 16000))
    driver.save_screenshot(path)
    with Image.open(path) as image:
        pixels = image.convert("RGB")
        small = pixels.resize((pixels.width // 4 or 1, pixels.height // 4 or 1))
        counts = small.getcolors(maxcolors=1 << 24)
    background = max(counts)[0]
    total = sum(c for c, _ in counts)
    return 1.0 - background / total


def images(driver):
    """Every <img> of the page: its src attribute, whether it loaded (complete with a natural size) and
    its size on the page."""
    return driver.execute_script(
        "return Array.from(document.images).map(i => ({src: i.getAttribute('src'), loaded: i.complete && "
        "i.naturalWidth > 0, natural: [i.naturalWidth, i.naturalHeight], "
        "shown: [i.getBoundingClientRect().width, i.getBoundingClientRect().height]}));")
