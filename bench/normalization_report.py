"""Normalisation corpus report (issue 44): every case of every rule table (kcc.speech.g2p.
normalize_rules), per language and class, read by kcc and by upstream KPipeline.

    PYTHONPATH=. python bench/normalization_report.py [--out bench/results/normalization.md]

A case is (written, spoken): the spoken form is what a careful narrator says, written by hand in
the table. A reader is right on a case when its phonemes for the written text equal its own
phonemes for the spoken form (so each reader is judged by its own voice of the right words). English
rules that serve espeak-ng only (kcc --g2p espeak) are read by kcc's espeak-ng path.
Upstream: KPipeline(lang_code, model=False) from kokoro==0.9.4 (oracle/upstream_g2p.py); its
Japanese needs a MeCab dictionary that is not installed here, so ja has no upstream column.
"""
from __future__ import annotations

import argparse
import sys
import warnings
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.machine import cpu_name, short_commit  # noqa: E402
from kcc.speech.g2p.g2p import G2P, encode  # noqa: E402
from kcc.speech.g2p.normalize_rules import tables  # noqa: E402

UPSTREAM_CODES = {"en-us": "a", "es": "e", "fr-fr": "f", "it": "i", "pt-br": "p", "hi": "h", "zh": "z"}


def _upstream(language: str):
    from oracle import upstream_g2p
    if upstream_g2p.missing() or language not in UPSTREAM_CODES:
        return None
    code = UPSTREAM_CODES[language]
    return lambda text: upstream_g2p.phonemes(text, code)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    per_class: dict[tuple[str, str], list[tuple[str, str, bool, bool | None]]] = defaultdict(list)
    for language, rules in tables().items():
        if language == "en-gb":
            continue
        g2p = G2P(language)
        espeak = G2P(language, "espeak") if language == "en-us" else g2p    # rules for espeak-ng's path only
        up = _upstream(language)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for rule in rules:
                read = g2p if "lexicon" in rule.paths else espeak
                for written, spoken in rule.cases:
                    ours = encode(read(written)).phonemes == encode(read(spoken)).phonemes
                    theirs = None if up is None else up(written) == up(spoken)
                    per_class[(language, rule.name)].append((written, spoken, ours, theirs))
    lines = ["# Normalisation corpus: kcc and upstream KPipeline per class", "",
             f"Commit {short_commit()}, {cpu_name()}. Cases: kcc.speech.g2p.normalize_rules (each rule's own "
             "(written, spoken) pairs). Right = the reader's phonemes for the written text equal its phonemes "
             "for the spoken form. Upstream: kokoro 0.9.4 KPipeline G2P (misaki + spaCy en_core_web_sm for "
             "English; espeak-ng for es, fr-fr, it, pt-br, hi, i.e. what espeak-ng already reads; misaki "
             "ZHG2P for zh; ja not run: its UniDic dictionary is not installed).", "",
             "Read with care: the cases are kcc's own specification (each rule's cases), so kcc's column shows the "
             "whole G2P path keeps what the rule wrote (the script filter, misaki's own number reading); the "
             "upstream column shows where upstream reads the written form as it reads the spoken one. Equality "
             "is exact, so a stress-only difference counts against a reader. The held-out check is "
             "bench/results/hard_text_wer.md.", "",
             "| language | class | cases | kcc right | upstream right |", "|---|---|---|---|---|"]
    totals = defaultdict(lambda: [0, 0, 0])
    for (language, name), cases in per_class.items():
        n, k = len(cases), sum(c[2] for c in cases)
        u = "n/a" if cases[0][3] is None else sum(bool(c[3]) for c in cases)
        lines.append(f"| {language} | {name} | {n} | {k} | {u} |")
        t = totals[language]
        t[0] += n
        t[1] += k
        t[2] += 0 if u == "n/a" else u
    lines += ["", "| language | cases | kcc right | upstream right |", "|---|---|---|---|"]
    for language, (n, k, u) in totals.items():
        lines.append(f"| {language} | {n} | {k} | {u if language != 'ja' else 'n/a'} |")
    lines += ["", "## Cases", "", "| language | class | written | spoken | kcc | upstream |", "|---|---|---|---|---|---|"]
    mark = {True: "yes", False: "no", None: "n/a"}
    for (language, name), cases in per_class.items():
        for written, spoken, ours, theirs in cases:
            lines.append(f"| {language} | {name} | {written} | {spoken} | {mark[ours]} | {mark[theirs]} |")
    text = "\n".join(lines) + "\n"
    print("\n".join(lines[:60]))
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
