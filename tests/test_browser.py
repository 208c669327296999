"""The web page at / in a real headless Chromium (selenium): it loads the voices, streams speech,
plays it (Web Audio time advances), highlights the words in order as they are spoken, and
downloads the same speech as a file."""
from __future__ import annotations

import shutil
import time

import pytest

from test_say import FakeSynth, sentences
from kcc.speech.wav import pcm16
from test_server import expected, s16, serving

CHROMIUM = shutil.which("chromium")
DRIVER = shutil.which("chromedriver")
pytestmark = pytest.mark.tools("chromium", "chromedriver")


@pytest.fixture
def browser(tmp_path):
    webdriver = pytest.importorskip("selenium.webdriver")
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for flag in ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--autoplay-policy=no-user-gesture-required", f"--user-data-dir={tmp_path / 'profile'}"]:
        opts.add_argument(flag)
    opts.add_experimental_option("prefs", {"download.default_directory": str(tmp_path / "downloads"),
                                           "download.prompt_for_download": False})
    driver = webdriver.Chrome(options=opts, service=webdriver.ChromeService(executable_path=DRIVER))
    try:
        yield driver
    finally:
        driver.quit()


def _until(cond, timeout=20.0):
    t0 = time.monotonic()
    while not (value := cond()):
        assert time.monotonic() - t0 < timeout, "condition never held"
        time.sleep(0.05)
    return value


def test_page_streams_plays_and_highlights(tmp_path, browser):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select
    with serving(tmp_path, FakeSynth(delay=0.05)) as srv:
        browser.get(srv.url + "/")
        _until(lambda: len(browser.find_elements(By.CSS_SELECTOR, "#voice option")) == 5)
        assert browser.find_element(By.ID, "voice").get_attribute("value") == ""   # the language's own voice
        groups = {g.get_attribute("label"): [o.get_attribute("value") for o in g.find_elements(By.TAG_NAME, "option")]
                  for g in browser.find_elements(By.CSS_SELECTOR, "#voice optgroup")}
        assert groups == {"British English (en-gb)": ["bf_emma"], "American English (en-us)": ["af_alloy", "am_echo"],
                          "Japanese (ja)": ["jf_alpha"]}
        langs = [o.get_attribute("value") for o in browser.find_elements(By.CSS_SELECTOR, "#lang option")]
        assert langs == ["", "en-gb", "en-us", "ja"]
        text = sentences(3)
        area = browser.find_element(By.ID, "text")
        area.clear()
        area.send_keys(text)
        browser.find_element(By.ID, "speak").click()
        _until(lambda: browser.execute_script("return window.kcc.words.length") > 10)
        played = [browser.execute_script("return window.kcc.played()")]
        seen = []
        t0 = time.monotonic()
        while time.monotonic() - t0 < 4:
            seen.append(browser.execute_script(
                "const s = document.querySelector('#words span.current'); return s ? window.kcc.spans.indexOf(s) : -1"))
            time.sleep(0.1)
        played.append(browser.execute_script("return window.kcc.played()"))
        state = browser.execute_script("return window.kcc.ctx && window.kcc.ctx.state")
        words = browser.execute_script("return window.kcc.words.map(w => w.word)")
        _until(lambda: browser.find_element(By.ID, "status").text.startswith("done"))
        status = browser.find_element(By.ID, "status").text
        Select(browser.find_element(By.ID, "format")).select_by_value("flac")
        browser.find_element(By.ID, "download").click()
        saved = _until(lambda: [p for p in (tmp_path / "downloads").glob("speech.flac")])
    assert state == "running" and played[1] > played[0] + 2.0          # audio time advanced
    lit = [i for i in seen if i >= 0]
    assert len(set(lit)) >= 5 and lit == sorted(lit)                    # the highlight moved forward
    assert words[:4] == ["Sentence", "number", "0", "has"] and status.startswith("done")
    assert s16(saved[0].read_bytes(), "flac") == pcm16(expected(text))   # the download is the same speech
