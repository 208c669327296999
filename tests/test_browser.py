"""The web page at / in a real headless Chromium (selenium): it loads the voices, streams speech,
plays it (Web Audio time advances), highlights the words in order as they are spoken, and
downloads the same speech as a file. Against a server with an API key it asks for the key in a
form, keeps it in the tab's sessionStorage and sends it on every /v1/* request."""
from __future__ import annotations

import shutil
import time

import pytest

from test_say import FakeSynth, sentences
from kcc.speech.audio.wav import pcm16
from test_server import expected, s16, serving
from kcc.speech.serve.security import Access

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
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})       # CSP violations land there
    opts.add_experimental_option("prefs", {"download.default_directory": str(tmp_path / "downloads"),
                                           "download.prompt_for_download": False})
    driver = webdriver.Chrome(options=opts, service=webdriver.ChromeService(executable_path=DRIVER))
    try:
        yield driver
    finally:
        driver.quit()


def _csp_violations(browser) -> list[str]:
    """The console's Content-Security-Policy complaints since the last call (the page runs under
    the server's strict policy: any inline code or foreign resource would be blocked)."""
    return [e["message"] for e in browser.get_log("browser") if "Content Security Policy" in e["message"]]


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
    assert s16(saved[0].read_bytes(), "flac") == pcm16(expected(text, stream=False))   # the download: the same request as a whole file
    assert _csp_violations(browser) == []


KEY = "kcc-test-key-7f3a"
V1_FETCHES = ("return performance.getEntriesByType('resource').filter(e => e.initiatorType === 'fetch')"
              ".map(e => new URL(e.name).pathname).filter(p => p.startsWith('/v1/'))")
STORAGES = ("const copy = (s) => Object.fromEntries(Array.from({length: s.length}, (_, i) => [s.key(i), s.getItem(s.key(i))]));"
            "return [copy(sessionStorage), copy(localStorage)]")


def _text(browser, element_id):
    from selenium.webdriver.common.by import By
    return browser.find_element(By.ID, element_id).text


def _shown(browser, element_id):
    from selenium.webdriver.common.by import By
    return browser.find_element(By.ID, element_id).is_displayed()


def _voices(browser):
    from selenium.webdriver.common.by import By
    return len(browser.find_elements(By.CSS_SELECTOR, "#voice option"))


def _type_key(browser, key):
    from selenium.webdriver.common.by import By
    field = browser.find_element(By.ID, "key")
    field.clear()
    field.send_keys(key)
    browser.find_element(By.ID, "key-use").click()


def _speak(browser, text):
    from selenium.webdriver.common.by import By
    area = browser.find_element(By.ID, "text")
    area.clear()
    area.send_keys(text)
    browser.find_element(By.ID, "speak").click()


def test_page_asks_for_the_api_key_and_keeps_it_in_the_tab(tmp_path, browser):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select
    with serving(tmp_path, FakeSynth(delay=0.01), access=Access(api_key=KEY)) as srv:
        browser.get(srv.url + "/")
        _until(lambda: _shown(browser, "key-form"))
        form = browser.find_element(By.ID, "key-form")
        assert form.find_element(By.TAG_NAME, "label").text == "API key" and "--api-key" in form.text
        assert browser.find_element(By.ID, "key").get_attribute("type") == "password"
        assert _text(browser, "key-status") == ""                      # no key sent yet: none refused
        assert browser.execute_script(V1_FETCHES) == ["/v1/audio/voices"] and _voices(browser) == 0

        # Wrong keys: each is sent once, refused, forgotten; the form stays and asks nothing by itself.
        for wrong in [KEY[:-1], KEY + "x", KEY.upper(), "Bearer " + KEY, "x"]:
            before = len(browser.execute_script(V1_FETCHES))
            _type_key(browser, wrong)
            _until(lambda: len(browser.execute_script(V1_FETCHES)) == before + 1
                   and _text(browser, "key-status") == "key refused")
            time.sleep(0.5)
            assert len(browser.execute_script(V1_FETCHES)) == before + 1, wrong       # no retry loop
            assert _shown(browser, "key-form") and not _shown(browser, "key-forget") and _voices(browser) == 0
            assert browser.execute_script(STORAGES) == [{}, {}], wrong

        # Keys no HTTP header can carry as typed are refused in the page, before any request.
        before = len(browser.execute_script(V1_FETCHES))
        for unsendable in ["ключ", "clé-" + KEY, " " + KEY, KEY + " ", KEY[:3] + "\t" + KEY[3:]]:
            browser.execute_script("document.getElementById('key').value = arguments[0]", unsendable)
            browser.find_element(By.ID, "key-use").click()
            _until(lambda: _text(browser, "key-status").startswith("not a key this page can send"))
            assert browser.execute_script(STORAGES) == [{}, {}], unsendable
            browser.execute_script("document.getElementById('key-status').textContent = ''")
        assert len(browser.execute_script(V1_FETCHES)) == before and _shown(browser, "key-form")

        # The right key: the waiting voice list loads, the key is in sessionStorage only.
        _type_key(browser, KEY)
        _until(lambda: _voices(browser) == 5)
        assert not _shown(browser, "key-form") and _shown(browser, "key-forget")
        assert browser.execute_script(STORAGES) == [{"kcc.apiKey": KEY}, {}]
        assert browser.find_element(By.ID, "key").get_attribute("value") == ""

        # Speech and its download carry the key.
        text = sentences(1)
        _speak(browser, text)
        _until(lambda: _text(browser, "status").startswith("done"))
        heard = browser.execute_script("return [window.kcc.words.map(w => w.word), window.kcc.next - window.kcc.start]")
        Select(browser.find_element(By.ID, "format")).select_by_value("flac")
        browser.find_element(By.ID, "download").click()
        saved = _until(lambda: [p for p in (tmp_path / "downloads").glob("speech.flac")])
        assert heard[0][:3] == ["Sentence", "number", "0"] and heard[1] == pytest.approx(len(expected(text)) / 24000, abs=0.01)
        assert s16(saved[0].read_bytes(), "flac") == pcm16(expected(text, stream=False))

        # A reload in the same tab reuses the key without asking.
        browser.refresh()
        _until(lambda: _voices(browser) == 5)
        assert browser.execute_script(V1_FETCHES) == ["/v1/audio/voices"]
        assert not _shown(browser, "key-form") and _shown(browser, "key-forget")

        # Forgetting the key: gone from the tab; the next request asks again and runs once given one.
        browser.find_element(By.ID, "key-forget").click()
        assert browser.execute_script(STORAGES) == [{}, {}] and not _shown(browser, "key-forget")
        _speak(browser, text)
        _until(lambda: _shown(browser, "key-form"))
        assert _text(browser, "key-status") == ""                      # nothing was sent, nothing refused
        _type_key(browser, KEY)
        _until(lambda: _text(browser, "status").startswith("done"))
        assert browser.execute_script(V1_FETCHES)[-2:] == ["/v1/audio/speech", "/v1/audio/speech"]
        assert browser.execute_script(STORAGES) == [{"kcc.apiKey": KEY}, {}] and not _shown(browser, "key-form")

        # A request stopped while it waits for a key is not sent again; the key is then checked alone.
        browser.find_element(By.ID, "key-forget").click()
        _speak(browser, text)
        _until(lambda: _shown(browser, "key-form"))
        browser.find_element(By.ID, "stop").click()
        _type_key(browser, KEY)
        _until(lambda: browser.execute_script(V1_FETCHES)[-2:] == ["/v1/audio/speech", "/v1/models"])
        _until(lambda: _shown(browser, "key-forget"))
        time.sleep(0.3)
        assert browser.execute_script(V1_FETCHES)[-2:] == ["/v1/audio/speech", "/v1/models"]
        assert not _shown(browser, "key-form") and browser.execute_script("return window.kcc.words.length") == 0
        assert _csp_violations(browser) == []


