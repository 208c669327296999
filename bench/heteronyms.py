"""Heteronym corpus score (issue 44): tests/data/heteronyms.tsv read by kcc's English G2P, by
upstream KPipeline's (misaki + spaCy en_core_web_sm, oracle/upstream_g2p.py), and by the tags
alone (kcc's tagger and spaCy's, each looked up in misaki's lexicon plus kcc's senses).

    PYTHONPATH=. python bench/heteronyms.py [--out bench/results/heteronyms.md]

A sentence is right when its target word's phonemes are the expected reading: the reading among
the word's entries its phonemes match (secondary stress ignored; else the closest by similarity).
"""
from __future__ import annotations

import argparse
import difflib
import sys
import warnings
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.machine import cpu_name, short_commit  # noqa: E402
from kcc.speech.g2p import heteronyms  # noqa: E402
from kcc.speech.g2p.en import misaki_en  # noqa: E402
from kcc.speech.g2p.en_cache import lexicon as cached_lexicon  # noqa: E402
from kcc.speech.g2p.en_tokenizer import english  # noqa: E402
from kcc.speech.g2p.g2p import G2P  # noqa: E402
from kcc.speech.g2p.tagger import tag  # noqa: E402

CORPUS = Path(__file__).resolve().parents[1] / "tests" / "data" / "heteronyms.tsv"
# The classes issue 44 found both kcc and upstream reading wrong, or kcc alone.
HARD = frozenset("tear tears lead does use uses row close refuse dove wound live lives sow that".split())


def corpus(path: Path = CORPUS) -> list[tuple[str, str, str]]:
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            word, reading, sentence = line.split("\t")
            rows.append((word, reading, sentence))
    return rows


def readings(golds, word: str) -> dict[str, str]:
    entry = golds.get(word)
    entry = dict(entry) if isinstance(entry, dict) else {"DEFAULT": entry}
    return entry


def which(reading_table: dict[str, str], phonemes: str) -> str:
    """The reading (key) the phonemes say."""
    bare = phonemes.replace("ˌ", "")
    for key, ps in reading_table.items():
        if ps and ps.replace("ˌ", "") == bare:
            return key
    return max(reading_table, key=lambda k: difflib.SequenceMatcher(None, reading_table[k] or "", bare).ratio())


def same(table: dict[str, str], got: str, want: str) -> bool:
    return table.get(got) == table.get(want) or got == want


def target(tokens, word: str):
    return next((t for t in tokens if t.text.lower() == word), None)


def score_kcc(rows, golds):
    g2p = G2P("en-us", "lexicon")
    return [same(readings(golds, w), which(readings(golds, w), target(g2p(s), w).phonemes), r) for w, r, s in rows]


def score_tags(rows, golds, tags_of):
    """The reading each tagger's tag (and kcc's senses) picks from the lexicon."""
    tokenize = english()
    out = []
    for w, r, s in rows:
        pairs = tokenize(s)
        tags = heteronyms.senses(pairs, tags_of(pairs))
        k = next(i for i, (t, _) in enumerate(pairs) if t.lower() == w)
        table = readings(golds, w)
        t = tags[k]
        key = t if t in table else misaki_en().Lexicon.get_parent_tag(t)
        out.append(same(table, key if key in table else "DEFAULT", r))
    return out


def score_upstream(rows, golds):
    from oracle import upstream_g2p
    if upstream_g2p.missing():
        return None, None
    g2p = upstream_g2p.pipeline("a").g2p
    nlp = g2p.nlp
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        phon = [same(readings(golds, w), which(readings(golds, w), target(g2p(s)[1], w).phonemes or ""), r)
                for w, r, s in rows]

    def spacy_tags(pairs):
        from spacy.tokens import Doc
        doc = nlp(Doc(nlp.vocab, words=[t for t, _ in pairs], spaces=[bool(ws) for _, ws in pairs]))
        return [t.tag_ for t in doc]
    return phon, score_tags(rows, golds, spacy_tags)


def table(rows, columns: dict[str, list]) -> list[str]:
    names = [n for n, v in columns.items() if v is not None]
    lines = ["| set | sentences | " + " | ".join(names) + " |", "|---|---|" + "---|" * len(names)]

    def line(label, idx):
        cells = [f"{sum(columns[n][i] for i in idx)}" for n in names]
        return f"| {label} | {len(idx)} | " + " | ".join(cells) + " |"
    lines.append(line("all", range(len(rows))))
    lines.append(line("issue 44's hard classes", [i for i, r in enumerate(rows) if r[0] in HARD]))
    by_word = defaultdict(list)
    for i, r in enumerate(rows):
        by_word[r[0]].append(i)
    for w in sorted(by_word):
        lines.append(line(w, by_word[w]))
    return lines


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    ap.add_argument("--show", action="store_true", help="print kcc's wrong sentences")
    args = ap.parse_args()
    rows = corpus()
    golds = heteronyms.SenseTable(cached_lexicon(misaki_en(), False).golds)
    cols = {"kcc": score_kcc(rows, golds), "kcc tagger (tags only)": score_tags(rows, golds, tag)}
    up, spacy_tags = score_upstream(rows, golds)
    cols["upstream KPipeline"] = up
    cols["spaCy tags + kcc senses (tags only)"] = spacy_tags
    if args.show:
        for (w, r, s), ok, u in zip(rows, cols["kcc"], up or cols["kcc"]):
            if not ok or not u:
                print(f"{'kcc-wrong' if not ok else '         '} {'up-wrong' if not u else '        '} {w} {r}: {s}")
    words = len({r[0] for r in rows})
    text = [f"# Heteronym corpus: {len(rows)} sentences, {words} words (tests/data/heteronyms.tsv)", "",
            f"Commit {short_commit()}, {cpu_name()} (2 cores, shared machine). Right = the target word read as the "
            "hand-checked reading. Tags-only columns: the reading a tagger's tag picks from misaki's lexicon plus "
            "kcc's senses (kcc.speech.g2p.heteronyms).", "",
            *table(rows, cols), ""]
    print("\n".join(text[:12]))
    if args.out:
        Path(args.out).write_text("\n".join(text), encoding="utf-8")


if __name__ == "__main__":
    main()
