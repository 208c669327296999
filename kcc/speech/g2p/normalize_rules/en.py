"""English (en-us, en-gb): what a careful narrator says for what people write, one Rule per kind
of span, in the order they run (kcc.speech.g2p.normalize). Cases are checked on kcc's default
reader (misaki's lexicon) unless a rule serves espeak-ng only; the replacement words are the ones
both readers say right (digits are left as digits where misaki and espeak-ng read them alike).

Why each reader needs them: espeak-ng reads "1,234" as "one, two hundred thirty-four", "3.14" as
"three. fourteen", "12/25/2024" with "slash"; misaki reads "3/4" as "three four", "kg" and "km/h"
as letters, "Henry VIII" as letters, URLs without "dot", "15 March" as "fifteen March".
"""
from __future__ import annotations

import re
import unicodedata

from dataclasses import replace

from kcc.speech.g2p.normalize_rules.base import DIGITS, ESPEAK, Context, Pattern, Rule, num2words, words

MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September",
          "October", "November", "December")
_MONTH_RE = "|".join(MONTHS)
CURRENCY = {"$": ("dollar", "dollars", "cent", "cents"), "£": ("pound", "pounds", "penny", "pence"),
            "€": ("euro", "euros", "cent", "cents"), "¥": ("yen", "yen", "sen", "sen"),
            "₹": ("rupee", "rupees", "paisa", "paise")}
SCALES = ("thousand", "million", "billion", "trillion")
_SCALE_LETTERS = {"k": "thousand", "K": "thousand", "m": "million", "M": "million", "bn": "billion",
                  "B": "billion", "tn": "trillion", "T": "trillion"}


# --- helpers -------------------------------------------------------------------------------------

def _cardinal(digits: str) -> str:
    """A grouped number ("1,234") in words: espeak-ng phonemises the comma and misaki reads
    four digits without it as a year, so neither form can be handed on."""
    return words(int(digits.replace(",", "")))


def _year(y: str) -> str:
    """'2024' as a year; a two-digit year as said ("ninety-nine", "oh five"), no century guessed."""
    if len(y) == 4:
        return words(int(y), to="year")
    return f"oh {words(int(y))}" if y[0] == "0" else words(int(y))


def _date(month: int, day: int, year: str | None, british: bool = False) -> str | None:
    if not (1 <= month <= 12 and 1 <= day <= 31):
        return None
    if british:
        spoken = f"the {words(day, to='ordinal')} of {MONTHS[month - 1]}"
    else:
        spoken = f"{MONTHS[month - 1]} {words(day, to='ordinal')}"
    return f"{spoken}, {_year(year)}" if year else spoken


def _sub(pattern: str, flags: int = 0) -> Pattern:
    return Pattern(pattern, flags)


# --- characters: diacritics, apostrophes, quotes -----------------------------------------------------

def fold_rare_diacritics(text: str) -> str:
    """Latin letters past Latin Extended-A ("ễ" in "Nguyễn") as their base letters: espeak-ng's
    English voice reads an unknown one as "letter" plus its code point in digits. Latin-1 and
    Extended-A letters ("café", "Dvořák", "Gdańsk") it reads as letters, so they stay."""
    return _RARE_LATIN.sub(lambda m: _fold(m, None), text)


def _fold(m: re.Match, ctx) -> str:
    c = m[0]
    if not unicodedata.name(c, "").startswith("LATIN"):
        return c
    return "".join(b for b in unicodedata.normalize("NFKD", c) if not unicodedata.combining(b))


_RARE_LATIN = re.compile(r"[^\W\d_\u0000-\u017f]")


def _plural_possessive(m: re.Match, ctx) -> str:
    """"the Joneses’ car": the apostrophe after a plural is silent (the plural says it); left in,
    misaki takes it for a closing quote. Kept where a quote opened with the same mark is still open."""
    before = m.string[:m.start()]
    if m[2] == "’" and before.count("‘") > before.count("’"):
        return m[0]
    if m[2] == "'" and len(re.findall(r"(?:^|\s)'(?=\w)", before)) % 2 == 1:
        return m[0]
    return m[1]


def _curly_apostrophe(m: re.Match, ctx) -> str:
    return "'"


# --- web: URLs, e-mail, file names, versions ------------------------------------------------------------

_SAY_SYMBOL = {".": " dot ", "/": " slash ", "-": " dash ", "_": " underscore ", "@": " at ", ":": " colon ",
               "?": " question mark ", "=": " equals ", "&": " and ", "#": " hash ", "~": " tilde ", "+": " plus "}
# Extensions said as a word; the rest letter by letter.
_SAID_EXTENSIONS = {"com": "com", "org": "org", "net": "net", "gov": "gov", "edu": "edu", "info": "info",
                    "json": "jason", "gif": "gif", "jpeg": "jay peg", "exe": "E X E", "io": "I O", "ai": "A I"}


