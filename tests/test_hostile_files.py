"""Hostile checkpoint and voice files: each class of refusal swept over its variants, each
asserting the named error and its reason; the caps are checked before the memory they guard
is allocated. scripts/sanitize.sh repeats this module with ASan + UBSan (the marker below)."""
from __future__ import annotations

import contextlib
import os
import re
import tracemalloc
import zipfile

import numpy as np
import pytest

from fuzz.hostile_files import (GOOD, STORAGE, checkpoint_obj, good_npz_tensors, npy_bytes, npz_members,
                                patch_directory, pth_members, raw_zip, ref, write_pth)
from kcc.weights.checkpoint import (CHECKPOINT_LIMITS, MAX_DEPTH, MAX_TENSOR_ELEMENTS, SECTIONS, VOICE_LIMITS,
                            CheckpointError, CheckpointLimitError, load_checkpoint, load_torch_zip, read_npy,
                            read_npz)
from kcc.weights.torch_zip import TensorRef, pickle_bytes
from kcc.speech.voices import MAX_STYLE_ABS, PACK_ROWS, STYLE_DIM, VoiceError, load_voice, validate_pack

pytestmark = pytest.mark.sanitize

BIG = 2**62


def refused(path, match, cls=CheckpointError, **kw):
    with pytest.raises(cls, match=match) as info:
        load_checkpoint(path, **kw)
    assert str(path) in str(info.value)          # every refusal names the file
    return info.value


@contextlib.contextmanager
def allocates_under(limit: int = 64 << 20):
    """Fails unless what the block allocates (Python objects and numpy buffers, tracemalloc) peaks
    below `limit` bytes: the allocation itself, however high the process's resident set went before
    (a worker that ran the real model has peaked at gigabytes, which hides a 1 GiB allocation)."""
    tracemalloc.start()
    tracemalloc.reset_peak()
    try:
        yield
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < limit, f"{peak} bytes allocated before the refusal"


def test_the_allocation_guard_sees_an_allocation_whose_pages_are_never_touched():
    with pytest.raises(AssertionError, match="bytes allocated"):
        with allocates_under():
            np.empty(1 << 30, dtype=np.uint8)


def test_the_good_file_loads(tmp_path):
    ck = load_checkpoint(write_pth(tmp_path / "good.pth", checkpoint_obj()))
    assert sorted(ck.names()) == sorted(f"{s}.w" for s in SECTIONS)
    np.testing.assert_array_equal(ck.get("bert.w"), STORAGE.reshape(2, 3))


class TestTensorRecords:
    """Offsets, sizes and strides: every one that would read outside the storage is refused."""

    @pytest.mark.parametrize("stride", [(-1, 1), (3, -1), (-BIG, 1), (-(2**63), -(2**63))])
    def test_negative_stride(self, tmp_path, stride):
        refused(write_pth(tmp_path / "s.pth", checkpoint_obj(ref(stride=stride))), "negative offset, size or stride")

    @pytest.mark.parametrize("offset", [-1, -3, -BIG])
    def test_negative_offset(self, tmp_path, offset):
        refused(write_pth(tmp_path / "o.pth", checkpoint_obj(ref(offset=offset))), "negative offset, size or stride")

    def test_negative_size(self, tmp_path):
        refused(write_pth(tmp_path / "n.pth", checkpoint_obj(ref(size=(-2, 3)))), "negative offset, size or stride")

    @pytest.mark.parametrize("changes, last", [
        ({"offset": 1}, 6),                                # one past the end
        ({"offset": 6, "size": (1,), "stride": (1,)}, 6),
        ({"size": (3, 3)}, 8),                             # more rows than stored
        ({"stride": (4, 1)}, 6),                           # a stride that skips past the end
        ({"size": (2, 2), "stride": (BIG, 1)}, BIG + 1),   # would wrap a 64-bit byte offset
        ({"offset": BIG}, BIG + 5),
    ])
    def test_reach_past_the_storage(self, tmp_path, changes, last):
        refused(write_pth(tmp_path / "r.pth", checkpoint_obj(ref(**changes))), f"reaches element {last}, past")

    @pytest.mark.parametrize("changes, what", [
        ({"offset": True}, "storage offset is bool"),
        ({"offset": 0.0}, "storage offset is float"),
        ({"size": (2.0, 3)}, "size entry is float"),
        ({"size": (2, True)}, "size entry is bool"),
        ({"stride": ("3", 1)}, "stride entry is str"),
        ({"size": ((2,), 3)}, "size entry is tuple"),
        ({"size": 6}, "size is int, expected a tuple"),
        ({"size": (2, 3), "stride": (3,)}, "differ in length"),
        ({"numel": 7}, "declares 7 FloatStorage elements but its record holds 24 bytes"),
        ({"numel": -1}, "declares -1"),
        ({"numel": True}, "element count is bool"),
    ])
    def test_malformed_fields(self, tmp_path, changes, what):
        refused(write_pth(tmp_path / "m.pth", checkpoint_obj(ref(**changes))), what)

    def test_too_many_dims(self, tmp_path):
        refused(write_pth(tmp_path / "d.pth", checkpoint_obj(ref(size=(1,) * 17, stride=(1,) * 17))),
                "17 dims, more than 16", CheckpointLimitError)

    def test_size_one_dims_may_carry_any_stride(self, tmp_path):
        # torch writes odd strides on size-1 dims; they are never stepped, so never refused.
        ck = load_checkpoint(write_pth(tmp_path / "ok.pth", checkpoint_obj(ref(size=(1, 2, 3), stride=(BIG, 3, 1)))))
        np.testing.assert_array_equal(ck.get("bert.bad"), STORAGE.reshape(1, 2, 3))

    def test_strided_views_are_copied_exactly(self, tmp_path):
        ck = load_checkpoint(write_pth(tmp_path / "t.pth", checkpoint_obj(ref(size=(3, 2), stride=(1, 3)))))
        np.testing.assert_array_equal(ck.get("bert.bad"), STORAGE.reshape(2, 3).T)
        assert not ck.get("bert.bad").flags.writeable


