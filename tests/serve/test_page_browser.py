"""The page at / in a real headless browser (Debian's chromium and chromedriver, driven by selenium): type an
English sentence, click Translate, wait for the Chinese, its n-best list and the cross-attention heatmap, and take
a screenshot (SCRATCHFORMER_SCREENSHOT=docs/serve.png keeps it; the README shows that one). Skipped, saying why,
where chromium, chromedriver, selenium or the shipped model is missing."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from scratchformer.inspect.browser import chromium, missing

from .conftest import cli_lines, start_server

RUN = Path(__file__).resolve().parents[2] / "models" / "en-zh"
SENTENCE = "Save the document as PDF."
NO_BROWSER = missing()  # a sentence saying why, or None

pytestmark = [
    pytest.mark.skipif(NO_BROWSER is not None, reason=f"no headless browser: {NO_BROWSER}"),
    pytest.mark.skipif(not (RUN / "model.safetensors").is_file(), reason="no shipped model models/en-zh"),
]


@pytest.fixture(scope="module")
def browser():
    with chromium(1000, 1120) as driver:  # Debian's chromium and chromedriver: nothing downloaded
        yield driver


def assert_drawn(heatmap, rows: int, columns: int) -> None:
    """The panel as the browser shows it: at least a 28-pixel cell per token each way, and not an empty box (the
    red team's screenshot): its own screenshot holds the heatmap's shades of blue, not one flat colour."""
    import io

    from PIL import Image

    size = heatmap.size  # CSS pixels, as laid out
    assert heatmap.is_displayed() and size["width"] >= 28 * columns and size["height"] >= 28 * rows, size
    image = Image.open(io.BytesIO(heatmap.screenshot_as_png)).convert("RGB")
    assert image.width > 0 and image.height > 0
    colours = {c for _, c in image.getcolors(image.width * image.height)}
    blues = {c for c in colours if c[2] > c[0] + 40}  # cellColour(): blue above red once a weight shows
    assert len(blues) >= 5, f"the heatmap's screenshot holds {len(colours)} colours, {len(blues)} blue"


def translate_on_the_page(browser, url: str, key: str | None = None):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(url + "/")
    if key is not None:
        field = browser.find_element(By.ID, "apikey")
        field.clear()
        field.send_keys(key)
    box = browser.find_element(By.ID, "source")
    box.clear()
    box.send_keys(SENTENCE)
    browser.find_element(By.ID, "go").click()
    WebDriverWait(browser, 120).until(lambda d: d.find_element(By.ID, "heatmap").get_attribute("data-drawn")
                                      or d.find_element(By.ID, "status").text)
    return browser.find_element(By.ID, "status").text, browser.find_element(By.ID, "translation").text


def test_a_key_protected_server_works_from_the_page(browser):
    from selenium.webdriver.common.by import By

    server = start_server(RUN, "--api-key", "密钥")
    try:
        browser.get(server.url + "/")
        browser.execute_script("localStorage.clear()")
        status, _ = translate_on_the_page(browser, server.url, key="")
        assert "Invalid API key" in status and "API key" in status  # says where the key goes
        status, translation = translate_on_the_page(browser, server.url, key="密钥")
        assert status == "" and translation
        status, again = translate_on_the_page(browser, server.url)  # the key was kept (localStorage)
        assert status == "" and again == translation
        heatmap = browser.find_element(By.ID, "heatmap")
        assert_drawn(heatmap, rows=int(heatmap.get_attribute("data-drawn")), columns=len(SENTENCE.split()) + 2)
    finally:
        assert server.stop() == 0


def test_type_click_read_the_chinese_and_the_heatmap(browser, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    expected = cli_lines(str(RUN), "--beam", "4", "--n-best", "3", SENTENCE)  # `text<TAB>score`, best first
    server = start_server(RUN)
    try:
        browser.get(server.url + "/")
        box = browser.find_element(By.ID, "source")
        box.clear()
        box.send_keys(SENTENCE)
        browser.find_element(By.ID, "go").click()
        wait = WebDriverWait(browser, 120)
        wait.until(lambda d: d.find_element(By.ID, "heatmap").get_attribute("data-drawn")
                   or d.find_element(By.ID, "status").text)
        assert browser.find_element(By.ID, "status").text == ""
        assert browser.find_element(By.ID, "translation").text == expected[0].split("\t")[0]
        texts = [e.text for e in browser.find_elements(By.CSS_SELECTOR, "#alternatives li .text")]
        scores = [e.text for e in browser.find_elements(By.CSS_SELECTOR, "#alternatives li .score")]
        assert texts == [line.split("\t")[0] for line in expected]  # the n-best list, as the CLI prints it
        assert scores == [f"{float(line.split(chr(9))[1]):.3f}" for line in expected]
        heatmap = browser.find_element(By.ID, "heatmap")
        drawn = int(heatmap.get_attribute("data-drawn"))
        assert drawn == len(expected[0].split("\t")[0]) + 1  # a row per target character (char tokenizer) + </s>
        assert_drawn(heatmap, rows=drawn, columns=len(SENTENCE.split()) + 2)  # words, ".", </s>
        shot = Path(os.environ.get("SCRATCHFORMER_SCREENSHOT") or tmp_path / "serve.png")
        shot.parent.mkdir(parents=True, exist_ok=True)
        assert browser.save_screenshot(str(shot)) and shot.stat().st_size > 10_000
    finally:
        assert server.stop() == 0
