"""Prebuilt stage libraries (kcc.compiler.prebuilt): build_library takes a listed library for the
exact source and flags without a compiler, checks its digest, and compiles anything else; the
shipped int8 table is what the real import records. (The wheel end to end: tests/test_wheel.py.)"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from kcc.compiler import prebuilt
from kcc.compiler.build import BuildError, BuildOptions, build_library, compile_to, compiler, toolchain_identity

SOURCE = "int kcc_prebuilt_probe(void) { return 7; }\n"


@pytest.fixture
def install(tmp_path, monkeypatch):
    """A prebuilt directory holding SOURCE's library for the default BuildOptions, this machine."""
    opts = BuildOptions()
    src = tmp_path / "probe.c"
    src.write_text(SOURCE)
    compile_to(compiler(), opts.flags(), src, tmp_path / "probe.so", "probe")
    root = tmp_path / "prebuilt"
    prebuilt.write(root, prebuilt.machine(), "test cc", opts.flags(), [("probe", SOURCE, tmp_path / "probe.so")])
    monkeypatch.setattr(prebuilt, "ROOT", root)
    monkeypatch.setenv("KCC_CACHE_DIR", str(tmp_path / "cache"))
    prebuilt._table.cache_clear()
    yield root / prebuilt.machine()
    prebuilt._table.cache_clear()


def _no_compiler(monkeypatch):
    monkeypatch.setenv("CC", "/nonexistent/kcc-no-cc")


def test_a_listed_source_takes_the_prebuilt_library_without_a_compiler(install, monkeypatch):
    _no_compiler(monkeypatch)
    built = build_library(SOURCE, BuildOptions(), name="probe")
    assert built.library == install / "probe.so" and built.cached
    import ctypes
    assert ctypes.CDLL(str(built.library)).kcc_prebuilt_probe() == 7
    assert "no C compiler" in toolchain_identity() and prebuilt.identity() in toolchain_identity()


@pytest.mark.parametrize("change", [
    lambda s, o: (s + "\n", o),                                          # one byte more of source
    lambda s, o: (s.replace("7", "8"), o),                               # other code
    lambda s, o: (s, BuildOptions(opt="-O3")),                           # other flags
    lambda s, o: (s, BuildOptions(native=True)),
    lambda s, o: (s, BuildOptions(profile=True)),
])
def test_anything_else_compiles_and_without_a_compiler_names_it(install, monkeypatch, change):
    _no_compiler(monkeypatch)
    source, opts = change(SOURCE, BuildOptions())
    with pytest.raises(BuildError, match="no usable C compiler '/nonexistent/kcc-no-cc'.*prebuilt libraries cover"):
        build_library(source, opts, name="probe")


@pytest.mark.parametrize("damage", [
    lambda p: p.write_bytes(p.read_bytes() + b"\0"),                     # appended
    lambda p: p.write_bytes(b"\x7fELF" + p.read_bytes()[4:-1] + b"x"),   # altered
    lambda p: p.unlink(),                                                # missing
    lambda p: (p.unlink(), p.mkdir()),                                   # not a file
])
def test_a_damaged_prebuilt_library_is_refused_never_loaded(install, monkeypatch, damage):
    damage(install / "probe.so")
    with pytest.raises(BuildError, match="damaged install"):
        build_library(SOURCE, BuildOptions(), name="probe")


@pytest.mark.parametrize("table", ["{", "[]", '{"table_version": 99}', '{"libraries": {}}'])
def test_a_table_that_is_not_one_is_refused(install, table):
    (install / prebuilt.TABLE).write_text(table)
    prebuilt._table.cache_clear()
    with pytest.raises(prebuilt.PrebuiltError, match="table"):
        prebuilt.find(SOURCE, BuildOptions().flags())


def test_kcc_prebuilt_0_compiles_instead(install, monkeypatch):
    monkeypatch.setenv("KCC_PREBUILT", "0")
    built = build_library(SOURCE, BuildOptions(), name="probe")
    assert built.library.parent != install and not built.cached
    _no_compiler(monkeypatch)
    assert prebuilt.identity() == "none"


def test_the_shipped_int8_table_is_what_the_real_import_records():
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
    try:
        from make_int8_table import recorded_int8
    finally:
        sys.path.pop(0)
    from kcc.weights.importers.onnx_kokoro import int8_tensors, skeleton
    assert int8_tensors() == recorded_int8()
    ck = skeleton()
    assert sorted(ck.quant) == int8_tensors() and len(ck.tensors) == 688 - 2      # the pooler is not imported
    assert all(q.q.shape == ck.tensors[k].shape for k, q in ck.quant.items())