class TestOutputCaps:
    """A zero-stride tensor (or many references to one storage) costs its full contiguous size."""

    @pytest.mark.parametrize("size, match", [
        ((MAX_TENSOR_ELEMENTS + 1,), "dim over"),
        ((2**20, 2**20), "1099511627776 elements, more than"),
        ((2**28,), "needs 1073741824 bytes, more than the 536870912-byte cap per tensor"),
        ((10**12, 10**12, 10**12), "dim over"),
    ])
    def test_zero_stride_giant(self, tmp_path, size, match):
        bad = ref(size=size, stride=(0,) * len(size))
        with allocates_under():
            refused(write_pth(tmp_path / "z.pth", checkpoint_obj(bad)), match, CheckpointLimitError)

    def test_total_output_is_capped(self, tmp_path):
        quarter = VOICE_LIMITS.max_total_bytes // 4 // 4            # float32 elements in a quarter of the cap
        obj = {f"t{i}": ref(size=(quarter,), stride=(0,)) for i in range(5)}
        with pytest.raises(CheckpointLimitError, match="tensors need more than the 8388608-byte cap in all"):
            load_torch_zip(write_pth(tmp_path / "v.pt", obj), what="voice")

    def test_many_references_to_one_storage(self, tmp_path):
        obj = checkpoint_obj()
        obj["bert"].update({f"r{i}": GOOD for i in range(CHECKPOINT_LIMITS.max_storage_refs)})
        refused(write_pth(tmp_path / "refs.pth", obj), "more than 8192 storage references", CheckpointLimitError)

    def test_many_references_in_a_voice(self, tmp_path):
        with pytest.raises(CheckpointLimitError, match="more than 16 storage references"):
            load_torch_zip(write_pth(tmp_path / "v.pt", [GOOD] * 17), what="voice")

    def test_references_share_memory_not_copies(self, tmp_path):
        obj = checkpoint_obj()
        obj["bert"].update({f"r{i}": GOOD for i in range(50)})
        ck = load_checkpoint(write_pth(tmp_path / "share.pth", obj))
        assert np.shares_memory(ck.get("bert.r0"), ck.get("bert.r49"))


def _members_of(path):
    with zipfile.ZipFile(path) as z:
        return [(i.filename, z.read(i)) for i in z.infolist()]


