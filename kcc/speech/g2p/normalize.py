"""English text normalisation before G2P: the forms a lexicon or espeak-ng would otherwise read
as symbols, letter names or digit strings.

espeak-ng reads "1,234" as "one, two hundred thirty-four" (the comma is phonemised), "3.14" as
"three. fourteen", "12/25/2024" as "twelve slash twenty-five slash ..." and "vs." as the letters
V S; misaki's lexicon reads "$1,234.56" and "3.14" well but dates and "e.g." not. Each rule here
rewrites one kind of span into words or plain digits that both G2P backends read the same way;
everything else is left exactly as it was. Plain integers and ordinals ("123", "3rd", "1999": a
year to misaki, a count to espeak) and "%", which both backends read acceptably, are left alone.
For misaki's lexicon (normalize(..., lexicon=True)) money, decimals and thousands groups are left
to misaki, which reads them as upstream does. Digit strings no cardinal fits are read for both:
comma runs that are not thousands groups as lists, phone numbers and leading zeros digit by
digit, numbers past the quadrillions digit by digit (num2words overflows on them).
"""
from __future__ import annotations

import re
import unicodedata
from typing import Callable


def num2words(*args, **kwargs) -> str:
    """num2words.num2words, imported on first use: the import costs ~30 ms of a warm `kcc say`,
    and most sentences have no number. misaki.en is given this one too (kcc.speech.g2p.en)."""
    from num2words import num2words as spell
    return spell(*args, **kwargs)


MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September",
          "October", "November", "December")

# (abbreviation, expansion, can end a sentence). A title ("Dr.") is always followed by a name,
# so its period never ends a sentence; "etc." before a capital or the end of the text does.
ABBREVIATIONS = [
    ("e.g.", "for example", False), ("i.e.", "that is", False), ("etc.", "et cetera", True),
    ("vs.", "versus", False), ("vs", "versus", False), ("approx.", "approximately", True),
    ("Mr.", "Mister", False), ("Mrs.", "Missus", False), ("Ms.", "Miz", False), ("Dr.", "Doctor", False),
    ("Prof.", "Professor", False), ("St.", "Saint", False), ("Mt.", "Mount", False),
    ("Jr.", "Junior", True), ("Sr.", "Senior", True), ("Ltd.", "Limited", True), ("Inc.", "Incorporated", True),
    *((m[:3] + ".", m, False) for m in MONTHS if len(m) > 4),
]
CURRENCY = {"$": ("dollar", "dollars", "cent", "cents"), "£": ("pound", "pounds", "penny", "pence"),
            "€": ("euro", "euros", "cent", "cents")}
SCALES = ("thousand", "million", "billion", "trillion")


def _cardinal(digits: str) -> str:
    """A grouped number ("1,234") in words: espeak-ng phonemises the comma and misaki reads
    four digits without it as a year, so neither form can be handed on."""
    # "twenty three", not "twenty-three": misaki reads a hyphenated number as one word, with one stress
    return num2words(int(digits.replace(",", ""))).replace(",", "").replace(" and ", " ").replace("-", " ")


def _year(y: str) -> str:
    """'2024' as a year; a two-digit year as said ("ninety-nine", "oh five"), no century guessed."""
    if len(y) == 4:
        return num2words(int(y), to="year")
    return f"oh {num2words(int(y))}" if y[0] == "0" else num2words(int(y))


def _date(month: int, day: int, year: str) -> str | None:
    if not (1 <= month <= 12 and 1 <= day <= 31):
        return None
    return f"{MONTHS[month - 1]} {num2words(day, to='ordinal')}, {_year(year)}"


def _slash_date(british: bool) -> Callable[[re.Match], str]:
    def fn(m: re.Match) -> str:
        a, b, year = int(m[1]), int(m[2]), m[3]
        month, day = (b, a) if british else (a, b)
        if month > 12 >= day:                      # 25/12/2024 in American text: unambiguous
            month, day = day, month
        return _date(month, day, year) or m[0]
    return fn


