#!/usr/bin/env python3
"""Write kcc/data/en_tokenizer.json: spaCy's rule-based English tokenizer as data.

kcc's English G2P needs only spaCy's tokenizer (`spacy.blank("en")`), and importing spaCy costs
0.6-1.8 s per process (thinc imports torch when it is installed). kcc.speech.g2p.en_tokenizer runs
the same algorithm on this table with `re` alone. The table is made from the pinned spaCy
(dev extra); tests/test_en_tokenizer.py checks that the shipped table still equals what spaCy
gives and that both tokenizers split a corpus identically.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "kcc" / "data" / "en_tokenizer.json"
ORTH = 65          # spacy.attrs.ORTH: the key of a special case's token text


def spacy_table() -> dict:
    import spacy
    tok = spacy.blank("en").tokenizer
    special = {s: [t[ORTH] for t in toks] for s, toks in sorted(tok.rules.items())}
    # Special cases that the affix rules would cut apart ("a.m.)", ":)") are found again after
    # splitting, by spaCy's special matcher (the same test as Tokenizer.add_special_case).
    phrases = [s for s in special
               if tok.find_prefix(s) or tok.find_suffix(s) or tok.find_infix(s) or " " in s]
    return {"about": f"spaCy {spacy.__version__} English tokenizer rules, made by scripts/make_en_tokenizer_table.py",
            "prefix": tok.prefix_search.__self__.pattern, "suffix": tok.suffix_search.__self__.pattern,
            "infix": tok.infix_finditer.__self__.pattern,
            "url": tok.url_match.__self__.pattern if tok.url_match else None,
            "token_match": tok.token_match.__self__.pattern if tok.token_match else None,
            "special": special, "phrases": phrases}


def main() -> int:
    table = spacy_table()
    OUT.write_text(json.dumps(table, ensure_ascii=False, indent=0) + "\n", encoding="utf-8")
    print(f"{OUT}: {len(table['special'])} special cases, {len(table['phrases'])} matched after splitting")
    return 0


if __name__ == "__main__":
    sys.exit(main())
