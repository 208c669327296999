"""ARCHITECTURE.md's "how to add a front-end" checklist, held by the source: every door listed
there builds kcc.speech.request's object (imports kcc.speech.request), none checks a request
field or decides a voice on its own, and no module but kcc/speech/sentences.py writes a set of
sentence marks."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOC = (ROOT / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")


def listed_doors() -> list[str]:
    section = DOC[DOC.index("- **a front-end**"):DOC.index("## Layout convention")]
    return re.findall(r"kcc/[\w/]+\.py", section[section.index("The doors:"):])


def imports(path: Path) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            out |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
        elif isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
    return out


def test_the_checklist_lists_every_door():
    assert listed_doors() == ["kcc/speech/cli/say.py", "kcc/api.py", "kcc/speech/serve/request.py",
                              "kcc/speech/serve/service.py", "kcc/speech/serve/wyoming_server.py",
                              "kcc/speech/batch/manifest.py", "kcc/speech/batch/item.py", "kcc/speech/book/cli.py"]


@pytest.mark.parametrize("door", listed_doors())
def test_every_door_builds_the_one_request(door):
    got = imports(ROOT / door)
    assert any(m == "kcc.speech.request" or m.startswith("kcc.speech.request.") for m in got), door
    # the checks and decisions live in one place each: a door never imports the old private ones
    assert not got & {"kcc.speech.languages.pick_language", "kcc.speech.voices.default_voice_for",
                      "kcc.speech.g2p.g2p.canonical_language"} or door == "kcc/api.py", door


def _mark_sets(path: Path) -> list[str]:
    """String constants that are a set of sentence marks ('.!?', '。！？', '[.!?…]')."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            v = node.value
            letters = sum(c.isalpha() for c in v)            # a regex's classes (\s) aside: no words
            if ("!" in v and "?" in v or "。" in v or "।" in v) and len(v) < 60 and letters <= 3:
                found.append(v)
    return found


def test_no_module_but_sentences_writes_sentence_marks():
    offenders = {str(p.relative_to(ROOT)): _mark_sets(p) for p in (ROOT / "kcc" / "speech").rglob("*.py")
                 if p.name != "sentences.py" and "g2p" not in p.parts and _mark_sets(p)}
    assert offenders == {}