def _iso_date(m: re.Match) -> str:
    return _date(int(m[2]), int(m[3]), m[1]) or m[0]


def _time(m: re.Match) -> str:
    hour, minute, half = int(m[1]), m[2], (m[3] or "").replace(".", "").replace(" ", "").upper()
    if hour > 24 or int(minute) > 59:
        return m[0]
    spoken = f"{hour} o'clock" if minute == "00" and not half else (
        f"{hour}" if minute == "00" else f"{hour} oh {int(minute)}" if minute[0] == "0" else f"{hour} {minute}")
    return f"{spoken} {half}" if half else spoken


def _money(m: re.Match) -> str:
    one, many, sub_one, sub_many = CURRENCY[m[1]]
    whole, cents, scale = m[2], m[3], m[4]
    if scale:                                       # "$5 million", "$2.5 billion"
        amount = (_cardinal(whole) if "," in whole else whole) + (f" point {' '.join(cents)}" if cents else "")
        return f"{amount} {scale} {many}"
    if cents and len(cents) == 1:
        cents += "0"
    parts = []
    n = int(whole.replace(",", ""))
    if n or not cents or not int(cents):
        parts.append(f"{_cardinal(whole) if n > 999 else n} {one if n == 1 else many}")
    if cents and int(cents):
        parts.append(f"{int(cents)} {sub_one if int(cents) == 1 else sub_many}")
    return " and ".join(parts)


def _decimal(m: re.Match) -> str:
    whole = _cardinal(m[1]) if "," in m[1] else m[1]
    return (f"{whole} " if whole else "") + "point " + " ".join(m[2])


def _abbreviation(m: re.Match) -> str:
    word, expansion, ends = _ABBREV[m[1]]
    after = m.string[m.end():]
    if word == "St." and re.search(r"[A-Z]\w*\s+$", m.string[:m.start()]) and not re.match(r"\s+[A-Z]", after):
        return "Street" + ("" if after else ".")    # "Main St." (a name before, none after); else "St. Louis"
    if ends and (not after or re.match(r"\s+[A-Z]", after)):
        return expansion + "."
    return expansion


_ABBREV = {a: (a, e, ends) for a, e, ends in ABBREVIATIONS}
_ABBREV_RE = re.compile(r"(?<![\w.])(" + "|".join(re.escape(a) for a in sorted(_ABBREV, key=len, reverse=True))
                        + r")(?![\w])")
_MONEY_RE = re.compile(r"([$£€])\s?(\d{1,3}(?:,\d{3})+|\d+)(?:\.(\d{1,2}))?(?!\d)(?:\s(" + "|".join(SCALES) + r")\b)?")
_THOUSANDS_RE = re.compile(r"(?<![\d.,])(\d{1,3}(?:,\d{3})+)(?![\d,]|\.\d)")
_DECIMAL_RE = re.compile(r"(?<![\d.,])(\d{1,3}(?:,\d{3})+|\d*)\.(\d+)(?!\d|\.\d)")
# "p.m." keeps its last period where it also ends the sentence (end of text, or a capital next).
_TIME_RE = re.compile(r"(?<![\d:])(\d{1,2}):(\d{2})(?![\d:])(\s?[AaPp]\.?[Mm](?:\.(?!\s*$|\s+[A-Z]))?(?![\w]))?")
_SLASH_DATE_RE = re.compile(r"(?<![\d/])(\d{1,2})/(\d{1,2})/(\d{4}|\d{2})(?![\d/])")
_ISO_DATE_RE = re.compile(r"(?<![\d-])(\d{4})-(\d{2})-(\d{2})(?![\d-])")


def fold_rare_diacritics(text: str) -> str:
    """Latin letters past Latin Extended-A ("ễ" in "Nguyễn") as their base letters: espeak-ng's
    English voice reads an unknown one as "letter" plus its code point in digits. Latin-1 and
    Extended-A letters ("café", "Dvořák", "Gdańsk") it reads as letters, so they stay."""
    out = []
    for c in text:
        if ord(c) > 0x17F and c.isalpha() and unicodedata.name(c, "").startswith("LATIN"):
            c = "".join(b for b in unicodedata.normalize("NFKD", c) if not unicodedata.combining(b))
        out.append(c)
    return "".join(out)


