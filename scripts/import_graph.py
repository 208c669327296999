"""The import graph of the kcc package, read from the source with ast (nothing is imported).

Prints the edges between kcc's packages (kcc.speech -> kcc.model: how many imports, how many
of them inside functions), the imports that point the wrong way (tests/test_import_graph.py
asserts there are none), and the import cycles between modules. Usage:

    python scripts/import_graph.py [ROOT]      # ROOT: the checkout (default: this script's parent)
"""
from __future__ import annotations

import ast
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

# Imports point down only, ARCHITECTURE.md's chain: speech -> model -> compiler -> ops -> kernels,
# with kcc.ir (the graph), kcc.weights, kcc.files and kcc.limits' readers beside them. A package on
# the left never imports one on the right.
FORBIDDEN: dict[str, tuple[str, ...]] = {
    "kcc.model": ("kcc.speech",),
    "kcc.compiler": ("kcc.speech", "kcc.model"),
    "kcc.weights": ("kcc.speech",),
    "kcc.circuits": ("kcc.speech", "kcc.model", "kcc.compiler"),
    "kcc.ops": ("kcc.speech", "kcc.model", "kcc.compiler"),
    "kcc.kernels": ("kcc.speech", "kcc.model", "kcc.compiler", "kcc.ops"),
    "kcc.ir": ("kcc.speech", "kcc.model", "kcc.compiler", "kcc.ops", "kcc.kernels", "kcc.circuits"),
}


# Imports are at the top of a module, so the graph above is the real one. These are the only ones
# kept inside functions, each for the start-up it saves (wall time and peak RSS of a bare
# `python -c "import X"`, Sapphire Rapids, warm page cache; tests/test_import_graph.py holds every
# function-level import to this table).
LAZY_MODULES: dict[str, str] = {   # third-party package -> why it is imported only where it is used
    "av": "PyAV 70-190 ms, 32 MB: only formats other than WAV need it",
    "onnx": "0.69 s, 44 MB: only the one-time import of the real model's ONNX file",
    "ray": "0.39 s, 70 MB: only `kcc batch --engine ray`",
    "matplotlib": "0.62 s, 63 MB: only `kcc xray --plot`",
    "uvicorn": "90 ms, 26 MB: only `kcc serve`",
    "misaki": "a language's G2P is imported when that language is first read: misaki.en 2.0 s, 284 MB "
              "with spaCy (0.12 s with kcc's stand-in), misaki.espeak 0.41 s, zh 0.36 s, ja 0.48 s",
    "pyopenjtalk": "0.31 s, 91 MB: Japanese only",
    "phonemizer": "0.37 s, 62 MB: the espeak-ng fallback only",
    "jieba": "40 ms and its dictionary: Mandarin only",
    "num2words": "40 ms: only when a number is read",
    "lxml": "40 ms: `kcc book` HTML and EPUB only", "pypdf": "120 ms, 30 MB: `kcc book` PDF only",
    "ebooklib": "`kcc book` EPUB only", "markdown_it": "50 ms: `kcc book` Markdown only",
    "mutagen": "`kcc book` .m4b tags only",
}
# A command-line module imports inside each command what that command runs: `kcc --help` takes
# 0.03 s and 13 MB so, 0.39-0.49 s and 51 MB with every command's modules imported at the top.
DISPATCHERS: frozenset[str] = frozenset({"kcc/cli.py", "kcc/speech/cli/commands.py", "kcc/speech/serve/cli.py", "kcc/speech/batch/cli.py",
                                         "kcc/speech/book/cli.py", "kcc/speech/voice_design/cli.py"})
# (file, module) -> why: imports that close an allowed cycle (ALLOWED_CYCLES in the test).
LAZY_EDGES: dict[tuple[str, str], str] = {
    ("kcc/weights/real_model.py", "kcc.weights.onnx_file"):
        "the importer reads the real model's constants; the real model runs the importer once",
    ("kcc/compiler/precision.py", "kcc.ops"): "59 ms: the op table compiles a model; naming, checking and "
                                              "loading a precision (every command) does not need it",
    ("kcc/compiler/precision.py", "kcc.ops.conv_int8"): "as kcc.ops",
    ("kcc/circuits/__init__.py", "kcc.ops"): "59 ms: a circuit's op names are checked against the op table when "
                                             "it is compiled; the pipeline reads the circuit list on every load",
    ("kcc/compiler/precision.py", "kcc.compiler.passes"): "imports kcc.ops (59 ms): only when compiling",
    ("kcc/model/pipeline.py", "kcc.compiler.driver"): "57 ms: a warm `kcc say` maps a compiled artifact and "
                                                      "never compiles",
    ("kcc/model/pipeline.py", "kcc.circuits"): "as the driver: a warm start reads no circuit (tests/test_model_store.py)",
    ("kcc/speech/g2p/en_cache.py", "importlib"): "importlib.metadata, 16 ms and 32 modules: read only when an "
                                                 "English G2P is built",
    ("kcc/speech/worker_budget.py", "kcc.model.loader"): "the memory check asks the system only when a "
                                                         "command starts workers; `kcc --help` does not",
    ("kcc/speech/serve/cli.py", "asyncio"): "50 ms: only `kcc wyoming` (the HTTP server's uvicorn brings its own)",
    ("kcc/speech/g2p/normalize_rules/__init__.py", "kcc.speech.g2p.normalize_rules.intl"):
        "1.4 ms of every English G2P start-up: the es/fr/it/pt-br/hi tables are read only for those languages",
    ("kcc/model/model_store.py", "kcc.weights.onnx_file"):
        "11 ms of every model load (the ONNX graph readers): only a checkpoint path given by the user is read",
    ("kcc/api.py", "asyncio"): "28 ms of `import kcc; kcc.Kokoro()`: only astream (an event loop's caller) uses it",
    ("kcc/model/__init__.py", "kcc.model"):
        "any kcc.model submodule runs the package first; kcc.model.load pulls the compiler (0.17 s, 34 MB)",
}


