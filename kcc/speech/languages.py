"""The languages kcc speaks: one table, read by the CLI's --lang, the G2P, the voices, the server
and Wyoming.

Each row is one of upstream KPipeline's lang_codes for Kokoro-82M v1.0: its code, its voice
letter (the first letter of a voice name: 'bm_george' is British English, upstream's VOICES.md),
the other spellings accepted for it, the voice spoken when none is asked for (upstream's own
default for the language, a voice of the official set), its name, and the BCP 47 tag Home
Assistant matches languages by.
"""
from __future__ import annotations

from dataclasses import dataclass

from kcc.speech.g2p.scripts import detect_language


@dataclass(frozen=True)
class Language:
    code: str
    letter: str                      # upstream's lang_code letter, also its voices' first letter
    aliases: tuple[str, ...]
    default_voice: str
    name: str
    tag: str                         # BCP 47


LANGUAGES: dict[str, Language] = {lang.code: lang for lang in (
    Language("en-us", "a", ("en",), "af_heart", "American English", "en-US"),
    Language("en-gb", "b", (), "bf_emma", "British English", "en-GB"),
    Language("ja", "j", (), "jf_alpha", "Japanese", "ja-JP"),
    Language("es", "e", (), "ef_dora", "Spanish", "es-ES"),
    Language("fr-fr", "f", ("fr",), "ff_siwis", "French", "fr-FR"),
    Language("hi", "h", (), "hf_alpha", "Hindi", "hi-IN"),
    Language("it", "i", (), "if_sara", "Italian", "it-IT"),
    Language("pt-br", "p", ("pt",), "pf_dora", "Brazilian Portuguese", "pt-BR"),
    Language("zh", "z", (), "zf_xiaobei", "Mandarin Chinese", "zh-CN"),
)}
LANGUAGE_CHOICES = ("auto", *LANGUAGES)
# One-letter codes and short forms -> code.
ALIASES = {alias: lang.code for lang in LANGUAGES.values() for alias in (lang.letter, *lang.aliases)}
_BY_LETTER = {lang.letter: lang.code for lang in LANGUAGES.values()}
_GENDER_OF = {"f": "female", "m": "male"}
# Text with no language detected (and no voice naming one) is read as this.
DEFAULT_LANGUAGE = "en-us"


def voice_language(name: str) -> str:
    """The language a voice name says ('bm_george' -> 'en-gb'); '' when it says none."""
    return _BY_LETTER.get(name[:1], "") if len(name) > 3 and name[2] == "_" and name[1] in _GENDER_OF else ""


def voice_gender(name: str) -> str:
    return _GENDER_OF[name[1]] if voice_language(name) else ""


def default_voice(language: str) -> str:
    """Upstream's voice for `language` (a code or an alias); the default language's for '' or 'auto'."""
    code = ALIASES.get(language, language) if language and language != "auto" else DEFAULT_LANGUAGE
    return LANGUAGES[code].default_voice if code in LANGUAGES else LANGUAGES[DEFAULT_LANGUAGE].default_voice


def from_tag(tag: str) -> str:
    """A language as clients write it ('en-GB', 'en_US', 'ja-JP', 'fr', 'b') -> its code; '' if none.
    A tag with an unknown region falls back to its language's first row ('en-AU' -> 'en-us')."""
    t = str(tag).strip().lower().replace("_", "-")
    for lang in LANGUAGES.values():
        if t in (lang.code, lang.tag.lower()):
            return lang.code
    if t in ALIASES:
        return ALIASES[t]
    base = t.split("-")[0]
    return next((lang.code for lang in LANGUAGES.values() if lang.tag.lower().split("-")[0] == base), "")


# Voices of these languages are asked to read Latin-script text too (Kokoro's Japanese voices
# speak English well), so for them the text's script decides, not the voice.
NON_LATIN = frozenset({"ja", "zh", "hi"})


def pick_language(text: str, voice_language: str, default: str) -> str:
    """No language asked for: kana / Han / Devanagari in the text pick ja / zh / hi; Latin text is
    read in the voice's language (es for an es voice), or `default` for a voice of a non-Latin
    language or none."""
    fallback = voice_language if voice_language and voice_language not in NON_LATIN else default
    return detect_language(text, fallback)