def _spell(part: str) -> str:
    """A piece of an address: a word if it has a vowel and is not a short run of consonants,
    else its letters ("www" -> "W W W", "txt" -> "T X T")."""
    low = part.lower()
    if low in _SAID_EXTENSIONS:
        return _SAID_EXTENSIONS[low]
    if low == "www" or (len(part) <= 4 and not re.search(r"[aeiouy]", low)) or (len(part) <= 3 and part.isupper()):
        return " ".join(part.upper())
    return part


def _address(text: str) -> str:
    out = []
    for piece in re.split(r"([./\-_@:?=&#~+])", text):
        if piece in _SAY_SYMBOL:
            out.append(_SAY_SYMBOL[piece])
        elif piece:
            out.append(_spell(piece) if piece.isalpha() else piece)
    return re.sub(r"\s+", " ", "".join(out)).strip()


def _url(m: re.Match, ctx) -> str:
    url = m[0]
    trail = ""
    while url and url[-1] in ".,;:!?)":
        trail, url = url[-1] + trail, url[:-1]
    url = re.sub(r"^[a-z]+://", "", url, flags=re.I).rstrip("/")
    return _address(url) + trail


def _email(m: re.Match, ctx) -> str:
    return _address(m[0])


def _file_name(m: re.Match, ctx) -> str:
    return f"{m[1]} dot {_spell(m[2])}"


def _version(m: re.Match, ctx) -> str:
    prefix = "version " if m[1] else ""
    return prefix + " point ".join(m[2].split("."))


# --- dates, times ---------------------------------------------------------------------------------------

def _slash_date(m: re.Match, ctx: Context) -> str:
    a, b, year = int(m[1]), int(m[2]), m[3]
    month, day = (b, a) if ctx.british else (a, b)
    if month > 12 >= day:                      # 25/12/2024 in American text: unambiguous
        month, day = day, month
    return _date(month, day, year) or m[0]


def _iso_date(m: re.Match, ctx) -> str:
    return _date(int(m[2]), int(m[3]), m[1]) or m[0]


def _month_day(m: re.Match, ctx) -> str:
    """"March 5, 2024" -> "March fifth, twenty twenty-four"; "March 5" -> "March fifth"."""
    return _date(MONTHS.index(m[1]) + 1, int(m[2]), m[3]) or m[0]


def _day_month(m: re.Match, ctx) -> str:
    """"5 March 2024" -> "the fifth of March, twenty twenty-four" ("the" once after "the")."""
    spoken = _date(MONTHS.index(m[2]) + 1, int(m[1]), m[3], british=True)
    if spoken and re.search(r"\bthe\s+$", m.string[:m.start()], re.I):
        spoken = spoken[4:]
    return spoken or m[0]


def _decade(m: re.Match, ctx) -> str:
    """"the 1990s" -> "the nineteen nineties", "the '80s" -> "the eighties"."""
    if m[1]:
        year = words(int(m[1]), to="year")
        last = year.rsplit(" ", 1)
        plural = _plural_tens(last[-1])
        return (last[0] + " " + plural) if len(last) == 2 else plural
    return _plural_tens(words(int(m[2])))


def _plural_tens(word: str) -> str:
    return word[:-1] + "ies" if word.endswith("y") else word + "s"


def _clock(hour: int, minute: str, half: str) -> str:
    spoken = f"{hour} o'clock" if minute == "00" and not half else (
        f"{hour}" if minute == "00" else f"{hour} oh {int(minute)}" if minute[0] == "0" else f"{hour} {minute}")
    return f"{spoken} {half}" if half else spoken


def _half(text: str | None) -> str:
    return (text or "").replace(".", "").replace(" ", "").upper()


def _time(m: re.Match, ctx) -> str:
    hour, minute, half = int(m[1]), m[2], _half(m[3])
    if hour > 24 or int(minute) > 59:
        return m[0]
    return _clock(hour, minute, half)


def _time_range(m: re.Match, ctx) -> str:
    """"9:00-17:30", "9-5 pm": a range of times is read "to"."""
    return f"{m[1]} to {m[2]}"


# --- numbers ------------------------------------------------------------------------------------------------

def _digit_by_digit(m: re.Match, ctx) -> str:
    return " ".join(c for c in m[0] if c.isdigit())


def _comma_list(m: re.Match, ctx) -> str:
    return m[0] if _GROUPED_RE.fullmatch(m[0]) else ", ".join(m[0].split(","))


def _phone(m: re.Match, ctx: Context) -> str:
    """Every digit, a pause between groups; zero is "oh" in British reading, "zero" in American
    (both say "oh" often; "zero" is never wrong there, "oh" is the British habit)."""
    groups = re.findall(r"\d+", m[0])
    spoken = ", ".join(" ".join(g) for g in groups)
    return re.sub(r"\b0\b", "oh", spoken) if ctx.british else spoken