class TestZipContainer:
    def test_bomb_ratio(self, tmp_path):
        members = pth_members(checkpoint_obj()) + [("archive/data/pad", bytes(4 * 2**20))]
        path = raw_zip(tmp_path / "bomb.pth", members, zipfile.ZIP_DEFLATED)
        assert path.stat().st_size < 64 * 1024
        refused(path, "inflates .* to 4194304 .*more than 100x.*zip bomb", CheckpointLimitError)

    def test_declared_unpacked_total(self, tmp_path):
        path = write_pth(tmp_path / "big.pth", checkpoint_obj())
        patch_directory(path, "archive/data/0", file_size=2**31)
        refused(path, r"unpacks to 21474\d{5} bytes, more than the 1073741824-byte cap", CheckpointLimitError)

    def test_member_that_inflates_past_its_declared_size_is_cut_and_refused(self, tmp_path):
        path = raw_zip(tmp_path / "lie.pth", pth_members(checkpoint_obj()), zipfile.ZIP_DEFLATED)
        patch_directory(path, "archive/data/0", file_size=8)
        refused(path, "storage 0 declares 6 FloatStorage elements but its record holds 8 bytes|corrupt")

    @pytest.mark.parametrize("twin", ["archive/data.pkl", "archive/data/0"])
    def test_duplicate_members(self, tmp_path, twin):
        members = pth_members(checkpoint_obj())
        members.append((twin, dict(members)[twin][:-1] + b"\x00"))
        refused(raw_zip(tmp_path / "dup.pth", members), "duplicate member.*ambiguous")

    def test_too_many_members(self, tmp_path):
        members = pth_members(checkpoint_obj()) + [(f"archive/x{i}", b"") for i in range(16)]
        with pytest.raises(CheckpointLimitError, match="declares 19 members.*cap of 16"):
            load_torch_zip(raw_zip(tmp_path / "many.pt", members), what="voice")

    def test_forged_entry_count_is_refused_before_parsing(self, tmp_path):
        path = patch_directory(write_pth(tmp_path / "f.pth", checkpoint_obj()), "", entries=65535)
        refused(path, "declares 65535 members", CheckpointLimitError)

    def test_file_size_cap(self, tmp_path):
        path = tmp_path / "huge.pt"
        with open(path, "wb") as fh:                 # sparse: nothing is written or read
            fh.truncate(VOICE_LIMITS.max_file_bytes + 1)
        with pytest.raises(CheckpointLimitError, match="8388609 bytes, more than the 8388608-byte cap"):
            load_torch_zip(path, what="voice")

    def test_pickle_record_cap(self, tmp_path):
        with pytest.raises(CheckpointLimitError, match="data.pkl declares .* more than the 65536-byte cap"):
            load_torch_zip(write_pth(tmp_path / "p.pt", "x" * 70_000), what="voice")

    def test_pickle_opcode_cap(self, tmp_path):
        with pytest.raises(CheckpointLimitError, match="more than 10000 opcodes"):
            load_torch_zip(write_pth(tmp_path / "ops.pt", [None] * 10_001), what="voice")

    @pytest.mark.parametrize("fraction", [i / 16 for i in range(16)])
    def test_truncated(self, tmp_path, fraction):
        raw = write_pth(tmp_path / "g.pth", checkpoint_obj()).read_bytes()
        bad = tmp_path / "cut.pth"
        bad.write_bytes(raw[: int(len(raw) * fraction)])
        refused(bad, "not a torch zip checkpoint|corrupt|missing|truncated")

    def test_every_single_byte_flip_is_loaded_or_refused_by_name(self, tmp_path):
        raw = write_pth(tmp_path / "g.pth", checkpoint_obj()).read_bytes()
        bad = tmp_path / "flip.pth"
        outcomes = {"loaded": 0, "refused": 0}
        for at in range(len(raw)):
            flipped = bytearray(raw)
            flipped[at] ^= 0x5A
            bad.write_bytes(bytes(flipped))
            try:
                ck = load_checkpoint(bad)
                assert all(isinstance(v, np.ndarray) for v in ck.tensors.values())
                outcomes["loaded"] += 1
            except CheckpointError:
                outcomes["refused"] += 1
        assert outcomes["refused"] > 0 and outcomes["loaded"] > 0     # padding bytes do not matter

    def test_big_endian_byteorder_record(self, tmp_path):
        refused(write_pth(tmp_path / "be.pth", checkpoint_obj(), records={"byteorder": b"big"}), "byte order b'big'")

    def test_missing_storage_record(self, tmp_path):
        refused(write_pth(tmp_path / "ms.pth", checkpoint_obj(), storages={}), "record archive/data/0 is missing")


def _raw_pickle(*body: bytes) -> bytes:
    return b"\x80\x04" + b"".join(body) + b"."