def test_page_without_a_key_shows_no_key_form(tmp_path, browser):
    with serving(tmp_path, FakeSynth(delay=0.01)) as srv:
        browser.get(srv.url + "/")
        _until(lambda: _voices(browser) == 5)
        _speak(browser, sentences(1))
        _until(lambda: _text(browser, "status").startswith("done"))
        assert not _shown(browser, "key-form") and not _shown(browser, "key-forget")
        assert browser.execute_script(V1_FETCHES) == ["/v1/audio/voices", "/v1/audio/speech"]
        assert browser.execute_script(STORAGES) == [{}, {}] and _csp_violations(browser) == []


SPEAKING_STATE = ("return {status: document.getElementById('status').textContent,"
                  " stop: document.getElementById('stop').disabled,"
                  " lit: document.querySelectorAll('#words span.current').length,"
                  " speaking: window.kcc.speaking, frame: window.kcc.frame}")


def _ended(browser) -> dict:
    """The speaking state once it must have ended: read twice, 0.4 s apart, so a highlight loop
    still running (it would light a word again, or hold an animation frame) shows."""
    first = browser.execute_script(SPEAKING_STATE)
    time.sleep(0.4)
    second = browser.execute_script(SPEAKING_STATE)
    assert first == second, (first, second)
    return second


class FailLater(FakeSynth):
    """Speaks the first chunk, then fails: an error in the middle of a stream."""

    def synthesize(self, ids, ref_s, speed=1.0, seed=0, **kw):
        if len(self.calls) >= 1:
            self.calls.append({"ids": list(ids)})
            time.sleep(self.delay)
            raise RuntimeError("the synthesizer broke")
        return super().synthesize(ids, ref_s, speed=speed, seed=seed, **kw)


@pytest.mark.parametrize("how", ["stop", "error", "end"])
def test_the_speaking_state_ends_on_stop_on_an_error_and_at_the_end(tmp_path, browser, how):
    """'speaking…', an enabled Stop and the highlight loop end together: on Stop (mid-speech),
    on an error in the middle of the stream, and when everything received has been heard."""
    from selenium.webdriver.common.by import By
    synth = FailLater(delay=0.5) if how == "error" else FakeSynth(delay=0.05)
    with serving(tmp_path, synth) as srv:
        browser.get(srv.url + "/")
        _until(lambda: _voices(browser) == 5)
        _speak(browser, sentences(3 if how == "end" else 12))
        during = _until(lambda: (st := browser.execute_script(SPEAKING_STATE))["speaking"] and st)
        _until(lambda: browser.execute_script("return window.kcc.words.length") > 3)
        if how == "stop":
            _until(lambda: browser.execute_script(SPEAKING_STATE)["lit"] == 1)
            browser.find_element(By.ID, "stop").click()
            want = "stopped"
        elif how == "error":
            _until(lambda: _text(browser, "status").startswith("error"))
            want = "error: "
        else:
            _until(lambda: browser.find_element(By.ID, "stop").get_attribute("disabled") is not None, timeout=60)
            want = "done: "
        after = _ended(browser)
        heard = browser.execute_script("return window.kcc.played()")
    assert during["speaking"] is True and during["stop"] is False and during["status"] == "speaking…"
    assert after["status"].startswith(want) and "speaking" not in after["status"], after
    assert after["stop"] is True and after["lit"] == 0 and after["speaking"] is False and after["frame"] == 0
    if how != "end":
        assert heard == 0                        # Stop and an error also cut what was still to play
    assert _csp_violations(browser) == []
