"""What CompiledCircuit.run accepts before the C runs: inputs of another dtype only where every
value survives the conversion (an int64 id past int32 would wrap into a valid row and pass the C's
range check), and a caller's arena only as memory the C may write (C-contiguous, writeable, not
an output's)."""
from __future__ import annotations

import numpy as np
import pytest

from kcc.compiler.one_op import compile_op
from kcc.compiler.runtime import KccRunError, aligned_empty
from kcc.ops import Case

TABLE = np.arange(12, dtype=np.float32).reshape(4, 3)


@pytest.fixture(scope="module")
def lookup():
    return compile_op("embedding", [Case("c", {"ids": np.array([[1, 2]], np.int32)}, {"table": TABLE}, {}, {})])


def test_an_int64_id_that_fits_is_converted(lookup):
    got = lookup.run({"c0_ids": np.array([[3, 0]], np.int64)}).outputs["c0_out"]
    assert np.array_equal(got, TABLE[[[3, 0]]])


@pytest.mark.parametrize("bad", [2**32 + 1, -2**31 - 1, 2**63 - 1])     # 2**32 + 1 would wrap to row 1
def test_an_int64_id_past_int32_is_refused_not_wrapped(lookup, bad):
    with pytest.raises(ValueError, match=r"input 'c0_ids': values .* do not fit int32"):
        lookup.run({"c0_ids": np.array([[bad, 2]], np.int64)})


def test_an_id_of_another_kind_is_refused(lookup):
    with pytest.raises(ValueError, match=r"input 'c0_ids': dtype float32, expected int32"):
        lookup.run({"c0_ids": np.array([[1.0, 2.0]], np.float32)})


def test_an_out_of_range_int32_id_is_the_cs_refusal(lookup):
    with pytest.raises(KccRunError):
        lookup.run({"c0_ids": np.array([[7, 2]], np.int32)})


def _arena(lookup):
    a = aligned_empty(max(64, lookup.plan.arena_bytes), 64)
    a[:] = 0
    return a


@pytest.mark.parametrize("make", ["read_only", "reversed", "not_an_array"])
def test_an_arena_the_c_must_not_write_is_refused(lookup, make):
    buf = aligned_empty(2 * max(64, lookup.plan.arena_bytes) + 64, 64)
    buf[:] = 0
    if make == "read_only":
        arena = _arena(lookup)
        arena.setflags(write=False)
    elif make == "reversed":                       # its data pointer is its last byte: the C would write past it
        arena = buf[: buf.size // 2][::-1]
    else:
        arena = bytearray(buf.size)
    with pytest.raises(ValueError, match="the arena must be a C-contiguous, writeable ndarray"):
        lookup.run({"c0_ids": np.array([[1, 2]], np.int32)}, arena=arena)
    assert not buf.any()


def test_an_output_inside_the_arena_is_refused(lookup):
    arena = _arena(lookup)
    out = arena[: 2 * 3 * 4].view(np.float32).reshape(1, 2, 3)
    with pytest.raises(ValueError, match="out 'c0_out': shares memory with an input, the arena or another output"):
        lookup.run({"c0_ids": np.array([[1, 2]], np.int32)}, arena=arena, out={"c0_out": out})
