"""`kcc --help` and every subcommand's --help load no compiler, no G2P, no model loader and no
third-party package at all (numpy, PyAV, onnx, Ray, lxml, pypdf, ...): the options are declared
from light tables, and each command imports the modules that do its work only when it runs.
Checked by module set, in a fresh interpreter per case, not by time (bench/help_startup.py
measures the time)."""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from unittest import mock

import pytest

from kcc import cli

ROOT = Path(__file__).resolve().parents[1]

# Runs kcc's dispatcher as the console script does, then names every module it loaded.
PROBE = ("import sys\nfrom kcc import cli\ntry:\n    cli.main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
         "import json\nprint(json.dumps(sorted(sys.modules)), file=sys.stderr)")

# kcc's packages that a --help must not load: the compiler and everything it compiles or loads.
HEAVY_PACKAGES = ("kcc.compiler", "kcc.ops", "kcc.kernels", "kcc.circuits", "kcc.ir", "kcc.weights",
                  "kcc.speech.g2p", "kcc.model")
# ... except these light tables inside them, each with what --help reads from it (stdlib only).
LIGHT_TABLES = {
    "kcc.model": "the package itself: it loads kcc.model.loader on first use of kcc.model.load only",
    "kcc.model.kokoro": "the model's numbers (sample rate, seed and speed ranges) for the options' help",
    "kcc.speech.g2p": "the package itself: the English backends' names (--g2p choices)",
    "kcc.speech.g2p.errors": "G2PError alone: the request's language field names it (no vocabulary, no backend)",
    "kcc.speech.g2p.scripts": "the Unicode script table kcc.speech.languages (--lang) detects 'auto' with",
}
# kcc modules outside those packages that do a command's work.
WORK_MODULES = {"kcc.speech.engine", "kcc.speech.voices", "kcc.speech.audio.encoder", "kcc.speech.audio.output",
                "kcc.speech.audio.timestamps", "kcc.speech.audio.wav", "kcc.speech.cli.say",
                "kcc.speech.batch.api", "kcc.speech.batch.item", "kcc.speech.batch.audio",
                "kcc.speech.book.assemble", "kcc.speech.book.job", "kcc.speech.book.sources",
                "kcc.speech.serve.app", "kcc.speech.serve.service"}
# Besides the standard library and kcc: the interpreter's own entries and site's import hooks.
NOT_THIRD_PARTY = {"__main__", "kcc", "_distutils_hack", "sitecustomize", "usercustomize"}


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def heavy_kcc_modules(loaded: set[str]) -> set[str]:
    return {m for m in loaded if m not in LIGHT_TABLES
            and (m in WORK_MODULES or any(_within(m, p) for p in HEAVY_PACKAGES))}


def third_party(loaded: set[str]) -> set[str]:
    tops = {m.split(".")[0] for m in loaded}
    return {t for t in tops - set(sys.stdlib_module_names) - NOT_THIRD_PARTY if not t.startswith("__editable__")}


def commands(parser: argparse.ArgumentParser | None = None) -> list[list[str]]:
    """Every command path of the `kcc` parser, nested ones too (['say'], ['voice', 'design']),
    read from the parser kcc.cli builds: a new command is covered without being named here."""
    if parser is None:
        built = []

        def grab(self, *a, **k):
            built.append(self)
            raise SystemExit(0)
        with mock.patch.object(argparse.ArgumentParser, "parse_args", grab), pytest.raises(SystemExit):
            cli.main([])
        parser = built[0]
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            seen = set()
            for name, sub in action.choices.items():
                if id(sub) not in seen:                   # an alias names the same parser
                    seen.add(id(sub))
                    found += [[name]] + [[name, *rest] for rest in commands(sub)]
    return found


def loaded_by(argv: list[str]) -> tuple[set[str], str]:
    p = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, cwd=str(ROOT),
                       timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    return set(json.loads(p.stderr.strip().splitlines()[-1])), p.stdout


def test_the_cases_are_every_command():
    found = [" ".join(c) for c in commands()]
    assert {"say", "synth", "export", "voices", "serve", "wyoming", "batch", "book", "compile", "xray", "report",
            "import-onnx"} <= set(found)
    assert len(found) == len(set(found))


def test_nested_commands_and_aliases_are_found():
    ap = argparse.ArgumentParser(prog="kcc")
    sub = ap.add_subparsers()
    sub.add_parser("say", aliases=["speak"])
    voice = sub.add_parser("voice").add_subparsers()
    voice.add_parser("design")
    assert commands(ap) == [["say"], ["voice"], ["voice", "design"]]


@pytest.mark.parametrize("argv", [["--help"]] + [[*path, "--help"] for path in commands()],
                         ids=lambda argv: " ".join(argv))
def test_help_loads_no_compiler_no_g2p_and_no_third_party_package(argv):
    loaded, shown = loaded_by(argv)
    assert shown.startswith(" ".join(["usage: kcc", *argv[:-1]]) + " ")      # that command's help was printed
    assert "kcc.cli" in loaded and "kcc.speech.cli.commands" in loaded       # the whole parser was built
    assert heavy_kcc_modules(loaded) == set()
    assert third_party(loaded) == set()
    assert not loaded & {"numpy", "av", "onnx", "ray", "lxml", "pypdf", "torch", "misaki", "uvicorn"}


@pytest.mark.parametrize("loaded, heavy, third", [
    ({"kcc.cli", "kcc.compiler"}, {"kcc.compiler"}, set()),
    ({"kcc.compiler.precision"}, {"kcc.compiler.precision"}, set()),
    ({"kcc.speech.g2p", "kcc.speech.g2p.scripts", "kcc.speech.g2p.g2p"}, {"kcc.speech.g2p.g2p"}, set()),
    ({"kcc.model", "kcc.model.kokoro", "kcc.model.loader"}, {"kcc.model.loader"}, set()),
    ({"kcc.irx", "kcc.ir.graph", "kcc.speech.engine"}, {"kcc.ir.graph", "kcc.speech.engine"}, set()),
    ({"numpy", "numpy.core", "json", "kcc", "__main__", "__editable___kcc_0_2_0_finder"}, set(), {"numpy"}),
    ({"av", "lxml.etree", "pypdf", "ray", "onnx"}, set(), {"av", "lxml", "pypdf", "ray", "onnx"}),
])
def test_the_module_check_tells_heavy_from_light(loaded, heavy, third):
    """The check itself can fail: each forbidden kind is caught, each light table passes."""
    assert heavy_kcc_modules(loaded) == heavy and third_party(loaded) == third