class TestPickleRecord:
    @pytest.mark.parametrize("put", [b"r" + (2**32 - 1).to_bytes(4, "little"), b"r" + (2**27).to_bytes(4, "little"),
                                     b"q\xff", b"p4000000000\n"])
    def test_a_memo_index_past_the_opcodes_is_refused_before_the_unpickler_grows_its_memo(self, tmp_path, put):
        path = write_pth(tmp_path / "memo.pth", None, pickle=_raw_pickle(b"}", put))
        with allocates_under():
            refused(path, r"malformed pickle record: memo index \d+ at byte \d+ after 2 opcodes")

    @pytest.mark.parametrize("opcode, width, name", [
        (b"\x8e", "<Q", "bytes8"), (b"\x8d", "<Q", "unicodestring8"), (b"B", "<I", "bytes4"),
        (b"X", "<I", "unicodestring4"), (b"\x8a", "<B", "long1"), (b"\x8b", "<i", "long4"),
    ])
    def test_counted_lengths_past_the_record(self, tmp_path, opcode, width, name):
        import struct
        n = {"<Q": 2**40, "<I": 2**31, "<B": 200, "<i": 2**30}[width]
        path = write_pth(tmp_path / "len.pth", None, pickle=_raw_pickle(opcode + struct.pack(width, n), b"abc"))
        with allocates_under():
            refused(path, "malformed pickle record")

    def test_frame_past_the_record(self, tmp_path):
        import struct
        path = write_pth(tmp_path / "frame.pth", None, pickle=_raw_pickle(b"\x95" + struct.pack("<Q", 2**40), b"N"))
        refused(path, "frame at byte 2 runs past the record's end")

    @pytest.mark.parametrize("body", [
        b"]" * 100_000 + b"a" * 99_999,                                  # lists pushed, then nested
        b"]q\x00" + b"]h\x00aq\x00" * 50_000,                            # nested through the memo
        b"(" * 60_000 + b"t" * 60_000,                                   # tuples by marks
        b"}" + b"X\x01\x00\x00\x00k}" * 50_000 + b"s" * 50_000,          # dicts in dicts
    ])
    def test_deep_nesting(self, tmp_path, body):
        refused(write_pth(tmp_path / "deep.pth", None, pickle=_raw_pickle(body)),
                f"nest deeper than {MAX_DEPTH}", CheckpointLimitError)

    def test_shared_substructure_is_walked_once(self, tmp_path):
        # 30 levels of [x, x]: 2**30 paths through 30 objects, checked in 30 steps.
        body = b"]q\x00" + b"](h\x00h\x00eq\x00" * 30
        assert isinstance(load_torch_zip(write_pth(tmp_path / "dag.pth", None, pickle=_raw_pickle(body))), list)

    def test_cycle(self, tmp_path):
        refused(write_pth(tmp_path / "cyc.pth", None, pickle=_raw_pickle(b"]q\x00h\x00a")), "contains itself")

    @pytest.mark.parametrize("module, name, match", [
        ("os", "system", "refusing pickle global os.system"),
        ("builtins", "eval", "refusing pickle global builtins.eval"),
        ("numpy", "frombuffer", "refusing pickle global numpy.frombuffer"),
        ("torch", "BFloat16Storage", "unsupported storage type torch.BFloat16Storage"),
        ("torch._utils", "_rebuild_qtensor", "refusing pickle global"),
    ])
    def test_globals(self, tmp_path, module, name, match):
        body = b"c" + f"{module}\n{name}\n".encode() + b"X\x01\x00\x00\x00x\x85R"
        refused(write_pth(tmp_path / "g.pth", None, pickle=_raw_pickle(body)), match)

    @pytest.mark.parametrize("pid, match", [
        (("storage",), "unexpected persistent id"),
        (["storage", 1, 2, 3, 4], "unexpected persistent id"),
        (("module", 1, 2, 3, 4), "unexpected persistent id"),
    ])
    def test_persistent_ids(self, tmp_path, pid, match):
        body = pickle_bytes(pid)[2:-1] + b"Q"
        refused(write_pth(tmp_path / "pid.pth", None, pickle=_raw_pickle(body)), match)

    @pytest.mark.parametrize("key", ["../0", "", "x" * 65, "a/b"])
    def test_storage_keys(self, tmp_path, key):
        refused(write_pth(tmp_path / "key.pth", checkpoint_obj(ref(storage=key))), "is not a short name")

    def test_a_forged_storage_tuple_is_not_a_storage(self, tmp_path):
        # (bytes, dtype)-looking data straight from the pickle may not stand in for a storage record.
        body = (b"ctorch._utils\n_rebuild_tensor_v2\n(C\x04abcdK\x00(K\x01t(K\x01t\x89}tR")
        refused(write_pth(tmp_path / "forge.pth", None, pickle=_raw_pickle(body)), "not a storage record")

    @pytest.mark.parametrize("state", [
        b"}X\x05\x00\x00\x00dtypeX\x01\x00\x00\x00Os",            # BUILD with a __dict__ update
        b"N}X\x05\x00\x00\x00dtypeX\x01\x00\x00\x00Os\x86",      # BUILD with slot state
    ])
    def test_build_cannot_rewrite_a_storage_type(self, tmp_path, state):
        body = b"ctorch\nFloatStorage\n" + state + b"b"
        refused(write_pth(tmp_path / "build.pth", None, pickle=_raw_pickle(body)), "corrupt record")

    def test_build_cannot_rewrite_a_storage_record(self, tmp_path):
        # BINPERSID's result, then BUILD swapping its bytes and dtype before a tensor uses it.
        pid = pickle_bytes(("storage", TensorRef("0", "FloatStorage", 6, 0, (), ()), "0", "cpu", 6))
        pid = pid[2:-1].replace(pickle_bytes(TensorRef("0", "FloatStorage", 6, 0, (), ()))[2:-1],
                                b"ctorch\nFloatStorage\n")
        body = (b"ctorch._utils\n_rebuild_tensor_v2\n(" + pid + b"Q}X\x04\x00\x00\x00dataC\x08abcdefghsb"
                b"K\x00(K\x02t(K\x01t\x89}tR")
        refused(write_pth(tmp_path / "build.pth", None, pickle=_raw_pickle(body)), "corrupt record")

    def test_build_on_a_global_does_not_reach_the_next_load(self, tmp_path):
        # Slot state sets attributes on what GLOBAL returned: here the OrderedDict stand-in.
        body = b"ccollections\nOrderedDict\nN}X\x07\x00\x00\x00__len__K\x05s\x86b"
        refused(write_pth(tmp_path / "taint.pth", None, pickle=_raw_pickle(body)), "top level is type")
        clean = load_torch_zip(write_pth(tmp_path / "clean.pth", None,
                                         pickle=_raw_pickle(b"ccollections\nOrderedDict\n)RX\x01\x00\x00\x00aK\x01s")))
        assert len(clean) == 1 and dict(clean) == {"a": 1}

    @pytest.mark.parametrize("error, cls, match", [
        (MemoryError, CheckpointLimitError, "out of memory while loading"),
        (RecursionError, CheckpointLimitError, "nested too deeply"),
        (KeyError, CheckpointError, "corrupt record: KeyError"),
    ])
    def test_stray_exceptions_become_named_errors(self, tmp_path, monkeypatch, error, cls, match):
        import kcc.weights.checkpoint as ckmod

        def boom(self):
            raise error("synthetic")
        monkeypatch.setattr(ckmod._RestrictedUnpickler, "load", boom)
        refused(write_pth(tmp_path / "boom.pth", checkpoint_obj()), match, cls)