def lazy_reason(path: str, module: str) -> str | None:
    """Why `path` (relative to the checkout) may import `module` inside a function, or None."""
    reason = LAZY_MODULES.get(module.split(".")[0]) or LAZY_EDGES.get((path, module))
    if reason is None and path in DISPATCHERS and module.split(".")[0] == "kcc":
        reason = "a command imports what it runs"
    return reason


def function_imports(root: Path) -> list[tuple[str, int, str]]:
    """(path, line, module) of every import inside a function under kcc/ (TYPE_CHECKING aside)."""
    found = []
    for path in sorted((root / "kcc").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for fn in ast.walk(tree):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for node in ast.walk(fn):
                    if isinstance(node, ast.ImportFrom):
                        found.append((str(path.relative_to(root)), node.lineno, "." * node.level + (node.module or "")))
                    elif isinstance(node, ast.Import):
                        found += [(str(path.relative_to(root)), node.lineno, a.name) for a in node.names]
    return sorted(set(found))


@dataclass(frozen=True)
class Edge:
    source: str            # importing module, e.g. kcc.speech.cli.say
    target: str            # imported kcc module, e.g. kcc.model.pipeline
    line: int
    top_level: bool        # False: inside a function (runs when called, not when imported)
    type_only: bool = False  # under `if TYPE_CHECKING:` (never runs: counts for the direction, not for cycles)


def modules(root: Path) -> dict[str, Path]:
    """Every kcc module: dotted name -> file (a package is its __init__.py)."""
    out = {}
    for path in sorted((root / "kcc").rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _resolve(name: str, known: dict[str, Path]) -> str | None:
    """The longest known module a dotted import names (`from kcc.model import load` -> kcc.model)."""
    while name:
        if name in known:
            return name
        name = name.rpartition(".")[0]
    return None


def _inside(tree: ast.AST) -> tuple[set[int], set[int]]:
    """(ids of the nodes inside a function, ids of those under `if TYPE_CHECKING:`)."""
    inner, typing_only = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            inner.update(id(n) for n in ast.walk(node) if n is not node)
        elif isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            typing_only.update(id(n) for n in ast.walk(node) if n is not node)
    return inner, typing_only


def edges(root: Path) -> list[Edge]:
    known = modules(root)
    out = []
    for mod, path in known.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        inner, typing_only = _inside(tree)
        package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")
                    up = up[:len(up) - (node.level - 1)]
                    base = ".".join(up + ([base] if base else []))
                # `from kcc.speech import say` imports the module kcc.speech.cli.say
                names = [f"{base}.{a.name}" for a in node.names] or [base]
            else:
                continue
            for name in names:
                target = _resolve(name, known)
                if target is not None and target != mod:
                    out.append(Edge(mod, target, node.lineno, id(node) not in inner | typing_only,
                                    id(node) in typing_only))
    return out


def package_of(mod: str) -> str:
    """kcc.speech.serve.app -> kcc.speech; kcc.cli -> kcc.cli (the first two parts)."""
    return ".".join(mod.split(".")[:2])


def wrong_way(es: list[Edge]) -> list[Edge]:
    return [e for e in es
            if any(e.source == p or e.source.startswith(p + ".") for p in FORBIDDEN)
            and any(e.target == t or e.target.startswith(t + ".")
                    for p, ts in FORBIDDEN.items() if e.source == p or e.source.startswith(p + ".") for t in ts)]


def cycles(es: list[Edge], top_level_only: bool) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    graph: dict[str, set[str]] = {}
    for e in es:
        if not e.type_only and (e.top_level or not top_level_only):
            graph.setdefault(e.source, set()).add(e.target)
            graph.setdefault(e.target, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:                  # recursion depth: the module count (~200)
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def summary(root: Path) -> str:
    es = edges(root)
    lines = [f"{len(modules(root))} modules, {len(es)} imports between them "
             f"({sum(not e.top_level for e in es)} inside functions)", "", "package edges (imports, inside functions):"]
    pairs = Counter((package_of(e.source), package_of(e.target)) for e in es
                    if package_of(e.source) != package_of(e.target))
    inner = Counter((package_of(e.source), package_of(e.target)) for e in es
                    if package_of(e.source) != package_of(e.target) and not e.top_level)
    for (a, b), n in sorted(pairs.items()):
        lines.append(f"  {a:<14} -> {b:<14} {n:4d} ({inner[(a, b)]})")
    bad = wrong_way(es)
    lines += ["", f"imports against the direction speech -> model -> compiler: {len(bad)}"]
    lines += [f"  {e.source}:{e.line} -> {e.target}{'' if e.top_level else ' (in a function)'}" for e in bad]
    lazy = function_imports(root)
    unexplained = [(p, n, m) for p, n, m in lazy if not lazy_reason(p, m)]
    lines += ["", f"imports inside functions: {len(lazy)}, without a reason in the lazy table: {len(unexplained)}"]
    lines += [f"  {p}:{n} imports {m}" for p, n, m in unexplained]
    for top_only, what in ((True, "module-level imports"), (False, "all imports, inside functions too")):
        cs = cycles(es, top_only)
        lines += ["", f"cycles ({what}): {len(cs)}"]
        lines += [f"  {' <-> '.join(c)}" for c in cs]
    return "\n".join(lines)


if __name__ == "__main__":
    print(summary(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent))
