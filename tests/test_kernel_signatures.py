"""Every registered kernel's argument list (kcc/ops/*: Kernel(args=...)) is its C definition's
parameter list in kcc/kernels/c: same order, same names, each kind's C type (registry.C_TYPES).
The emitter checks calls against the registry, so a registry that drifts from the C would let a
call through that the C reads differently. Registration is explicit (kcc.ops.load()) and the
layering one way: the registry imports nothing from the op families, and every op and kernel
module imports on its own in a fresh interpreter."""
from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

import kcc.ops
from kcc.kernels.registry import C_TYPES, IN_F32, I64, KERNELS, OUT_F32, Kernel, RegistryError, register

kcc.ops.load()
ROOT = Path(__file__).resolve().parents[1]

QUALIFIERS = re.compile(r"\b(KCC_RESTRICT|restrict|__restrict__)\b")


def c_params(source: str, name: str) -> list[tuple[str, str]]:
    """[(C type, name)] of the one `static <int|int64_t|void> name(...)` definition in `source`."""
    defs = list(re.finditer(rf"^\s*static\s+(?:inline\s+)?(?:int|int64_t|void)\s+{name}\s*\(([^)]*)\)\s*\{{",
                            source, re.MULTILINE))
    assert len(defs) == 1, f"{name}: {len(defs)} definitions in its source"
    params = []
    for raw in defs[0].group(1).split(","):
        text = " ".join(QUALIFIERS.sub(" ", raw).split())
        if text == "void":
            continue
        m = re.fullmatch(r"(.*?)\s*\b([A-Za-z_]\w*)", text)
        assert m, f"{name}: cannot read parameter {raw!r}"
        params.append((m.group(1).replace(" *", "*").replace("*", " *").strip(), m.group(2)))
    return params


def drift(kernel: Kernel) -> list[str]:
    """What differs between the registry's args and the C parameters (empty: nothing)."""
    c = c_params(kernel.c_source(), kernel.name)
    py = [(" ".join(C_TYPES[kind].replace("*", " *").split()), arg) for arg, kind in kernel.args]
    if len(c) != len(py):
        return [f"{len(py)} args registered, {len(c)} in C: {[a for _, a in py]} vs {[a for _, a in c]}"]
    return [f"arg {i}: registry {p_type} {p_name}, C {c_type} {c_name}"
            for i, ((p_type, p_name), (c_type, c_name)) in enumerate(zip(py, c))
            if (p_type, p_name) != (c_type, c_name)]


def test_the_parser_reads_types_and_names_and_sees_a_renamed_parameter(tmp_path):
    src = ("/* kcc_demo_f32(x) */\nstatic int kcc_demo_f32(const float *KCC_RESTRICT x, const int32_t *ids,\n"
           "                        int64_t n, float eps, float *KCC_RESTRICT win)\n{\n    return 0;\n}\n")
    assert c_params(src, "kcc_demo_f32") == [("const float *", "x"), ("const int32_t *", "ids"),
                                             ("int64_t", "n"), ("float", "eps"), ("float *", "win")]
    (tmp_path / "demo.c").write_text(src)

    class Demo(Kernel):
        @property
        def path(self):
            return tmp_path / "demo.c"

    ok = Demo("kcc_demo_f32", "demo.c", (("x", IN_F32), ("ids", "in_i32"), ("n", I64), ("eps", "f32"),
                                         ("win", OUT_F32)), contract=None)
    assert drift(ok) == []
    renamed = Demo("kcc_demo_f32", "demo.c", ok.args[:4] + (("out", OUT_F32),), contract=None)
    assert drift(renamed) == ["arg 4: registry float * out, C float * win"]
    retyped = Demo("kcc_demo_f32", "demo.c", (("x", I64),) + ok.args[1:], contract=None)
    assert drift(retyped) == ["arg 0: registry int64_t x, C const float * x"]
    short = Demo("kcc_demo_f32", "demo.c", ok.args[:4], contract=None)
    assert drift(short)[0].startswith("4 args registered, 5 in C")


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_registered_signature_matches_the_c_definition(name):
    assert drift(KERNELS[name]) == []


def test_every_kernel_file_is_registered_or_required():
    """No C file under kcc/kernels/c is orphaned from the registry (headers aside)."""
    from kcc.kernels.registry import C_DIR
    sources = {k.source for k in KERNELS.values()}
    assert sorted(p.name for p in C_DIR.glob("*.c")) == sorted(sources)


def _modules(package: str) -> list[str]:
    folder = ROOT / package.replace(".", "/")
    return sorted(f"{package}.{p.stem}" if p.stem != "__init__" else package for p in folder.glob("*.py"))


STANDALONE = [*_modules("kcc.ops"), *_modules("kcc.kernels"), "kcc.compiler.costs", "kcc.compiler.one_op"]


def test_every_op_and_kernel_module_imports_alone_in_a_fresh_interpreter():
    """No import cycle: each module, imported first in its own interpreter, loads; and the
    registry alone pulls in no op family."""
    script = ("import importlib, sys\n"
              "for name in sys.argv[1:]:\n"
              "    importlib.import_module(name)\n")
    failed = {}
    for name in STANDALONE:
        proc = subprocess.run([sys.executable, "-c", script, name], cwd=ROOT, capture_output=True, text=True)
        if proc.returncode != 0:
            failed[name] = proc.stderr.strip().splitlines()[-1]
    assert failed == {}
    alone = subprocess.run([sys.executable, "-c", "import sys, kcc.kernels.registry; "
                            "print(sorted(m for m in sys.modules if m.startswith('kcc.ops')))"],
                           cwd=ROOT, capture_output=True, text=True, check=True)
    assert alone.stdout.strip() == "[]"


def test_the_kernel_package_never_imports_the_op_families():
    """Not even inside a function (the lazy import that made the kernels <-> ops cycle)."""
    offenders = []
    for path in (ROOT / "kcc/kernels").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            offenders += [f"{path.name}: {n}" for n in names if n == "kcc.ops" or n.startswith("kcc.ops.")]
    assert offenders == []


def test_load_lists_every_family_module_once():
    from kcc.ops import FAMILIES
    modules = {m.rsplit(".", 1)[1] for m in _modules("kcc.ops")} - {"ops", "core", "cost_terms"}
    assert sorted(FAMILIES) == sorted(modules) and len(set(FAMILIES)) == len(FAMILIES)


@pytest.mark.parametrize("kernel, match", [
    (Kernel("kcc_linear_f32", "gemm_f32.c", (), KERNELS["kcc_linear_f32"].contract), "registered twice"),
    (Kernel("kcc_nope_f32", "nope_f32.c", (), KERNELS["kcc_linear_f32"].contract), r"nope_f32.c does not exist"),
    (Kernel("kcc_nope_f32", "gemm_f32.c", (("x", "f64"),), KERNELS["kcc_linear_f32"].contract),
     "argument 'x' has unknown kind 'f64'"),
])
def test_register_refuses_what_the_emitter_could_not_use(kernel, match):
    before = dict(KERNELS)
    with pytest.raises(RegistryError, match=match):
        register(kernel)
    assert KERNELS == before                      # nothing half-registered, the original kept