def test_out_of_memory_while_converting_tensors(tmp_path, monkeypatch):
    import kcc.weights.checkpoint as ckmod

    def boom(*_a):
        raise MemoryError
    monkeypatch.setattr(ckmod, "_add_tensor", boom)
    refused(write_pth(tmp_path / "oom.pth", checkpoint_obj()), "out of memory while loading", CheckpointLimitError)


class TestStructure:
    @pytest.mark.parametrize("obj, match", [
        ([GOOD], "top level is list"),
        (GOOD, "top level is ndarray"),
        (None, "top level is NoneType"),
        ("bert", "top level is str"),
        ({**checkpoint_obj(), 3: {}}, "top level has a int key 3"),
        ({**checkpoint_obj(), ("a",): {}}, "top level has a tuple key"),
        ({**checkpoint_obj(), "bert": [GOOD]}, "section 'bert' is list"),
        ({**checkpoint_obj(), "decoder": GOOD}, "section 'decoder' is ndarray"),
        (checkpoint_obj({"x": GOOD}), "bert.bad is dict, not a tensor"),
        (checkpoint_obj(7), "bert.bad is int, not a tensor"),
        (checkpoint_obj("w"), "bert.bad is str, not a tensor"),
        ({**checkpoint_obj(), "bert": {1: GOOD}}, "section 'bert' has a int key 1"),
        ({**checkpoint_obj(), "bert": {b"w": GOOD}}, "section 'bert' has a bytes key"),
        ({**checkpoint_obj(), "bert": {None: GOOD}}, "section 'bert' has a NoneType key"),
        ({**checkpoint_obj(), "bert": {"w": GOOD, "module.w": GOOD}}, "two tensors are named 'bert.w'"),
        ({k: v for k, v in checkpoint_obj().items() if k != "predictor"}, "missing section.*predictor"),
    ])
    def test_wrong_types_and_keys(self, tmp_path, obj, match):
        refused(write_pth(tmp_path / "t.pth", obj), match)


