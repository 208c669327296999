"""Ready means warm (kcc.speech.serve.warmup): /ready and Wyoming's info say ready only once every
voice is loaded, every advertised language's G2P made and run, and every synthesis thread has
synthesised; by state (gates held and released), never by time."""
from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from kcc.speech.serve.cli import named_languages
from kcc.speech.serve.scheduler import ChunkScheduler
from kcc.speech.serve.service import Limits
from kcc.speech.serve.warmup import Warmup, advertised_languages
from kcc.speech.serve.wyoming_server import info

from test_say import FakeSynth, LetterG2P
from test_server import VOICE_SEEDS, G2PS, request, serving

ROOT = Path(__file__).resolve().parents[1]


class GatedG2PS(G2PS):
    """G2PS whose G2P of `held` blocks its first call until `gate` is set (a slow dictionary load)."""

    def __init__(self, held: str, gate: threading.Event):
        super().__init__()
        self.held, self.gate, self.called = held, gate, []

    def __call__(self, lang):
        inner = super().__call__(lang)

        def g2p(text):
            self.called.append(lang)
            if lang == self.held:
                assert self.gate.wait(20), "the test never released the gate"
            return inner(text)
        return g2p


class ThreadSynth(FakeSynth):
    """FakeSynth that records the thread of each call."""

    def __init__(self):
        super().__init__()
        self.threads: list[str] = []

    def synthesize(self, ids, ref_s, **kw):
        self.threads.append(threading.current_thread().name)
        return super().synthesize(ids, ref_s, **kw)


def test_ready_is_warming_until_the_warmup_has_run(tmp_path):
    gate = threading.Event()
    g2ps = GatedG2PS("ja", gate)
    synth = ThreadSynth()
    with serving(tmp_path, synth=synth, g2ps=g2ps, limits=Limits(workers=2)) as srv:
        warm = srv.service.warmup = Warmup(srv.service, ["en-us", "ja"])
        thread = warm.start()
        status, _, data = request(srv.port, "GET", "/ready")
        assert status == 503 and json.loads(data)["status"] == "warming"
        assert not info(srv.service).tts[0].installed
        assert synth.threads == []                      # held in the ja G2P, before any synthesis
        gate.set()
        thread.join(20)
        status, _, data = request(srv.port, "GET", "/ready")
        assert status == 200 and json.loads(data)["status"] == "ready"
        assert info(srv.service).tts[0].installed
        # every voice's pack loaded, each language's G2P made and run, every synthesis thread used
        assert sorted(srv.service.voices._loaded) == sorted(VOICE_SEEDS)
        assert g2ps.called[:2] == ["en-us", "ja"]
        assert set(synth.threads) == {"kcc-synth-0", "kcc-synth-1"}
        # the warm pass measured (the cold one not): what the deadline check and Retry-After read
        assert srv.service.seconds_per_phoneme > 0                 # the deadline check has a real rate
        assert set(warm.seconds) == {"voices", "g2p en-us", "g2p ja", "encoders", "synthesis"}


def test_a_failed_warmup_is_not_ready(tmp_path):
    with serving(tmp_path, g2ps=G2PS(languages=("en-us",))) as srv:
        warm = srv.service.warmup = Warmup(srv.service, ["en-us", "ja"])    # ja: G2PError
        warm.run()
        status, _, data = request(srv.port, "GET", "/ready")
        assert status == 503 and json.loads(data)["status"] == "failed"
        assert "ja" in str(warm.error)


def test_scheduler_on_each_runs_once_on_every_thread():
    sched = ChunkScheduler(3)
    seen, lock = [], threading.Lock()

    def record():
        with lock:
            seen.append(threading.current_thread().name)
    try:
        sched.on_each(record)
    finally:
        sched.close()
    assert sorted(seen) == ["kcc-synth-0", "kcc-synth-1", "kcc-synth-2"]


def test_advertised_languages():
    assert advertised_languages("en-us", ["ja", "en-gb", "ja", "xx"]) == ["en-us", "en-gb", "ja"]
    assert advertised_languages("ja", ["en-us", "zh"], ["zh"]) == ["ja", "zh"]


@pytest.mark.parametrize("text", ["klingon", "en-us,xx", "EN"])
def test_languages_option_refuses_unknown_languages(text):
    with pytest.raises(ValueError, match="not a language kcc speaks"):
        named_languages(text)


def test_named_languages_parses_the_list():
    assert named_languages(" en-us, ja ,") == ["en-us", "ja"]
    assert named_languages(None) is None and named_languages("") is None


def test_japanese_g2p_prints_no_onnx_runtime_warning():
    """pyopenjtalk-plus prints a Nani-prediction warning as it is imported; kcc does not use that
    model, so a Japanese G2P says nothing on either stream."""
    # the runtime install has no onnxruntime (the dev one does, for the peers): hide it
    code = ("import sys; sys.modules['onnxruntime'] = None\n"
            "from kcc.speech.g2p.g2p import G2P; print(G2P('ja')('こんにちは')[0].phonemes)")
    got = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120,
                         env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert got.returncode == 0, got.stderr
    assert got.stdout.strip() == "koɲɲiʨiβa"
    assert "ONNX Runtime" not in got.stdout + got.stderr and "Nani" not in got.stdout + got.stderr


def test_an_offered_language_without_its_g2p_is_skipped_unless_required(tmp_path):
    """A voice's language whose G2P is not installed (the ja / zh extras) does not keep the server
    from ready; the default language, or one --languages names, does."""
    with serving(tmp_path, g2ps=G2PS(languages=("en-us",))) as srv:
        warm = srv.service.warmup = Warmup(srv.service, ["en-us", "ja"], required=["en-us"])
        warm.run()
        assert warm.ready and list(warm.skipped) == ["ja"] and "not supported" in warm.skipped["ja"]
        status, _, data = request(srv.port, "GET", "/ready")
        assert status == 200 and json.loads(data)["status"] == "ready"


@pytest.mark.parametrize("language, extra", [("ja", "ja"), ("zh", "zh")])
def test_a_language_without_its_extra_names_the_extra(language, extra):
    """Japanese and Mandarin G2P come with kcc[ja] / kcc[zh]; without them (modules hidden) the
    G2P's error names the extra to install."""
    code = ("import sys\n"
            "for m in ('pyopenjtalk', 'jieba'): sys.modules[m] = None\n"
            "import importlib.util; real = importlib.util.find_spec\n"
            "importlib.util.find_spec = lambda n, *a: None if n in ('pyopenjtalk', 'jieba') else real(n, *a)\n"
            "from kcc.speech.g2p.g2p import G2P, G2PError\n"
            f"try:\n    G2P('{language}')('x')\nexcept G2PError as e:\n    print(e)\n")
    got = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120,
                         env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert got.returncode == 0, got.stderr
    assert f"pip install 'kcc[{extra}]'" in got.stdout
