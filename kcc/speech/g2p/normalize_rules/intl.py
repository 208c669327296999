"""es, fr-fr, it, pt-br and hi: what espeak-ng misses, said in the language's own words.

espeak-ng reads a plain integer in each of these languages itself ("3497" -> "tres mil
cuatrocientos..."), so plain integers stay digits. Measured (bench/results/normalization.md)
it misses: grouped thousands ("3.497" -> "tres. cuatrocientos..."), decimal commas ("3,5" with
a pause), currencies ("R$ 10,50" -> "real dólar diez"), ordinals ("1º" -> "uno", "2e" -> "deux e"),
dates ("05/03/2024" -> "cero cinco barra ..."), clock times ("15:30" with a colon), units ("km"
spelled K M, "km/h" with "barra"), minus signs (es, fr, hi silent), fractions ("1/2" -> "uno barra
dos") and roman numerals ("Felipe II" -> "Felipe dos"). Each language is one Speech record (its
words); the rules below are written once and built into a table per language.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from dataclasses import replace

from kcc.speech.g2p.normalize_rules.base import DIGITS, Pattern, Rule, num2words
from kcc.speech.g2p.normalize_rules.en import roman_value

_ROMAN_RE = r"(?=[MDCLXVI])M{0,3}(?:CM|CD|D?C{0,3})(?:XC|XL|L?X{0,3})(?:IX|IV|V?I{0,3})"


@dataclass(frozen=True)
class Speech:
    """One language's words for the rules (n2w: num2words' code, None where it has none: digits
    are left to espeak-ng, which reads them)."""
    n2w: str | None
    decimal: str
    minus: str
    months: tuple[str, ...]
    date: str                               # "{d} {m} {y}" order and glue words
    first: str                              # how day 1 of a month is said
    time: str                               # "{h} ... {m}"
    on_the_hour: str
    thousands: str                          # regex of a grouped number in this language
    currencies: dict[str, tuple[str, str, str, str]]
    money_and: str
    units: dict[str, tuple[str, str]]
    fractions: dict[int, tuple[str, str]]
    ordinal_marks: str                      # regex of the ordinal suffixes (French also after a numeral: "XIXe")
    century: str                            # regex, group 1 the numeral
    century_ordinal: bool
    regnal_ordinal_upto: int                # regnal numerals are ordinals up to this, then cardinals
    cases: dict[str, tuple[tuple[str, str], ...]] = field(default_factory=dict)


# Past this, a number is read digit by digit (nobody says it as a cardinal; num2words overflows).
LONGEST = 10 ** 15


def _n(speech: Speech, n: int) -> str:
    if n >= LONGEST:
        return " ".join(str(n))
    return str(n) if speech.n2w is None else num2words(n, lang=speech.n2w).replace(",", "")


def _ord(speech: Speech, n: int, feminine: bool = False) -> str:
    if speech.n2w is None or n >= LONGEST:
        return _n(speech, n)
    word = num2words(n, lang=speech.n2w, to="ordinal").replace(",", "")
    if feminine:
        word = "première" if word == "premier" else re.sub(r"o\b", "a", word)
    return word


# --- rules, each written once; a language's words come from its Speech ------------------------------

def _thousands(speech):
    return lambda m, ctx: re.sub(r"[.\s\u00a0\u202f,]", "", m[0])


def _decimal(speech):
    def say(m, ctx):
        frac = m[2]
        frac_words = " ".join(frac) if frac.startswith("0") or len(frac) > 2 else frac
        return f"{m[1]} {speech.decimal} {frac_words}"
    return say


def _money(speech):
    def say(m, ctx):
        # "€5,50" (groups 1-3) or "5,50 €" (groups 4-6)
        symbol, whole, cents = (m[1], m[2], m[3]) if m[1] else (m[6], m[4], m[5])
        one, many, sub_one, sub_many = speech.currencies[symbol]
        whole = int(re.sub(r"[.\s\u00a0\u202f]", "", whole) or 0)
        cents = int((cents or "0").ljust(2, "0")[:2])
        parts = [] if whole == 0 and cents else [f"{_n(speech, whole)} {one if whole == 1 else many}"]
        if cents:
            parts.append(f"{_n(speech, cents)} {sub_one if cents == 1 else sub_many}")
        return f" {speech.money_and} ".join(parts)
    return say


def _ordinal(speech):
    def say(m, ctx):
        feminine = m[2] in ("ª", "a", "re", "ère")
        if not m[1].isdigit() and len(m[1]) == 1 and m[1] not in "IVX":
            return m[0]                                   # "Le", "Ce", "Me": words, not 50th, 100th, 1000th
        n = int(m[1]) if m[1].isdigit() else roman_value(m[1])
        return _ord(speech, n, feminine)
    return say


def _date(speech):
    def say(m, ctx):
        if m[4]:                                          # ISO: year-month-day
            y, mo, d = int(m[4]), int(m[5]), int(m[6])
        else:
            d, mo, y = int(m[1]), int(m[2]), int(m[3])
        if not (1 <= mo <= 12 and 1 <= d <= 31):
            return m[0]
        day = speech.first if d == 1 else _n(speech, d)
        return speech.date.format(d=day, m=speech.months[mo - 1], y=_n(speech, y))
    return say


def _time(speech):
    def say(m, ctx):
        h, mi = int(m[1]), int(m[2] or m[3] or 0)
        if h > 24 or mi > 59:
            return m[0]
        if mi == 0:
            return speech.on_the_hour.format(h=_n(speech, h))
        return speech.time.format(h=_n(speech, h), m=_n(speech, mi))
    return say


def _unit(speech):
    def say(m, ctx):
        one, many = speech.units[m[2]]
        return f"{m[1]} {one if m[1] == '1' else many}"
    return say


def _fraction(speech):
    def say(m, ctx):
        num, den = int(m[1]), int(m[2])
        if den in speech.fractions:
            one, many = speech.fractions[den]
        elif speech.n2w and 5 <= den <= 10:
            many = _ord(speech, den)
            many = many[:-1] + "i" if speech.n2w == "it" else many + "s"
            one = f"{speech.fractions[2][0].split()[0]} {_ord(speech, den)}"     # "un quinto"
        else:
            return m[0]
        return one if num == 1 else f"{_n(speech, num)} {many}"
    return say


def _regnal(speech):
    def say(m, ctx):
        n = roman_value(m[2])
        if n > 40 or (len(m[2]) == 1 and m[2] not in "IVX"):
            return m[0]
        return f"{m[1]} {_ord(speech, n) if n <= speech.regnal_ordinal_upto else _n(speech, n)}"
    return say


def _century(speech):
    def say(m, ctx):
        numeral = next(g for g in m.groups() if g)
        n = roman_value(numeral)
        word = _ord(speech, n) if speech.century_ordinal else _n(speech, n)
        return re.sub(numeral + r"(?:ème|e)?", word, m[0], count=1)      # French "XIXe": the mark goes too
    return say


def _negative(speech):
    return lambda m, ctx: f"{m[1]}{speech.minus} {m[2]}"


def build(speech: Speech) -> tuple[Rule, ...]:
    """The table: one Rule per kind of span, in order (dates and times before the numbers in them)."""
    c = speech.cases
    symbols = "|".join(re.escape(s) for s in sorted(speech.currencies, key=len, reverse=True))
    units = "|".join(re.escape(u) for u in sorted(speech.units, key=len, reverse=True))
    rules = (
        Rule("dates", Pattern(r"(?<![\d/.-])(\d{1,2})[/.-](\d{1,2})[/.-](\d{4})(?![\d/.-])|"
                                 r"(?<![\d-])(\d{4})-(\d{2})-(\d{2})(?![\d-])"), _date(speech), c.get("dates", ())),
        Rule("times", Pattern(r"(?<![\d:,.])(\d{1,2})(?::(\d{2})|h(\d{2})?)(?![\d:])(?=\s|$|[.,;!?)])"), _time(speech),
             c.get("times", ())),
        Rule("currencies", Pattern(r"(?:(" + symbols + r")\s?(\d{1,3}(?:[.\s\u00a0\u202f]\d{3})+|\d+)(?:[,.](\d{1,2}))?"
                                      r"|(?<![\w])(\d{1,3}(?:[.\s\u00a0\u202f]\d{3})+|\d+)(?:[,.](\d{1,2}))?\s?(" + symbols
                                      + r"))(?!\w)"),
             _money(speech), c.get("currencies", ())),
        Rule("numbers", Pattern(speech.thousands), _thousands(speech), c.get("numbers", ())),
        Rule("decimals", Pattern(r"(?<![\d,.])(\d+)" + (r"\." if speech.n2w is None else ",") + r"(\d+)(?![\d,.])"),
             _decimal(speech), c.get("decimals", ())),
        Rule("ordinals", Pattern(r"(?<![\w.])(\d{1,3}" + (f"|{_ROMAN_RE}" if speech.n2w == "fr" else "") + r")\.?("
                                    + speech.ordinal_marks + r")(?!\w)"),
             _ordinal(speech), c.get("ordinals", ())),
        Rule("fractions", Pattern(r"(?<![\w/.,])(\d{1,2})/(\d{1,2})(?![\w/]|[.,]\d)"), _fraction(speech),
             c.get("fractions", ())),
        Rule("units", Pattern(r"(?<![\w.,])(\d+(?:[.,]\d+)?)\s?(" + units + r")(?![\w/°])"), _unit(speech),
             c.get("units", ())),
        Rule("negative numbers", Pattern(r"(^|[\s(=:])[-−](\d)"), _negative(speech), c.get("negative numbers", ())),
        Rule("roman numerals", Pattern(speech.century), _century(speech), c.get("centuries", ())),
        Rule("roman numerals", Pattern(r"\b([A-ZÀ-Ý][a-zà-ÿ]+)\s(" + _ROMAN_RE + r")\b(?![\w'’])"), _regnal(speech),
             c.get("roman numerals", ())),
    )
    # A language without ordinal marks or roman numerals (hi) has no such rules.
    absent = {"ordinals"} if not speech.ordinal_marks else set()
    absent |= {"roman numerals"} if not speech.century else set()
    # Rules that read digits skip text without one; roman numerals (and French "XIXe") need none.
    lettered = {"roman numerals"} | ({"ordinals"} if speech.n2w == "fr" else set())
    return tuple(r if r.name in lettered else replace(r, needs=DIGITS) for r in rules if r.name not in absent)


_EURO_UNITS = {
    "es": {"km/h": ("kilómetro por hora", "kilómetros por hora"), "km": ("kilómetro", "kilómetros"),
           "cm": ("centímetro", "centímetros"), "mm": ("milímetro", "milímetros"), "m": ("metro", "metros"),
           "kg": ("kilogramo", "kilogramos"), "g": ("gramo", "gramos"), "l": ("litro", "litros"),
           "ml": ("mililitro", "mililitros"), "°C": ("grado Celsius", "grados Celsius"), "°": ("grado", "grados"),
           "GB": ("gigabyte", "gigabytes"), "MB": ("megabyte", "megabytes")},
    "fr": {"km/h": ("kilomètre par heure", "kilomètres par heure"), "km": ("kilomètre", "kilomètres"),
           "cm": ("centimètre", "centimètres"), "mm": ("millimètre", "millimètres"), "m": ("mètre", "mètres"),
           "kg": ("kilogramme", "kilogrammes"), "g": ("gramme", "grammes"), "l": ("litre", "litres"),
           "ml": ("millilitre", "millilitres"), "°C": ("degré Celsius", "degrés Celsius"), "°": ("degré", "degrés"),
           "Go": ("gigaoctet", "gigaoctets"), "Mo": ("mégaoctet", "mégaoctets")},
    "it": {"km/h": ("chilometro orario", "chilometri orari"), "km": ("chilometro", "chilometri"),
           "cm": ("centimetro", "centimetri"), "mm": ("millimetro", "millimetri"), "m": ("metro", "metri"),
           "kg": ("chilogrammo", "chilogrammi"), "g": ("grammo", "grammi"), "l": ("litro", "litri"),
           "ml": ("millilitro", "millilitri"), "°C": ("grado Celsius", "gradi Celsius"), "°": ("grado", "gradi"),
           "GB": ("gigabyte", "gigabyte"), "MB": ("megabyte", "megabyte")},
    "pt": {"km/h": ("quilômetro por hora", "quilômetros por hora"), "km": ("quilômetro", "quilômetros"),
           "cm": ("centímetro", "centímetros"), "mm": ("milímetro", "milímetros"), "m": ("metro", "metros"),
           "kg": ("quilo", "quilos"), "g": ("grama", "gramas"), "l": ("litro", "litros"),
           "ml": ("mililitro", "mililitros"), "°C": ("grau Celsius", "graus Celsius"), "°": ("grau", "graus"),
           "GB": ("gigabyte", "gigabytes"), "MB": ("megabyte", "megabytes")},
    "hi": {"km/h": ("किलोमीटर प्रति घंटा", "किलोमीटर प्रति घंटा"), "km": ("किलोमीटर", "किलोमीटर"),
           "cm": ("सेंटीमीटर", "सेंटीमीटर"), "m": ("मीटर", "मीटर"), "kg": ("किलोग्राम", "किलोग्राम"),
           "g": ("ग्राम", "ग्राम"), "l": ("लीटर", "लीटर"), "°C": ("डिग्री सेल्सियस", "डिग्री सेल्सियस"),
           "°": ("डिग्री", "डिग्री")},
}
_DOT_THOUSANDS = r"(?<![\d.,])\d{1,3}(?:\.\d{3})+(?![\d]|[.,]\d)"

SPEECH: dict[str, Speech] = {
    "es": Speech(
        "es", "coma", "menos",
        ("enero", "febrero", "marzo", "abril", "mayo", "junio", "julio", "agosto", "septiembre", "octubre",
         "noviembre", "diciembre"), "{d} de {m} de {y}", "uno", "{h} y {m}", "{h} en punto", _DOT_THOUSANDS,
        {"€": ("euro", "euros", "céntimo", "céntimos"), "$": ("dólar", "dólares", "centavo", "centavos"),
         "£": ("libra", "libras", "penique", "peniques")}, "con", _EURO_UNITS["es"],
        {2: ("un medio", "medios"), 3: ("un tercio", "tercios"), 4: ("un cuarto", "cuartos")}, r"º|ª|o|a",
        r"\b[Ss]iglo\s(" + _ROMAN_RE + r")\b", False, 10,
        {"dates": (("el 05/03/2024", "el cinco de marzo de dos mil veinticuatro"),),
         "times": (("a las 15:30", "a las quince y treinta"), ("a las 9:00", "a las nueve en punto")),
         "currencies": (("cuesta 5 €", "cuesta cinco euros"), ("son $10,50", "son diez dólares con cincuenta centavos"),
                        ("9999999999999999 €", "9 9 9 9 9 9 9 9 9 9 9 9 9 9 9 9 euros")),
         "numbers": (("3.497 personas", "3497 personas"),), "decimals": (("3,5 litros", "3 coma 5 litros"),),
         "ordinals": (("el 1º de la lista", "el primero de la lista"), ("la 2ª vez", "la segunda vez")),
         "fractions": (("1/2 taza", "un medio taza"), ("3/4 partes", "tres cuartos partes")),
         "units": (("a 60 km/h", "a 60 kilómetros por hora"), ("10 kg de arroz", "10 kilogramos de arroz")),
         "negative numbers": (("hace -3 grados", "hace menos 3 grados"),),
         "centuries": (("el siglo XIX", "el siglo diecinueve"),),
         "roman numerals": (("Felipe II reinó", "Felipe segundo reinó"), ("Alfonso XIII", "Alfonso trece"))}),
    "fr-fr": Speech(
        "fr", "virgule", "moins",
        ("janvier", "février", "mars", "avril", "mai", "juin", "juillet", "août", "septembre", "octobre",
         "novembre", "décembre"), "{d} {m} {y}", "premier", "{h} heures {m}", "{h} heures",
        r"(?<![\d.,])\d{1,3}(?:[\u00a0\u202f ]\d{3})+(?![\d]|[.,]\d)",
        {"€": ("euro", "euros", "centime", "centimes"), "$": ("dollar", "dollars", "cent", "cents"),
         "£": ("livre", "livres", "penny", "pence")}, "et", _EURO_UNITS["fr"],
        {2: ("un demi", "demis"), 3: ("un tiers", "tiers"), 4: ("un quart", "quarts")}, r"er|re|ère|e|ème",
        r"\b(" + _ROMAN_RE + r")(?:e|ème)\s(?:siècle)", True, 1,
        {"dates": (("le 05/03/2024", "le cinq mars deux mille vingt-quatre"), ("le 01/05/2024", "le premier mai deux mille vingt-quatre")),
         "times": (("à 15h30", "à quinze heures trente"), ("à 15:30", "à quinze heures trente")),
         "currencies": (("coûte 5 €", "coûte cinq euros"), ("payé 10,50 €", "payé dix euros et cinquante centimes")),
         "numbers": (("3 497 habitants", "3497 habitants"),), "decimals": (("3,5 litres", "3 virgule 5 litres"),),
         "ordinals": (("le 1er jour", "le premier jour"), ("la 2e fois", "la deuxième fois"),
                      ("Le chat, Ce livre", "Le chat, Ce livre")),
         "fractions": (("1/2 tasse", "un demi tasse"), ("3/4 du gâteau", "trois quarts du gâteau")),
         "units": (("à 60 km/h", "à 60 kilomètres par heure"), ("il fait 20 °C", "il fait 20 degrés Celsius")),
         "negative numbers": (("il fait -3 degrés", "il fait moins 3 degrés"),),
         "centuries": (("au XIXe siècle", "au dix-neuvième siècle"),),
         "roman numerals": (("Louis XIV régna", "Louis quatorze régna"),)}),
    "it": Speech(
        "it", "virgola", "meno",
        ("gennaio", "febbraio", "marzo", "aprile", "maggio", "giugno", "luglio", "agosto", "settembre", "ottobre",
         "novembre", "dicembre"), "{d} {m} {y}", "primo", "{h} e {m}", "{h} in punto", _DOT_THOUSANDS,
        {"€": ("euro", "euro", "centesimo", "centesimi"), "$": ("dollaro", "dollari", "centesimo", "centesimi"),
         "£": ("sterlina", "sterline", "penny", "penny")}, "e", _EURO_UNITS["it"],
        {2: ("un mezzo", "mezzi"), 3: ("un terzo", "terzi"), 4: ("un quarto", "quarti")}, r"º|ª|o|a",
        r"\b(?:[Ss]ecolo\s(" + _ROMAN_RE + r")\b|(" + _ROMAN_RE + r")\ssecolo)", True, 10,
        {"dates": (("il 05/03/2024", "il cinque marzo duemilaventiquattro"),),
         "times": (("alle 15:30", "alle quindici e trenta"),),
         "currencies": (("costa 5 €", "costa cinque euro"), ("costa €2,50", "costa due euro e cinquanta centesimi")),
         "numbers": (("3.497 abitanti", "3497 abitanti"),), "decimals": (("3,5 litri", "3 virgola 5 litri"),),
         "ordinals": (("il 1º posto", "il primo posto"), ("la 2ª volta", "la seconda volta")),
         "fractions": (("1/2 tazza", "un mezzo tazza"), ("3/4 della torta", "tre quarti della torta")),
         "units": (("a 60 km/h", "a 60 chilometri orari"), ("10 kg di riso", "10 chilogrammi di riso")),
         "negative numbers": (("fa -3 gradi", "fa meno 3 gradi"),),
         "centuries": (("il secolo XIX", "il secolo diciannovesimo"),),
         "roman numerals": (("Vittorio Emanuele II", "Vittorio Emanuele secondo"),)}),
    "pt-br": Speech(
        "pt_BR", "vírgula", "menos",
        ("janeiro", "fevereiro", "março", "abril", "maio", "junho", "julho", "agosto", "setembro", "outubro",
         "novembro", "dezembro"), "{d} de {m} de {y}", "primeiro", "{h} e {m}", "{h} horas", _DOT_THOUSANDS,
        {"R$": ("real", "reais", "centavo", "centavos"), "€": ("euro", "euros", "cêntimo", "cêntimos"),
         "$": ("dólar", "dólares", "centavo", "centavos"), "£": ("libra", "libras", "pêni", "pence")}, "e",
        _EURO_UNITS["pt"], {2: ("um meio", "meios"), 3: ("um terço", "terços"), 4: ("um quarto", "quartos")},
        r"º|ª|o|a", r"\b[Ss]éculo\s(" + _ROMAN_RE + r")\b", False, 10,
        {"dates": (("em 05/03/2024", "em cinco de março de dois mil e vinte e quatro"),),
         "times": (("às 15h30", "às quinze e trinta"), ("às 9h", "às nove horas")),
         "currencies": (("custa R$ 10,50", "custa dez reais e cinquenta centavos"), ("custa 5 €", "custa cinco euros")),
         "numbers": (("3.497 pessoas", "3497 pessoas"),), "decimals": (("3,5 litros", "3 vírgula 5 litros"),),
         "ordinals": (("o 1º lugar", "o primeiro lugar"), ("a 2ª vez", "a segunda vez")),
         "fractions": (("1/2 xícara", "um meio xícara"), ("3/4 do bolo", "três quartos do bolo")),
         "units": (("a 60 km/h", "a 60 quilômetros por hora"), ("10 kg de arroz", "10 quilos de arroz")),
         "negative numbers": (("faz -3 graus", "faz menos 3 graus"),),
         "centuries": (("no século XIX", "no século dezenove"),),
         "roman numerals": (("Pedro II governou", "Pedro segundo governou"),)}),
    "hi": Speech(
        None, "दशमलव", "माइनस",
        ("जनवरी", "फ़रवरी", "मार्च", "अप्रैल", "मई", "जून", "जुलाई", "अगस्त", "सितंबर", "अक्टूबर", "नवंबर", "दिसंबर"),
        "{d} {m} {y}", "1", "{h} बजकर {m} मिनट", "{h} बजे", r"(?<![\d.,])\d{1,3}(?:,\d{2})*,\d{3}(?![\d]|[.,]\d)",
        {"₹": ("रुपया", "रुपये", "पैसा", "पैसे"), "$": ("डॉलर", "डॉलर", "सेंट", "सेंट"),
         "€": ("यूरो", "यूरो", "सेंट", "सेंट")}, "और", _EURO_UNITS["hi"],
        {2: ("आधा", "आधे"), 4: ("चौथाई", "चौथाई")}, "", "", False, 0,
        {"dates": (("05/03/2024 को", "5 मार्च 2024 को"),), "times": (("15:30 पर", "15 बजकर 30 मिनट पर"),),
         "currencies": (("₹500 दीजिए", "500 रुपये दीजिए"),), "numbers": (("3,49,700 लोग", "349700 लोग"),),
         "decimals": (("3.5 किलो", "3 दशमलव 5 किलो"),), "units": (("5 km दूर", "5 किलोमीटर दूर"),),
         "negative numbers": (("-3 डिग्री", "माइनस 3 डिग्री"),), "fractions": (("3/4 भाग", "3 चौथाई भाग"),)}),
}