_DENOMINATORS = {2: ("half", "halves"), 4: ("quarter", "quarters")}
# Slash pairs that are names, not fractions.
_NOT_FRACTIONS = {"24/7": "twenty four seven", "9/11": "nine eleven", "50/50": "fifty fifty"}


# After these a slash pair is a score, not a part: "4/5 stars" is "four out of five".
_OUT_OF_WORDS = frozenset("stars points marks people dentists doctors voters users respondents games times".split())


def _fraction(m: re.Match, ctx) -> str:
    if m[3] in _NOT_FRACTIONS:
        return m[0].replace(m[3], _NOT_FRACTIONS[m[3]])
    num, den = int(m[4]), int(m[5])
    if den < 2 or den > 100 or num > 99:
        return m[0]
    after = re.match(r"\s+([a-z]+)", m.string[m.end():])
    if not m[2] and (num >= den or after and after[1] in _OUT_OF_WORDS):
        return f"{m[1]}{words(num)} out of {words(den)}"          # "5/5", "9/10 dentists", "4/5 stars"
    one, many = _DENOMINATORS.get(den) or (num2words(den, to="ordinal"), num2words(den, to="ordinal") + "s")
    part = f"{words(num)} {one if num == 1 else many}"
    if m[2]:                                   # "1 1/2" -> "one and a half"
        part = f"{words(int(m[2]))} and {'a' if num == 1 else words(num)} {one if num == 1 else many}"
    return m[1] + part


def _negative(m: re.Match, ctx) -> str:
    return f"{m[1]}minus {m[2]}"


def _percent(m: re.Match, ctx) -> str:
    return f"{m[1]} percent"


def _ordinal(m: re.Match, ctx) -> str:
    return words(int(m[1]), to="ordinal")


def _year_rule(m: re.Match, ctx) -> str:
    return f"{m[1]} {words(int(m[2]), to='year')}"


def _money(m: re.Match, ctx: Context) -> str:
    one, many, sub_one, sub_many = CURRENCY[m[1]]
    whole, cents, scale = m[2], m[3], m[4] or _SCALE_LETTERS.get(m[5] or "")
    if scale:                                       # "$5 million", "$2.5bn"
        amount = (_cardinal(whole) if "," in whole else whole) + (f" point {' '.join(cents)}" if cents else "")
        return f"{amount} {scale} {many}"
    if ctx.lexicon:
        return m[0]                                 # misaki reads plain amounts as upstream does
    if cents and len(cents) == 1:
        cents += "0"
    parts = []
    n = int(whole.replace(",", ""))
    if n or not cents or not int(cents):
        parts.append(f"{_cardinal(whole) if n > 999 else n} {one if n == 1 else many}")
    if cents and int(cents):
        parts.append(f"{int(cents)} {sub_one if int(cents) == 1 else sub_many}")
    return " and ".join(parts)


def _decimal(m: re.Match, ctx) -> str:
    whole = _cardinal(m[1]) if "," in m[1] else m[1]
    return (f"{whole} " if whole else "") + "point " + " ".join(m[2])


def _thousands(m: re.Match, ctx) -> str:
    return _cardinal(m[1])


# --- units ------------------------------------------------------------------------------------------------------

# symbol -> (singular, plural). Only after a number: "5 m" is metres, "m" alone a letter.
UNITS = {
    "km/h": ("kilometre per hour", "kilometres per hour"), "kph": ("kilometre per hour", "kilometres per hour"),
    "mph": ("mile per hour", "miles per hour"), "m/s": ("metre per second", "metres per second"),
    "km": ("kilometre", "kilometres"), "cm": ("centimetre", "centimetres"), "mm": ("millimetre", "millimetres"),
    "m": ("metre", "metres"), "nm": ("nanometre", "nanometres"), "µm": ("micrometre", "micrometres"),
    "kg": ("kilogram", "kilograms"), "g": ("gram", "grams"), "mg": ("milligram", "milligrams"),
    "lb": ("pound", "pounds"), "lbs": ("pound", "pounds"), "oz": ("ounce", "ounces"),
    "ft": ("foot", "feet"), "mi": ("mile", "miles"), "yd": ("yard", "yards"),
    "L": ("litre", "litres"), "l": ("litre", "litres"), "ml": ("millilitre", "millilitres"),
    "mL": ("millilitre", "millilitres"), "gal": ("gallon", "gallons"),
    "°C": ("degree Celsius", "degrees Celsius"), "°F": ("degree Fahrenheit", "degrees Fahrenheit"),
    "℃": ("degree Celsius", "degrees Celsius"), "℉": ("degree Fahrenheit", "degrees Fahrenheit"),
    "°": ("degree", "degrees"),
    "kB": ("kilobyte", "kilobytes"), "KB": ("kilobyte", "kilobytes"), "MB": ("megabyte", "megabytes"),
    "GB": ("gigabyte", "gigabytes"), "TB": ("terabyte", "terabytes"), "kb": ("kilobit", "kilobits"),
    "Mb": ("megabit", "megabits"), "Gb": ("gigabit", "gigabits"), "Mbps": ("megabit per second", "megabits per second"),
    "Gbps": ("gigabit per second", "gigabits per second"),
    "Hz": ("hertz", "hertz"), "kHz": ("kilohertz", "kilohertz"), "MHz": ("megahertz", "megahertz"),
    "GHz": ("gigahertz", "gigahertz"), "W": ("watt", "watts"), "kW": ("kilowatt", "kilowatts"),
    "kWh": ("kilowatt hour", "kilowatt hours"), "V": ("volt", "volts"), "mAh": ("milliamp hour", "milliamp hours"),
    "ms": ("millisecond", "milliseconds"), "sec": ("second", "seconds"),
    "min": ("minute", "minutes"), "h": ("hour", "hours"), "hr": ("hour", "hours"), "hrs": ("hour", "hours"),
}
_AMERICAN = {"metre": "meter", "litre": "liter"}