# A number past the quadrillions is read digit by digit: nobody says it as a cardinal, and
# num2words (inside misaki) overflows on a few hundred digits (found by fuzz/fuzz_text.py).
_LONG_NUMBER_RE = re.compile(r"(?<![\d,])\d{1,3}(?:,\d{3}){5,}(?![\d,])|(?<!\d)\d{16,}(?!\d)")
# Digits joined by commas that are not thousands groups (a first group of 1-3 digits, then
# groups of exactly 3): a list, "1,2,3" -> "1, 2, 3" ("Press 1,2,3"; misaki drops the commas and
# reads one number, "1,1,1,..." one that overflows).
_COMMA_RUN_RE = re.compile(r"(?<![\d,.])\d+(?:,\d+)+(?:\.\d+)?(?!\d|[.,]\d)")
_GROUPED_RE = re.compile(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?")
# Phone-number shapes (555-0143, 800-555-0199, (555) 123-4567, +1 555 123 4567 with dashes or
# dots) and other digit strings with a leading zero ("007", "0143"): said digit by digit, a
# pause between groups; a cardinal would lose the zeros.
_PHONE_RE = re.compile(r"(?<![\w.,-])(?:\+\d{1,3}[ .-]?)?(?:\(\d{3}\) ?|\d{3}[.-])?\d{3}[.-]\d{4}(?![\w-]|[.,]\d)")
_LEADING_ZERO_RE = re.compile(r"(?<![\d.,])0\d+(?![\d]|[.,]\d)")


def _digit_by_digit(m: re.Match) -> str:
    return " ".join(c for c in m[0] if c.isdigit())


def _comma_list(m: re.Match) -> str:
    return m[0] if _GROUPED_RE.fullmatch(m[0]) else ", ".join(m[0].split(","))


def _phone(m: re.Match) -> str:
    groups = re.findall(r"\d+", m[0])
    return ", ".join(" ".join(g) for g in groups)


def _numbers_as_said(text: str) -> str:
    """The digit strings no cardinal reading fits: lists, phone numbers, leading zeros, huge numbers."""
    text = _LONG_NUMBER_RE.sub(_digit_by_digit, text)
    text = _COMMA_RUN_RE.sub(_comma_list, text)
    text = _PHONE_RE.sub(_phone, text)
    return _LEADING_ZERO_RE.sub(_digit_by_digit, text)


# Abbreviations misaki's gold lexicon reads itself (upstream's readings: "Mrs." is 'mˈɪsɪz').
LEXICON_ABBREVIATIONS = frozenset(("etc.", "Mr.", "Mrs.", "Ms.", "Dr."))


def normalize(text: str, british: bool = False, lexicon: bool = False) -> str:
    """English text with dates, times, money, decimals, thousands separators and common
    abbreviations spelled the way they are spoken (see the module doc).

    lexicon: the text goes to misaki's lexicon pipeline, which reads money, decimals, grouped
    thousands and a few abbreviations itself, as upstream does ("2.5" with an unstressed
    "point"); those are left to it. espeak-ng needs them all spelled."""
    text = fold_rare_diacritics(text)
    text = _SLASH_DATE_RE.sub(_slash_date(british), text)
    text = _ISO_DATE_RE.sub(_iso_date, text)
    text = _TIME_RE.sub(_time, text)
    text = _numbers_as_said(text)
    if lexicon:
        text = _MONEY_RE.sub(lambda m: _money(m) if m[4] else m[0], text)
        return _ABBREV_RE.sub(lambda m: m[0] if m[1] in LEXICON_ABBREVIATIONS else _abbreviation(m), text)
    text = _MONEY_RE.sub(_money, text)
    text = _DECIMAL_RE.sub(_decimal, text)
    text = _THOUSANDS_RE.sub(lambda m: _cardinal(m[1]), text)
    text = _ABBREV_RE.sub(_abbreviation, text)
    return text