class TestNpz:
    def write(self, tmp_path, members, name="c.npz"):
        return raw_zip(tmp_path / name, members)

    def test_good_npz(self, tmp_path):
        ck = load_checkpoint(self.write(tmp_path, npz_members(good_npz_tensors())))
        np.testing.assert_array_equal(ck.get("predictor.w"), STORAGE.reshape(2, 3))

    @pytest.mark.parametrize("header, data, cls, match", [
        ({"descr": "<f4", "fortran_order": False, "shape": (10**12,)}, b"", CheckpointLimitError, "elements, more than"),
        ({"descr": "<f4", "fortran_order": False, "shape": (2**26, 4)}, b"", CheckpointLimitError, "cap per tensor"),
        ({"descr": "<f4", "fortran_order": False, "shape": (7,)}, bytes(24), CheckpointError, "24 bytes follow it"),
        ({"descr": "<f4", "fortran_order": False, "shape": (5,)}, bytes(24), CheckpointError, "24 bytes follow it"),
        ({"descr": "|O", "fortran_order": False, "shape": (1,)}, bytes(8), CheckpointError, "not a plain number"),
        ({"descr": "<c8", "fortran_order": False, "shape": (1,)}, bytes(8), CheckpointError, "not a plain number"),
        ({"descr": [("a", "<f4")], "fortran_order": False, "shape": (1,)}, bytes(4), CheckpointError,
         "not a plain number"),
        ({"descr": "<f4", "fortran_order": False, "shape": (-6,)}, bytes(24), CheckpointError, "negative dim"),
        ({"descr": "<f4", "fortran_order": False, "shape": (1,) * 17}, bytes(4), CheckpointLimitError, "17 dims"),
    ])
    def test_hostile_headers(self, tmp_path, header, data, cls, match):
        members = npz_members(good_npz_tensors())
        members[0] = ("bert.w.npy", npy_bytes(header, data))
        refused(self.write(tmp_path, members), match, cls)

    @pytest.mark.parametrize("name, match", [
        ("weights.npy", "npz key weights is not 'section.param'"),
        ("vocoder.w.npy", "npz key vocoder.w is not"),
        ("bert.w.txt", "is not a .npy array"),
    ])
    def test_bad_member_names(self, tmp_path, name, match):
        members = npz_members(good_npz_tensors()) + [(name, npy_bytes({"descr": "<f4", "fortran_order": False,
                                                                        "shape": (1,)}, bytes(4)))]
        refused(self.write(tmp_path, members), match)

    def test_duplicate_npz_members(self, tmp_path):
        members = npz_members(good_npz_tensors())
        refused(self.write(tmp_path, members + members[:1]), "duplicate member")

    def test_fortran_and_big_endian_arrays_read_exactly(self, tmp_path):
        tensors = good_npz_tensors()
        members = npz_members(tensors)
        f = np.asfortranarray(np.arange(6, dtype=">f4").reshape(2, 3))
        members[0] = ("bert.w.npy", npy_bytes({"descr": ">f4", "fortran_order": True, "shape": (2, 3)},
                                              f.T.copy().tobytes()))
        ck = load_checkpoint(self.write(tmp_path, members))
        np.testing.assert_array_equal(ck.get("bert.w"), np.arange(6, dtype=np.float32).reshape(2, 3))
        assert ck.get("bert.w").dtype == np.float32

    def test_read_npz_selected_members_and_read_npy(self, tmp_path):
        members = npz_members({"a": np.ones((2, 2), np.float32), "b": np.zeros(3, np.float64)})
        path = self.write(tmp_path, members, "v.npz")
        assert list(read_npz(path, "voices", members=["b"])) == ["b"]
        with pytest.raises(CheckpointError, match="has no member c "):
            read_npz(path, "voices", members=["c"])
        npy = tmp_path / "v.npy"
        npy.write_bytes(npy_bytes({"descr": "<f4", "fortran_order": False, "shape": (2**21, 256)}, b""))
        with pytest.raises(CheckpointLimitError, match="more than the 8388608-byte cap"):
            read_npy(npy, "voice")


def _pack(value=0.1):
    return np.full((PACK_ROWS, 1, STYLE_DIM), value, np.float32)


