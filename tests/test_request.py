"""The one speech request (kcc.speech.request): each field's refusals as a class, the same named
error and message through every door (kcc say, kcc.Kokoro, the HTTP server, Wyoming's request
builder, a batch manifest); the declarations feeding the doors' options and columns; every
spelling of a language; `kcc --help` without the compiler or the G2P."""
from __future__ import annotations

import re
import subprocess
import sys

import numpy as np
import pytest

import kcc.api
import kcc.speech.cli.say as say_mod
from kcc.cli import main as kcc_main
from kcc.model.kokoro import MAX_SEED
from kcc.speech.batch.manifest import COLUMNS, Defaults, make_item
from kcc.speech.engine import random_voice
from kcc.speech.languages import LANGUAGES
from kcc.speech.request import FIELDS, LANGUAGE_SPELLINGS, RequestError, SpeechRequest, language_code
from kcc.speech.serve.request import ApiError, parse_speech
from kcc.speech.serve.request import SpeechRequest as Served

from test_say import FakeSynth, LetterG2P

# (field, value): one out-of-range or wrong-kind value per refusal class of each field.
BAD = [("speed", 9), ("speed", 0.1), ("speed", "fast"), ("seed", -1), ("seed", MAX_SEED + 1), ("seed", 1.5),
       ("lang", "xx"), ("lang", "klingon")]


def message(field, value) -> str:
    with pytest.raises(RequestError) as err:
        SpeechRequest.build("Hello there.", **{field: value})
    assert err.value.field == field
    return err.value.message


@pytest.mark.parametrize("field, value", BAD)
def test_the_python_api_refuses_with_the_declared_message(field, value, monkeypatch):
    monkeypatch.setattr(kcc.api.loader, "load", lambda *a, **k: FakeSynth())
    want = message(field, value)
    with kcc.Kokoro() as tts:
        with pytest.raises(RequestError, match=re.escape(want)):
            tts.create("Hello there.", **{field: value})
        with pytest.raises(RequestError) as err:
            tts.stream("Hello there.", **{field: value})
        assert err.value.message == want


@pytest.mark.parametrize("field, value", BAD)
def test_kcc_say_refuses_with_the_declared_message(field, value, tmp_path, capsys):
    want = message(field, value)
    assert kcc_main(["say", "Hello there.", "-o", str(tmp_path / "x.wav"), f"--{field}", str(value)]) == 2
    assert f"Error: {want}\n" in capsys.readouterr().err
    assert not (tmp_path / "x.wav").exists()


@pytest.mark.parametrize("field, value", [b for b in BAD if not isinstance(b[1], str) or b[0] == "lang"])
def test_the_server_refuses_with_the_declared_message_naming_its_key(field, value):
    want = message(field, value)
    key = FIELDS[field].key
    with pytest.raises(ApiError) as err:
        parse_speech(f'{{"input": "Hello there.", "{key}": {value!r}}}'.replace("'", '"').encode())
    assert (err.value.status, err.value.message, err.value.param) == (400, want, key)


@pytest.mark.parametrize("field, value", BAD)
def test_a_manifest_row_is_refused_with_the_declared_message(field, value):
    want = message(field, value)
    got = make_item({"id": "a", "text": "Hello there.", FIELDS[field].column: value}, 1, Defaults())
    assert got.reason == want and got.line == 1


def test_wyoming_builds_the_same_request():
    req = Served.build("こんにちは。", voice=None, format="pcm", stream=True)
    assert (req.lang, req.voice, req.response_format, req.stream, req.speed, req.seed) == ("auto", None, "pcm", True, 1.0, 0)


@pytest.mark.parametrize("spelling, code", [("a", "en-us"), ("en", "en-us"), ("en-us", "en-us"), ("EN-US", "en-us"),
                                            ("en_US", "en-us"), ("b", "en-gb"), ("en-GB", "en-gb"), ("j", "ja"),
                                            ("ja-JP", "ja"), ("fr", "fr-fr"), ("pt", "pt-br"), ("z", "zh"),
                                            ("auto", "auto"), (None, "auto")])