def _unit(m: re.Match, ctx: Context) -> str:
    one, many = UNITS[m[2]]
    spoken = one if m[1].replace(",", "") in ("1", "1.0") else many
    if not ctx.british:
        for gb, us in _AMERICAN.items():
            spoken = spoken.replace(gb, us)
    return f"{m[1]} {spoken}"


_UNIT_RE = _sub(r"(?<![\w.,$£€¥₹])(\d+(?:[.,]\d+)*)\s?(" + "|".join(re.escape(u) for u in sorted(UNITS, key=len, reverse=True))
                + r")(?![\w/°])")


# --- roman numerals ------------------------------------------------------------------------------------------

_ROMAN = {"M": 1000, "CM": 900, "D": 500, "CD": 400, "C": 100, "XC": 90, "L": 50, "XL": 40, "X": 10, "IX": 9,
          "V": 5, "IV": 4, "I": 1}
_ROMAN_RE = r"(?=[MDCLXVI])M{0,3}(?:CM|CD|D?C{0,3})(?:XC|XL|L?X{0,3})(?:IX|IV|V?I{0,3})"
# Names monarchs and popes reign under: "Henry VIII" is "Henry the Eighth"; any other name before
# a numeral ("Rocky II", "World War II") takes the chapter reading below or none.
REGNAL_NAMES = ("Henry Edward George William Elizabeth Charles James Richard Mary Louis Philip Frederick "
                "Alexander Nicholas Peter Catherine Ivan Leo Pius Benedict Gregory Innocent Clement Urban "
                "John Paul Boniface Alfonso Ferdinand Wilhelm Constantine Gustav Olaf Haakon Christian "
                "Frederik Harald Felipe Juan Carlos Ramesses Ptolemy Napoleon Victor Umberto Ludwig Otto "
                "Rudolf Sixtus Stephen Anne Malcolm David Robert Alexios Manuel Michael Basil Leopold").split()
# Words a numeral after which is read as a cardinal ("Chapter IV" -> "Chapter four").
NUMBERED = ("Chapter Part Book Volume Vol. Act Scene Section Article Appendix Canto Psalm Phase Level Stage "
            "Round Title Class Type Episode Star War Wars Super Bowl Grade Division Series Apollo Gemini").split()


def roman_value(s: str) -> int:
    i, n = 0, 0
    for sym, val in _ROMAN.items():
        while s.startswith(sym, i):
            n, i = n + val, i + len(sym)
    return n


def _numeral(text: str, most: int) -> int | None:
    """The value of a numeral read in a name ("VIII"), or None: past `most`, or one letter that is
    more often an initial or a grade ("C", "D", "L", "M")."""
    value = roman_value(text)
    return value if value <= most and (len(text) > 1 or text in "IVX") else None


def _regnal(m: re.Match, ctx) -> str:
    if _numeral(m[2], 40) is None:
        return m[0]
    if m[2] == "I" and not re.match(r"\s*(?:$|[.,;:!?)]|(?:was|of|and|died|ruled|reigned|became|had|is)\b)",
                                    m.string[m.end():]):
        return m[0]                              # "when George I went": the pronoun, not "the First"
    return f"{m[1]} the {num2words(roman_value(m[2]), to='ordinal').title().replace('-', ' ')}"


def _numbered(m: re.Match, ctx) -> str:
    if _numeral(m[2], 100) is None:
        return m[0]
    return f"{m[1]} {words(roman_value(m[2]))}"


