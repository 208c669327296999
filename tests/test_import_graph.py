"""Imports point down only (speech -> model -> compiler) and no modules import each other in a
circle: checked on the source with ast (scripts/import_graph.py), imports inside functions
included, so a hidden import counts as much as one at the top."""
from __future__ import annotations

import importlib.util
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Cycles that exist on purpose, each with its reason; only through imports inside functions.
ALLOWED_CYCLES = {
    # real_model imports the ONNX file reader (kcc.weights.onnx_file, over the importer) only when
    # it must build a checkpoint (onnx is heavy); the importer names its output with real_model's
    # label, the reader keys a file by real_model's importer version. Not a start-up circle.
    ("kcc.weights.importers.onnx_kokoro", "kcc.weights.onnx_file", "kcc.weights.real_model"),
}


@pytest.fixture(scope="module")
def graph():
    spec = importlib.util.spec_from_file_location("import_graph", ROOT / "scripts" / "import_graph.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["import_graph"] = mod            # dataclasses look their module up by name
    spec.loader.exec_module(mod)
    return mod


def test_imports_point_down_only(graph):
    bad = graph.wrong_way(graph.edges(ROOT))
    assert bad == [], "\n".join(f"{e.source}:{e.line} imports {e.target}" for e in bad)


def test_no_module_level_import_cycles(graph):
    assert graph.cycles(graph.edges(ROOT), top_level_only=True) == []


def test_function_level_cycles_are_only_the_allowed_ones(graph):
    found = {tuple(c) for c in graph.cycles(graph.edges(ROOT), top_level_only=False)}
    assert found <= ALLOWED_CYCLES, f"new import cycles: {sorted(found - ALLOWED_CYCLES)}"


def test_the_model_and_export_need_no_speech(graph):
    """kcc.model (the facade and export included) and kcc.compiler: nothing from kcc.speech."""
    es = graph.edges(ROOT)
    for low in ("kcc.model", "kcc.compiler", "kcc.weights", "kcc.ops", "kcc.kernels"):
        assert not [e for e in es if e.source.startswith(low) and e.target.startswith("kcc.speech")], low
    assert not [e for e in es if e.source.startswith("kcc.compiler") and e.target.startswith("kcc.model")]
    assert {"kcc.model.loader", "kcc.model.export", "kcc.model.vocab"} <= set(graph.modules(ROOT))


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text))
    for d in {p.parent for p in tmp_path.rglob("*.py")}:
        (d / "__init__.py").touch()
    return tmp_path


@pytest.mark.parametrize("source, line", [
    ("from kcc.speech.cli.say import say\n", 1),                           # top level
    ("def f():\n    import kcc.speech.g2p.g2p\n", 2),                      # hidden in a function
    ("from ..speech import say\n", 1),                                 # relative
    ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from kcc.speech import voices\n", 3),
])
def test_the_checker_finds_a_wrong_way_import_of_every_form(graph, tmp_path, source, line):
    root = _tree(tmp_path, {"kcc/model/low.py": source, "kcc/speech/cli/say.py": "", "kcc/speech/g2p/g2p.py": "",
                            "kcc/speech/voices.py": ""})
    bad = graph.wrong_way(graph.edges(root))
    assert [(e.source, e.line) for e in bad] == [("kcc.model.low", line)]
    assert bad[0].target.startswith("kcc.speech")


@pytest.mark.parametrize("files, top_cycles, all_cycles", [
    ({"kcc/a.py": "import kcc.b\n", "kcc/b.py": "from kcc import a\n"}, [["kcc.a", "kcc.b"]], [["kcc.a", "kcc.b"]]),
    ({"kcc/a.py": "import kcc.b\n", "kcc/b.py": "def f():\n    import kcc.c\n", "kcc/c.py": "import kcc.a\n"},
     [], [["kcc.a", "kcc.b", "kcc.c"]]),
    ({"kcc/a.py": "import kcc.b\n", "kcc/b.py": "import kcc.c\n", "kcc/c.py": ""}, [], []),
])
def test_the_checker_finds_cycles(graph, tmp_path, files, top_cycles, all_cycles):
    es = graph.edges(_tree(tmp_path, files))
    assert graph.cycles(es, top_level_only=True) == top_cycles
    assert graph.cycles(es, top_level_only=False) == all_cycles


def test_the_script_prints_a_summary(graph):
    text = graph.summary(ROOT)
    assert "kcc.speech     -> kcc.model" in text and "imports against the direction speech -> model -> compiler: 0" in text


def test_every_import_inside_a_function_has_its_measured_reason(graph):
    """Imports sit at the top of modules; the exceptions are the table in scripts/import_graph.py
    (a heavy or optional third-party package, a command's own modules, a measured start-up cost)."""
    found = graph.function_imports(ROOT)
    bad = [f"{path}:{line} imports {module}" for path, line, module in found if not graph.lazy_reason(path, module)]
    assert bad == [], "move these to the top of the module, or add a measured reason:\n" + "\n".join(bad)
    assert len(found) > 50           # the lister sees the lazy imports that exist (PyAV, onnx, commands)


@pytest.mark.parametrize("path, source, allowed", [
    ("kcc/speech/x.py", "def f():\n    import json\n", False),                    # stdlib: at the top
    ("kcc/speech/x.py", "def f():\n    from kcc.speech import voices\n", False),  # kcc: at the top
    ("kcc/speech/x.py", "async def f():\n    import av\n", True),                 # PyAV: measured cost
    ("kcc/speech/x.py", "def f():\n    def g():\n        from onnx import load\n", True),
    ("kcc/cli.py", "def cmd():\n    from kcc.speech.cli.say import run_cli\n", True),  # a command's modules
    ("kcc/cli.py", "def cmd():\n    import os\n", False),                         # ... not the stdlib
    ("kcc/model/pipeline.py", "def f():\n    from kcc.compiler.driver import compile_circuit\n", True),
    ("kcc/model/pipeline.py", "def f():\n    from kcc.compiler.runtime import aligned_empty\n", False),
])
def test_the_lazy_import_check_tells_allowed_from_not(graph, tmp_path, path, source, allowed):
    root = _tree(tmp_path, {path: source})
    (found,) = graph.function_imports(root)
    assert found[0] == path and (graph.lazy_reason(found[0], found[2]) is not None) == allowed