class TestVoices:
    @pytest.mark.parametrize("value", [1e30, -1e30, 1e4, -1001.0, np.finfo(np.float32).max])
    def test_huge_finite_values(self, value):
        pack = _pack()
        pack[123, 0, 7] = value
        with pytest.raises(VoiceError, match=r"voice 'v': \|value\| up to .*first in row 123.*beyond the 1000"):
            validate_pack(pack, "v")

    @pytest.mark.parametrize("value", [MAX_STYLE_ABS, -MAX_STYLE_ABS, 20.0])
    def test_values_at_the_bound_are_kept(self, value):
        np.testing.assert_array_equal(validate_pack(_pack(value), "v"), _pack(value))

    @pytest.mark.parametrize("value", [np.nan, np.inf])
    def test_non_finite(self, value):
        pack = _pack()
        pack[5, 0, 0] = value
        with pytest.raises(VoiceError, match="non-finite values .first in row 5"):
            validate_pack(pack, "v")

    def test_huge_voice_file_is_refused_by_name(self, tmp_path):
        pack = _pack()
        pack[0, 0, 0] = 1e30
        storage = {"0": pack.tobytes()}
        path = write_pth(tmp_path / "loud.pt", TensorRef("0", "FloatStorage", pack.size, 0, pack.shape,
                                                          (STYLE_DIM, STYLE_DIM, 1)), storages=storage)
        with pytest.raises(VoiceError, match="loud.pt.*beyond the 1000"):
            load_voice(str(path))

    @pytest.mark.parametrize("shape, match", [
        ((10**12,), "1000000000000 elements, more than"),
        ((2**20, 1, 256), "needs 1073741824 bytes, more than the 8388608-byte cap"),
        ((PACK_ROWS, 1, STYLE_DIM), "header declares shape .* but 0 bytes follow it"),
    ])
    @pytest.mark.parametrize("container", ["npy", "npz"])
    def test_hostile_npy_headers_in_voice_files(self, tmp_path, shape, match, container):
        blob = npy_bytes({"descr": "<f4", "fortran_order": False, "shape": shape}, b"")
        if container == "npy":
            (tmp_path / "v.npy").write_bytes(blob)
            spec = str(tmp_path / "v.npy")
        else:
            raw_zip(tmp_path / "v.npz", [("af_x.npy", blob)])
            spec = f"{tmp_path / 'v.npz'}:af_x"
        with allocates_under(), pytest.raises(VoiceError, match=match):
            load_voice(spec)

    @pytest.mark.parametrize("bad, match", [
        (ref(stride=(-3, 1)), "negative offset"),
        (ref(size=(2**20, 256), stride=(0, 0)), "cap per tensor"),
        ([GOOD] * 17, "more than 16 storage references"),
    ])
    def test_hostile_voice_files(self, tmp_path, bad, match):
        with pytest.raises(VoiceError, match=match):
            load_voice(str(write_pth(tmp_path / "v.pt", bad)))


class TestWritersRefuseAndLoseNothing:
    @pytest.mark.parametrize("obj, match", [
        ({"a": np.zeros(2, np.complex64)}, "dtype complex64 has no torch storage type"),
        ({"a": np.array(["x"])}, "has no torch storage type"),
        ({1: np.zeros(2, np.float32)}, "key 1 is a int"),
        ({"a": [np.zeros(2, np.float32)]}, "a: list is neither a numpy array"),
        ({"a": 3.0}, "float is neither"),
    ])
    def test_save_torch_zip_refusals(self, tmp_path, obj, match):
        from kcc.weights.torch_zip import CheckpointWriteError, save_torch_zip
        dest = tmp_path / "keep.pth"
        dest.write_bytes(b"precious")
        with pytest.raises(CheckpointWriteError, match=match):
            save_torch_zip(obj, dest)
        assert dest.read_bytes() == b"precious" and os.listdir(tmp_path) == ["keep.pth"]

    @pytest.mark.parametrize("obj, match", [
        ({"a": np.broadcast_to(np.float32(0), (2**28 + 1,))}, "cap per tensor"),
        ({f"t{i}": np.broadcast_to(np.float32(0), (2**27,)) for i in range(3)}, "bytes of tensors, more than"),
        ({f"t{i}": np.zeros(1, np.float32) for i in range(8193)}, r"\d{4} tensors, more than"),
    ])
    def test_writers_refuse_what_the_reader_would(self, tmp_path, obj, match):
        from kcc.weights.torch_zip import CheckpointWriteError, save_npz_checkpoint, save_torch_zip
        with pytest.raises(CheckpointWriteError, match=match):
            save_torch_zip(obj, tmp_path / "big.pth")
        flat = {f"{s}.{k}": v for s in SECTIONS for k, v in list(obj.items())[:1]}
        flat.update({f"bert.{k}": v for k, v in obj.items()})
        with pytest.raises(CheckpointWriteError, match=match):
            save_npz_checkpoint(flat, tmp_path / "big.npz")
        assert os.listdir(tmp_path) == []

    def test_save_torch_zip_depth(self, tmp_path):
        from kcc.weights.torch_zip import CheckpointWriteError, save_torch_zip
        obj = np.zeros(1, np.float32)
        for _ in range(MAX_DEPTH + 2):
            obj = {"x": obj}
        with pytest.raises(CheckpointWriteError, match="nested deeper"):
            save_torch_zip(obj, tmp_path / "d.pth")
        assert os.listdir(tmp_path) == []

    @pytest.mark.parametrize("tensors, match", [
        ({"bert": np.zeros(1)}, "key 'bert' is not 'section.param'"),
        ({"vocoder.w": np.zeros(1)}, "not 'section.param'"),
        ({"bert.a/b": np.zeros(1)}, "no '/'"),
        ({"bert.w": np.array([object()])}, "not a numeric numpy array"),
        ({"bert.w": np.zeros(1)}, "no tensors for section.*bert_encoder"),
    ])
    def test_save_npz_refusals(self, tmp_path, tensors, match):
        from kcc.weights.torch_zip import CheckpointWriteError, save_npz_checkpoint
        dest = tmp_path / "keep.npz"
        dest.write_bytes(b"precious")
        with pytest.raises(CheckpointWriteError, match=match):
            save_npz_checkpoint(tensors, dest)
        assert dest.read_bytes() == b"precious" and os.listdir(tmp_path) == ["keep.npz"]

    def test_failed_write_leaves_the_old_file(self, tmp_path, monkeypatch):
        import kcc.weights.torch_zip as tz
        dest = tmp_path / "keep.pth"
        dest.write_bytes(b"precious")

        def broken(fh, root, records):
            fh.write(b"half a zip")
            raise OSError("disk full")
        monkeypatch.setattr(tz, "_write_records", broken)
        with pytest.raises(OSError, match="disk full"):
            tz.save_torch_zip({"a": np.zeros(2, np.float32)}, dest)
        assert dest.read_bytes() == b"precious" and os.listdir(tmp_path) == ["keep.pth"]


