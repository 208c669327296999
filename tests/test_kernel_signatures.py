"""Every registered kernel's argument list (kcc/ops/*: Kernel(args=...)) is its C definition's
parameter list in kcc/kernels/c: same order, same names, each kind's C type (registry.C_TYPES).
The emitter checks calls against the registry, so a registry that drifts from the C would let a
call through that the C reads differently."""
from __future__ import annotations

import re

import pytest

import kcc.ops  # noqa: F401  (op families register their kernels on import)
from kcc.kernels.registry import C_TYPES, IN_F32, I64, KERNELS, OUT_F32, Kernel

QUALIFIERS = re.compile(r"\b(KCC_RESTRICT|restrict|__restrict__)\b")


def c_params(source: str, name: str) -> list[tuple[str, str]]:
    """[(C type, name)] of the one `static <int|void> name(...)` definition in `source`."""
    defs = list(re.finditer(rf"^\s*static\s+(?:inline\s+)?(?:int|void)\s+{name}\s*\(([^)]*)\)\s*\{{",
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
