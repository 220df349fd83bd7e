"""LibreTranslate's /detect answers what the text is (issue 44: it answered the server's source language with
confidence 100 whatever the text), through the `libretranslatepy` client against a live server on 127.0.0.1."""

from __future__ import annotations

import pytest

from .conftest import start_server


def test_detect_says_fr_for_a_french_sentence_through_libretranslatepy(tiny_run):
    api = pytest.importorskip("libretranslatepy").LibreTranslateAPI
    server = start_server(tiny_run, "--source", "en", "--target", "zh")
    try:
        client = api(server.url)
        found = client.detect("Bonjour, je voudrais enregistrer ce document avant de fermer la fenêtre.")
        assert found[0]["language"] == "fr" and 50 < found[0]["confidence"] <= 100, found
        found = client.detect("Save the document before closing the window.")
        assert found[0]["language"] == "en" and 50 < found[0]["confidence"] <= 100, found
        found = client.detect("关闭窗口前保存文档。")
        assert found[0]["language"] == "zh" and found[0]["confidence"] > 50, found
        assert client.translate("Open the file.", source="auto", target="zh")  # English: translated
    finally:
        assert server.stop() == 0
    assert "Traceback" not in "".join(server.stderr)
