"""Japanese and Mandarin: the few spans their readers get wrong.

ja: pyopenjtalk reads ASCII digits before a counter without the counter's sound change ("15分"
-> "jūgo bun"; said "jūgo fun", as upstream's UniDic reader says), but reads the same number in
kanji right ("十五分" -> "jūgo fun", "一分" -> "ippun"); so digits before a counter become kanji.
zh: misaki's ZHG2P reads "3,497" with a pause at the comma and "15:30" with the colon; a grouped
number loses its commas and a clock time becomes "15点30分".
"""
from __future__ import annotations

import re

from kcc.speech.g2p.normalize_rules.base import DIGITS, Pattern, Rule

_DIGITS = "〇一二三四五六七八九"
_SMALL = ((1000, "千"), (100, "百"), (10, "十"))
_LARGE = ((10 ** 12, "兆"), (10 ** 8, "億"), (10 ** 4, "万"))
# Counters whose first sound changes after a number (h- and f- rows: 分 ふん/ぷん, 本 ほん/ぼん/ぽん,
# 匹, 杯, 泊, 発, 歩, 編), and others read with the number as one word.
COUNTERS = "分本匹杯泊発歩編個階回軒件冊足頭枚台羽"


def kanji_number(n: int) -> str:
    """0 <= n < 10**16 in kanji ("15" -> "十五", "2024" -> "二千二十四"; no 一 before 十, 百, 千)."""
    if n == 0:
        return _DIGITS[0]
    out = ""
    for value, mark in _LARGE:
        if n >= value:
            out += kanji_number(n // value) + mark
            n %= value
    for value, mark in _SMALL:
        if n >= value:
            q = n // value
            out += ("" if q == 1 else _DIGITS[q]) + mark
            n %= value
    return out + (_DIGITS[n] if n else "")


def _counter(m: re.Match, ctx) -> str:
    n = int(m[1])
    if m[2] == "分" and n % 10 == 8:                  # 八分 is read "hachibu" (eight tenths): say "happun"
        return (kanji_number(n - 8) if n > 8 else "") + "はっぷん"
    return kanji_number(n) + m[2]


def _zh_time(m: re.Match, ctx) -> str:
    h, mi = int(m[1]), int(m[2])
    if h > 24 or mi > 59:
        return m[0]
    return f"{h}点" + (f"{mi}分" if mi else "")


JA: tuple[Rule, ...] = (
    Rule("counters", Pattern(r"(?<![\d.,])(\d{1,15})([" + COUNTERS + r"])"), _counter,
         (("15分待ちました。", "十五分待ちました。"), ("1分", "一分"), ("10本", "十本"), ("1個", "一個"),
          ("8分", "はっぷん"), ("18分", "十はっぷん")), needs=DIGITS),
)
ZH: tuple[Rule, ...] = (
    Rule("times", Pattern(r"(?<![\d:])(\d{1,2}):(\d{2})(?![\d:])"), _zh_time,
         (("15:30开会", "15点30分开会"), ("9:00", "9点")), needs=DIGITS),
    Rule("numbers", Pattern(r"(?<![\d,.])\d{1,3}(?:,\d{3})+(?![\d,]|\.\d)"), lambda m, ctx: m[0].replace(",", ""),
         (("3,497人", "3497人"),), needs=DIGITS),
)