def test_every_spelling_of_a_language_the_readme_lists(spelling, code):
    assert language_code(spelling) == code
    assert SpeechRequest.build("Hi.", lang=spelling).lang == code


def test_every_listed_spelling_is_accepted_by_say_server_and_batch(tmp_path):
    for spelling in LANGUAGE_SPELLINGS:
        code = language_code(spelling)
        assert code == "auto" or code in LANGUAGES
        assert parse_speech(f'{{"input": "Hi.", "lang_code": "{spelling}"}}'.encode()).lang == code
        assert make_item({"id": "a", "text": "Hi.", "lang": spelling}, 1, Defaults()).lang == code


def test_the_manifest_columns_and_cli_options_come_from_the_declarations():
    assert COLUMNS == ("id", "text", "phonemes", "voice", "lang", "speed", "seed", "format")
    assert {f.column for f in FIELDS.values() if f.column} <= set(COLUMNS)



@pytest.mark.parametrize("command, names", [("say", ("voice", "lang", "speed", "seed", "format")),
                                            ("synth", ("voice", "speed", "seed")), ("book", ("voice", "speed", "seed")),
                                            ("batch", ("voice", "speed", "seed", "max_chars")), ("serve", ("voice", "max_chars"))])
def test_cli_options_are_the_declarations(command, names, capsys):
    with pytest.raises(SystemExit):
        kcc_main([command, "--help"])
    shown = "".join(capsys.readouterr().out.split())            # argparse wraps lines (and at hyphens)
    for name in names:
        assert FIELDS[name].flag in shown and "".join(FIELDS[name].help.split()) in shown, name


def test_a_door_field_keeps_its_own_default():
    assert Served.build("Hi.").stream is True and SpeechRequest.build("Hi.").stream is False
    with pytest.raises(TypeError, match="unknown request field"):
        SpeechRequest.build("Hi.", volume=2.0)


@pytest.mark.parametrize("text, why", [("", "text is empty"), ("   ", "text is empty"), (5, "text must be a string")])
def test_text_refusals(text, why):
    with pytest.raises(RequestError, match=why):
        SpeechRequest.build(text)
    with pytest.raises(RequestError, match="text has 6 characters; the limit is 5"):
        SpeechRequest.build("Hello!", max_chars=5)


HELP_PROBE = """
import sys
from kcc.cli import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
heavy = sorted(m for m in sys.modules if m.startswith(("kcc.compiler", "kcc.model.loader", "kcc.model.pipeline",
                                                        "kcc.speech.engine", "kcc.speech.g2p.g2p", "kcc.speech.g2p.en",
                                                        "kcc.speech.g2p.ja", "kcc.speech.g2p.intl", "misaki", "spacy")))
print("HEAVY", heavy)
"""


@pytest.mark.parametrize("argv", [["--help"], ["say", "--help"], ["synth", "--help"], ["serve", "--help"],
                                  ["wyoming", "--help"], ["batch", "--help"], ["book", "--help"]])
def test_help_imports_neither_the_compiler_nor_the_g2p(argv):
    out = subprocess.run([sys.executable, "-c", HELP_PROBE, *argv], capture_output=True, text=True, check=True).stdout
    assert "HEAVY []" in out, out[-400:]


@pytest.mark.parametrize("spelling, code", [("a", "en-us"), ("en", "en-us"), ("en-US", "en-us"), ("b", "en-gb"),
                                            ("j", "ja"), ("auto", "auto")])
def test_kcc_say_takes_every_spelling_of_lang(spelling, code, tmp_path, monkeypatch, capsys):
    """`kcc say --lang a` was refused though the README lists it: the G2P now gets the code."""
    asked = []
    monkeypatch.setattr(say_mod, "load_synthesizer", lambda *a, **k: FakeSynth())
    monkeypatch.setattr(say_mod, "G2P", lambda lang, backend, **kw: asked.append(lang) or LetterG2P())
    voice = str(tmp_path / "v.npy")
    np.save(voice, random_voice(0))
    assert kcc_main(["say", "Hello there.", "-o", str(tmp_path / "x.wav"), "--lang", spelling, "--voice", voice]) == 0
    assert asked == [code] and (tmp_path / "x.wav").stat().st_size > 44