@pytest.fixture(scope="module")
def duration_circuit(small_ckpt):
    from kcc.compiler.driver import compile_circuit
    return compile_circuit("kokoro_duration", small_ckpt)


class TestAcceptedExtremesInGeneratedC:
    """The largest style values validate_pack keeps reach the generated C (under ASan + UBSan in
    the sanitizer run): the duration head stays finite and its integer durations in range."""

    @pytest.mark.parametrize("pattern", ["plus", "minus", "alternating", "one_spike"])
    def test_duration_head_at_the_bound(self, duration_circuit, pattern):
        row = {"plus": np.ones(STYLE_DIM), "minus": -np.ones(STYLE_DIM),
               "alternating": np.resize([1.0, -1.0], STYLE_DIM),
               "one_spike": np.eye(1, STYLE_DIM, 200)[0]}[pattern] * MAX_STYLE_ABS
        pack = validate_pack(np.tile(row.astype(np.float32), (PACK_ROWS, 1)), pattern)
        d_en = np.random.default_rng(3).standard_normal((1, 9, 512)).astype(np.float32)
        out = duration_circuit.run({"d_en": d_en, "style_pred": pack[8, :, 128:].copy(),
                                    "lengths": np.array([9], np.int32), "speed": np.array([1.0], np.float32)})
        assert np.isfinite(out.outputs["d"]).all()
        durations = out.outputs["durations"]
        assert durations.shape == (1, 9) and durations.min() >= 1 and durations.max() <= 50


def _kcc(tmp_path, *argv):
    import subprocess
    import sys
    from pathlib import Path
    root = Path(__file__).resolve().parents[1]
    out = tmp_path / "out.wav"
    p = subprocess.run([sys.executable, "-m", "kcc.cli", "synth", "--ids", "50,83,54", *argv, "-o", str(out)],
                       capture_output=True, text=True, cwd=str(root), timeout=300,
                       env={**os.environ, "PYTHONPATH": str(root)})
    return p, out


class TestCommandLine:
    """The issue's crash: `kcc synth` on a hostile file exited 139. Now: exit 2, the named error
    and its reason on stderr, no traceback, no output file."""

    @pytest.mark.parametrize("bad, reason", [
        (ref(stride=(-3, 1)), "negative offset, size or stride"),
        (ref(offset=-1), "negative offset, size or stride"),
        (ref(size=(2**20, 2**20), stride=(0, 0)), "elements, more than"),
        (ref(size=(4, 4), stride=(4, 1)), "past the storage"),
    ])
    def test_hostile_checkpoint(self, tmp_path, bad, reason):
        path = write_pth(tmp_path / "bad.pth", checkpoint_obj(bad))
        p, out = _kcc(tmp_path, "--checkpoint", str(path))
        assert p.returncode == 2, p.stderr
        assert re.search(r"kcc: Checkpoint(Limit)?Error: .*bad.pth", p.stderr), p.stderr
        assert reason in p.stderr and "Traceback" not in p.stderr
        assert not out.exists()

    @pytest.mark.parametrize("bad, reason", [
        (ref(stride=(-3, 1)), "negative offset, size or stride"),
        ([GOOD] * 17, "more than 16 storage references"),
    ])
    def test_hostile_voice(self, tmp_path, small_ckpt_path, bad, reason):
        p, out = _kcc(tmp_path, "--checkpoint", str(small_ckpt_path), "--voice", str(write_pth(tmp_path / "v.pt", bad)))
        assert p.returncode == 2, p.stderr
        assert "VoiceError" in p.stderr and reason in p.stderr and "Traceback" not in p.stderr
        assert not out.exists()