def _century(m: re.Match, ctx) -> str:
    return f"{words(roman_value(m[1]), to='ordinal')} {m[2]}"


# --- acronyms and abbreviations ----------------------------------------------------------------------------

# Capitals said letter by letter although misaki or espeak-ng read them as a word ("WHO" -> "who").
SPELLED_ACRONYMS = frozenset("WHO US USA UK EU UN IT AI TV PC CPU GPU FBI CIA BBC CEO DIY FAQ HTML "
                             "HTTP URL USB API PDF DNA IQ ATM".split())
# Acronyms that are also English words: misaki's lexicon reads "WHO" as "who" at a sentence's start.
LEXICON_WORDS = frozenset("WHO US IT".split())
# Capitals said as a word (misaki's lexicon knows some; espeak-ng spells them): "NASA", "SQL" ("sequel").
WORD_ACRONYMS = {"NASA": "Nasa", "NATO": "Nato", "UNESCO": "Unesco", "UNICEF": "Unicef", "FIFA": "Fifa",
                 "OPEC": "Opec", "SQL": "sequel", "LASER": "laser", "RADAR": "radar", "SCUBA": "scuba",
                 "COVID": "Covid", "AIDS": "aids", "GIF": "gif", "JPEG": "jay peg", "RAM": "ram",
                 "ROM": "rom", "SIM": "sim", "IKEA": "Ikea", "LEGO": "Lego", "WiFi": "why fi", "Wi-Fi": "why fi",
                 "NASCAR": "Nascar", "ASAP": "A SAP", "GIMP": "gimp", "POTUS": "potus"}


def _shouting(text: str) -> bool:
    letters = re.findall(r"[A-Za-z]+", text)
    return len(letters) >= 2 and sum(w.isupper() for w in letters) * 2 > len(letters)


def _acronym(m: re.Match, ctx) -> str:
    word = m[0]
    if _shouting(m.string):
        return word                              # an all-capitals sentence: its words are words
    if word in WORD_ACRONYMS:
        return word if ctx.lexicon else WORD_ACRONYMS[word]     # misaki's lexicon knows these
    if ctx.lexicon and word not in LEXICON_WORDS:
        return word                              # misaki spells an unknown all-capitals word itself
    return " ".join(word) if word in SPELLED_ACRONYMS else word


# (abbreviation, expansion, can end a sentence). A title ("Dr.") is always followed by a name,
# so its period never ends a sentence; "etc." before a capital or the end of the text does.
ABBREVIATIONS = [
    ("e.g.", "for example", False), ("i.e.", "that is", False), ("etc.", "et cetera", True),
    ("vs.", "versus", False), ("vs", "versus", False), ("approx.", "approximately", True),
    ("Mr.", "Mister", False), ("Mrs.", "Missus", False), ("Ms.", "Miz", False), ("Dr.", "Doctor", False),
    ("Prof.", "Professor", False), ("St.", "Saint", False), ("Mt.", "Mount", False),
    ("Jr.", "Junior", True), ("Sr.", "Senior", True), ("Ltd.", "Limited", True), ("Inc.", "Incorporated", True),
    ("Corp.", "Corporation", True), ("Co.", "Company", True), ("Ave.", "Avenue", True), ("Rd.", "Road", True),
    ("Blvd.", "Boulevard", True), ("Ln.", "Lane", True), ("Gen.", "General", False), ("Capt.", "Captain", False),
    ("Lt.", "Lieutenant", False), ("Sgt.", "Sergeant", False), ("Col.", "Colonel", False),
    ("Rev.", "Reverend", False), ("Hon.", "Honourable", False), ("Gov.", "Governor", False),
    ("Sen.", "Senator", False), ("Rep.", "Representative", False), ("Fig.", "Figure", False),
    ("fig.", "figure", False), ("No.", "Number", False), ("no.", "number", False), ("vol.", "volume", False),
    ("Vol.", "Volume", False), ("ch.", "chapter", False), ("pp.", "pages", False), ("p.", "page", False),
    ("cf.", "compare", False), ("et al.", "and others", True), ("a.k.a.", "also known as", False),
    *((m[:3] + ".", m, False) for m in MONTHS if len(m) > 4), ("Sept.", "September", False),
]
# Abbreviations misaki's gold lexicon reads itself (upstream's readings: "Mrs." is 'mˈɪsɪz').
LEXICON_ABBREVIATIONS = frozenset(("Mr.", "Mrs.", "Ms."))
# Read only before a number: "No. 5", "p. 12", "Fig. 3", "vol. 2".
_BEFORE_NUMBER = frozenset(("No.", "no.", "p.", "pp.", "Fig.", "fig.", "vol.", "Vol.", "ch."))
# Street words a name before makes the place ("Main St.", "Elm Dr.") rather than the title.
_PLACES = {"St.": "Street", "Dr.": "Drive"}


