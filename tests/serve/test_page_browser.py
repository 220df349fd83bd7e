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
        drawn = int(browser.find_element(By.ID, "heatmap").get_attribute("data-drawn"))
        assert drawn == len(expected[0].split("\t")[0]) + 1  # a row per target character (char tokenizer) + </s>
        shot = Path(os.environ.get("SCRATCHFORMER_SCREENSHOT") or tmp_path / "serve.png")
        shot.parent.mkdir(parents=True, exist_ok=True)
        assert browser.save_screenshot(str(shot)) and shot.stat().st_size > 10_000
    finally:
        assert server.stop() == 0