def _abbreviation(m: re.Match, ctx: Context) -> str:
    word = m[1]
    expansion, ends = _ABBREV[word]
    after = m.string[m.end():]
    if ctx.lexicon and word in LEXICON_ABBREVIATIONS:
        return word
    if word in _BEFORE_NUMBER and not re.match(r"\s?\d", after):
        return word
    if word in _PLACES and re.search(r"\b[A-Z0-9]\w*\s+$", m.string[:m.start()]) and not re.match(r"\s+[A-Z]", after):
        return _PLACES[word] + ("" if after.strip() else ".")    # "Main St." (a name before, none after)
    if ends and (not after.strip() or re.match(r"\s+[A-Z]", after)):
        return expansion + "."
    return expansion


_ABBREV = {a: (e, ends) for a, e, ends in ABBREVIATIONS}
_GROUPED_RE = re.compile(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?")


# --- the table --------------------------------------------------------------------------------------------

RULES: tuple[Rule, ...] = (
    Rule("characters", _sub(_RARE_LATIN.pattern), _fold, (("Nguyễn Văn", "Nguyen Văn"), ("Phở", "Pho"))),
    Rule("apostrophes", _sub(r"(?<=[A-Za-z])’(?=[A-Za-z])"), _curly_apostrophe,
         (("It wasn’t me.", "It wasn't me."), ("I’d rather", "I'd rather"))),
    Rule("apostrophes", _sub(r"(\w{2,}s)(['’])(?=[\s,.;:!?]|$)"), _plural_possessive,
         (("the Joneses’ car", "the Joneses car"), ("the girls' books", "the girls books"),
          ("‘the dogs’ he said", "‘the dogs’ he said"))),
    Rule("urls", _sub(r"\b(?:https?://|www\.)[^\s<>\"]+", re.I), _url,
         (("Visit https://example.com today.", "Visit example dot com today."),
          ("See www.kcc.org/docs.", "See W W W dot K C C dot org slash docs."))),
    Rule("email", _sub(r"\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b"), _email,
         (("Mail bob@example.org now.", "Mail bob at example dot org now."),
          ("to jane.doe@uni-x.edu", "to jane dot doe at uni dash X dot edu"))),
    Rule("ip addresses", _sub(r"(?<![\w.])\d{1,3}(?:\.\d{1,3}){3}(?![\w.]|\.\d)"), lambda m, ctx: " dot ".join(m[0].split(".")),
         (("ping 10.0.0.1 now", "ping 10 dot 0 dot 0 dot 1 now"),)),
    Rule("versions", _sub(r"(?<![\w.])(v|version )?(\d+(?:\.\d{1,3}){2,})(?![\w.]|\.\d)", re.I), _version,
         (("Install v3.2.1 now.", "Install version 3 point 2 point 1 now."),
          ("version 1.2.3", "version 1 point 2 point 3"))),
    Rule("file names", _sub(r"\b([A-Za-z][\w-]*)\.(txt|pdf|docx?|xlsx?|csv|json|py|js|md|html?|png|jpe?g|gif|"
                            r"zip|exe|mp3|mp4|wav|tar|gz|log|cfg|ini|yaml|yml|xml)\b(?!\.\w)"), _file_name,
         (("Open notes.txt first.", "Open notes dot T X T first."), ("see report.pdf", "see report dot P D F"),
          ("edit config.json", "edit config dot jason"))),
    Rule("dates", _sub(r"(?<![\d/])(\d{1,2})/(\d{1,2})/(\d{4}|\d{2})(?![\d/])"), _slash_date,
         (("on 12/25/2024.", "on December twenty fifth, twenty twenty four."),
          ("on 3/4/05.", "on March fourth, oh five."))),
    Rule("dates", _sub(r"(?<![\d-])(\d{4})-(\d{2})-(\d{2})(?![\d-])"), _iso_date,
         (("on 2024-03-05.", "on March fifth, twenty twenty four."),)),
    Rule("dates", _sub(r"\b(" + _MONTH_RE + r")\s(\d{1,2})(?:st|nd|rd|th)?\b(?!:|\.\d|,\d)(?:,?\s(\d{4})\b)?"),
         _month_day,
         (("on March 5, 2024.", "on March fifth, twenty twenty four."), ("by July 4th we", "by July fourth we"))),
    Rule("dates", _sub(r"\b(\d{1,2})(?:st|nd|rd|th)?\s(?:of\s)?(" + _MONTH_RE + r")\b(?:,?\s(\d{4})\b)?"), _day_month,
         (("on 5 March 2024.", "on the fifth of March, twenty twenty four."),
          ("the 1st of May", "the first of May"))),
    Rule("years", _sub(r"(?:(?<=\s)|^)(?:(1[0-9]\d0|20\d0)s|['’](\d0)s)\b"), _decade,
         (("in the 1990s", "in the nineteen nineties"), ("the '80s", "the eighties"),
          ("the 2000s", "the two thousands"))),
    Rule("times", _sub(r"(?<![\d:])(\d{1,2}(?::\d{2})?(?:\s?[ap]\.?m\.?)?)\s?[-–]\s?(\d{1,2}(?::\d{2})?\s?[ap]\.?m\.?)(?![\w])",
                       re.I), _time_range,
         (("open 9am-5pm daily", "open 9am to 5pm daily"),)),
    Rule("times", _sub(r"(?<![\d:])(\d{1,2}:\d{2})\s?[-–]\s?(\d{1,2}:\d{2})(?![\d:])"), _time_range,
         (("from 9:00-17:30 daily", "from 9 o'clock to 17 30 daily"),)),
    # "p.m." keeps its last period where it also ends the sentence (end of text, or a capital next).
    Rule("times", _sub(r"(?<![\d:])(\d{1,2}):(\d{2})(?![\d:])(\s?[AaPp]\.?[Mm](?:\.(?!\s*$|\s+[A-Z]))?(?![\w]))?"),
         _time,
         (("at 10:05 sharp", "at 10 oh 5 sharp"), ("at 7:00 sharp", "at 7 o'clock sharp"),
          ("at 3:30 p.m.", "at 3 30 PM."))),
    # A number past the quadrillions is read digit by digit: nobody says it as a cardinal, and
    # num2words (inside misaki) overflows on a few hundred digits (found by fuzz/fuzz_text.py).
    Rule("phone numbers", _sub(r"(?<![\d,])\d{1,3}(?:,\d{3}){5,}(?![\d,])|(?<!\d)\d{16,}(?!\d)"), _digit_by_digit,
         (("12345678901234567", "1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7"),)),
    # Digits joined by commas that are not thousands groups: a list ("Press 1,2,3").
    Rule("numbers", _sub(r"(?<![\d,.])\d+(?:,\d+)+(?:\.\d+)?(?!\d|[.,]\d)"), _comma_list,
         (("Press 1,2,3 now", "Press 1, 2, 3 now"),)),
    Rule("phone numbers",
         _sub(r"(?<![\w.,-])(?:\+\d{1,3}[ .-]?)?(?:\(\d{3}\) ?|\d{3}[.-])?\d{3}[.-]\d{4}(?![\w-]|[.,]\d)"), _phone,
         (("Call 555-0143 now.", "Call 5 5 5, 0 1 4 3 now."), ("(555) 123-4567", "5 5 5, 1 2 3, 4 5 6 7"))),
    Rule("phone numbers", _sub(r"(?<![\d.,])0\d+(?![\d]|[.,]\d)"), _digit_by_digit,
         (("Room 007 is free.", "Room 0 0 7 is free."),)),
    Rule("fractions", _sub(r"(^|[^\w/.,-])(?:(\d+)\s)?((\d{1,2})/(\d{1,3}))(?![\w/]|[.,]\d)"), _fraction,
         (("He ate 3/4 of it.", "He ate three quarters of it."), ("add 1/2 cup", "add one half cup"),
          ("about 2/3 of us", "about two thirds of us"), ("1 1/2 hours", "one and a half hours"),
          ("open 24/7", "open twenty four seven"), ("5/8 inch", "five eighths inch"),
          ("rated 4/5 stars", "rated four out of five stars"), ("a 10/10 score", "a ten out of ten score"))),
    Rule("units", _UNIT_RE, _unit,
         (("at 60 km/h today", "at 60 kilometers per hour today"), ("5 kg of rice", "5 kilograms of rice"),
          ("1 kg of rice", "1 kilogram of rice"), ("a 40 mph limit", "a 40 miles per hour limit"),
          ("it was 20°C", "it was 20 degrees Celsius"), ("at 98.6°F", "at 98.6 degrees Fahrenheit"),
          ("a 3.5 GB file", "a 3.5 gigabytes file"), ("200 MB left", "200 megabytes left"),
          ("512 kB cache", "512 kilobytes cache"), ("run 10 km", "run 10 kilometers"), ("6 ft tall", "6 feet tall"))),
    Rule("percentages", _sub(r"(\d)\s?%"), _percent, (("50% of it", "50 percent of it"),)),
    Rule("negative numbers", _sub(r"(^|[\s(=:])[-−](\d)"), _negative,
         (("It was -1 degrees.", "It was minus 1 degrees."), ("a −5 score", "a minus 5 score"))),
    Rule("ordinals", _sub(r"(?<![\w.,])(\d+)(?:st|nd|rd|th)\b"), _ordinal,
         (("the 3rd time", "the third time"), ("her 21st birthday", "her twenty first birthday")), ESPEAK),
    Rule("years", _sub(r"\b(in|since|of|by|from|until|to|year|circa) (1[1-9]\d\d|20\d\d)\b(?![.,]\d)"),
         _year_rule, (("born in 1984.", "born in nineteen eighty four."),), ESPEAK),
    Rule("currencies", _sub(r"([$£€¥₹])\s?(\d{1,3}(?:,\d{3})+|\d+)(?:\.(\d{1,2}))?(?!\d)(?:\s(" + "|".join(SCALES)
                            + r")\b|(k|K|m|M|bn|B|tn|T)\b)?"), _money,
         (("It costs $5 million.", "It costs 5 million dollars."), ("a $2.5bn deal", "a 2 point 5 billion dollars deal"),
          ("£3k a month", "3 thousand pounds a month"), ("It costs $5.", "It costs $5."))),
    Rule("currencies", _sub(r"([$£€¥₹])\s?(\d{1,3}(?:,\d{3})+|\d+)(?:\.(\d{1,2}))?(?!\d)()()"), _money,
         (("$1,234.56", "one thousand two hundred thirty four dollars and 56 cents"), ("£2.01", "2 pounds and 1 penny")),
         ESPEAK),
    Rule("decimals", _sub(r"(?<![\d.,])(\d{1,3}(?:,\d{3})+|\d*)\.(\d+)(?!\d|\.\d)"), _decimal,
         (("about 3.14 units", "about 3 point 1 4 units"),), ESPEAK),
    Rule("numbers", _sub(r"(?<![\d.,])(\d{1,3}(?:,\d{3})+)(?![\d,]|\.\d)"), _thousands,
         (("3,497 people", "three thousand four hundred ninety seven people"),), ESPEAK),
    Rule("roman numerals", _sub(r"\b(" + "|".join(REGNAL_NAMES) + r")\s(" + _ROMAN_RE + r")\b(?!['’]|\.\w)"), _regnal,
         (("Henry VIII had six wives.", "Henry the Eighth had six wives."),
          ("Pope John XXIII", "Pope John the Twenty Third"), ("Elizabeth I was queen", "Elizabeth the First was queen"),
          ("when George I went", "when George I went"))),
    Rule("roman numerals", _sub(r"\b(" + "|".join(re.escape(w) for w in NUMBERED) + r")\s(" + _ROMAN_RE + r")\b(?!['’])"),
         _numbered,
         (("Chapter IV begins", "Chapter four begins"), ("World War II ended", "World War two ended"),
          ("Act III, Scene ii", "Act three, Scene ii"))),
    Rule("roman numerals", _sub(r"\b(" + _ROMAN_RE + r")\s(century|centuries|millennium|dynasty)\b"), _century,
         (("the XIX century", "the nineteenth century"),)),
    Rule("acronyms", _sub(r"(?<![\w.'’-])(?:Wi-Fi|WiFi|[A-Z]{2,7})(?![\w'’-]|\.\w)"), _acronym,
         (("WHO said so.", "W H O said so."), ("NASA and the US", "NASA and the U S"),
          ("a GPU runs SQL", "a GPU runs SQL"), ("I AM SO HAPPY", "I AM SO HAPPY"), ("IT WORKS", "IT WORKS"))),
    Rule("abbreviations", _sub(r"(?<![\w.])(" + "|".join(re.escape(a) for a in sorted(_ABBREV, key=len, reverse=True))
                               + r")(?![\w])"), _abbreviation,
         (("Dr. Smith lives on Elm Dr. now", "Doctor Smith lives on Elm Drive now"),
          ("St. Louis on Main St. in town", "Saint Louis on Main Street in town"),
          ("apples, pears, etc. are fruit", "apples, pears, et cetera are fruit"),
          ("apples, etc. Then more", "apples, et cetera. Then more"), ("cats vs. dogs", "cats versus dogs"),
          ("see No. 5 and p. 12", "see Number 5 and page 12"), ("Mr. Jones", "Mr. Jones"))),
)
# The classes whose every pattern holds a digit: skipped on text without one.
NUMERIC = frozenset(("dates", "years", "times", "phone numbers", "numbers", "fractions", "units", "percentages",
                     "negative numbers", "ordinals", "currencies", "decimals", "versions", "ip addresses"))
# What the other classes' patterns cannot match without.
_ROMAN_LETTERS = tuple("IVXLCDM")
NEEDS = {"apostrophes": ("'", "’"), "urls": ("://", "www.", "WWW."), "email": ("@",), "file names": (".",),
         "roman numerals": _ROMAN_LETTERS, "abbreviations": (".", "vs")}
RULES = tuple(replace(r, needs=DIGITS) if r.name in NUMERIC else
              replace(r, needs=NEEDS[r.name]) if r.name in NEEDS else r for r in RULES)
