"""atheris: hostile checkpoint and voice files, built field by field (offsets, sizes, strides,
storage sizes and types, keys, nesting, member names, counted lengths) or mutated byte by byte.

Invariant: a load returns, or raises CheckpointError (VoiceError for a voice) -- never another
exception, never a crash. What a load returns is checked against the file's own records: each
tensor has its declared shape, and a small one holds exactly the elements its offset and
strides select. A voice that loads runs through a generated C entry point (kokoro_duration):
status 0, finite outputs, durations in [1, 50]. RSS stays bounded (libFuzzer -rss_limit_mb;
the loads run under FUZZ_LIMITS, the same code as the stated caps with smaller numbers so a
run stays fast). Run: python fuzz/fuzz_checkpoint.py -max_total_time=30
(scripts/fuzz.sh also runs it with ASan + UBSan in the generated C.)"""
import math
import os
import sys
import tempfile
import zipfile
from pathlib import Path

import atheris
import numpy as np

with atheris.instrument_imports(include=["kcc"]):  # pickletools, instrumented, misreads its own tables
    from kcc.weights.checkpoint import CheckpointError, Limits, load_checkpoint

from fuzz.hostile_files import STORAGE, checkpoint_obj, npy_bytes  # noqa: E402
from kcc.weights.checkpoint import SECTIONS  # noqa: E402
from kcc.weights.torch_zip import TensorRef, pickle_bytes, torch_zip_bytes  # noqa: E402
from kcc.speech.voices import PACK_ROWS, STYLE_DIM, VoiceError, load_voice  # noqa: E402

KIB, MIB = 1024, 1 << 20
FUZZ_LIMITS = Limits(max_file_bytes=MIB, max_members=64, max_unpacked_bytes=MIB, max_ratio=100,
                     max_pickle_bytes=64 * KIB, max_pickle_ops=20_000, max_storage_refs=64,
                     max_tensor_bytes=MIB, max_total_bytes=4 * MIB)
INTS = [-2**63, -2**31, -7, -1, 0, 1, 2, 3, 5, 6, 7, 255, 2**31 - 1, 2**31, 2**40, 2**62, 2**63, 2**64]
ODD = [True, False, 1.0, "3", None, (1,), b"\x01"]
TYPES = ["FloatStorage", "DoubleStorage", "HalfStorage", "LongStorage", "IntStorage", "BoolStorage",
         "ByteStorage", "BFloat16Storage", "Nope"]
KEYS = ["0", "1", "2", "../0", "", "x" * 70, "a/b"]
DIR = Path(tempfile.mkdtemp(prefix="kcc-fuzz-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None))

_DURATION = {}
D_EN = np.random.default_rng(0).standard_normal((1, 6, 512)).astype(np.float32)


def duration_circuit():
    """Compiled on the first voice that loads (most runs never need it), one thread, one arena."""
    if not _DURATION:
        from kcc.compiler.driver import compile_circuit
        from oracle.checkpoints import test_checkpoint
        circuit = compile_circuit("kokoro_duration", test_checkpoint("small", 0))
        circuit.set_threads(1)
        _DURATION.update(circuit=circuit, arena=circuit.new_arena())
    return _DURATION["circuit"], _DURATION["arena"]


def rare(fdp, odds: int) -> bool:
    """True about once in odds + 1 draws; False once the input is used up, so short inputs
    take the ordinary path."""
    return fdp.ConsumeIntInRange(0, odds) == odds


def pick(fdp, items):
    return items[fdp.ConsumeIntInRange(0, len(items) - 1)]


def draw_int(fdp):
    return pick(fdp, INTS) if rare(fdp, 3) else fdp.ConsumeIntInRange(-3, 12)


def small(fdp, top: int):
    """Mostly an in-range number (so records that load, and their edges, are common); now and
    then any int or a value of the wrong type."""
    if rare(fdp, 12):
        return pick(fdp, ODD) if rare(fdp, 3) else draw_int(fdp)
    return fdp.ConsumeIntInRange(0, top)


def draw_ref(fdp, storages: dict[str, bytes]) -> TensorRef:
    ndim = 17 if rare(fdp, 40) else fdp.ConsumeIntInRange(0, 3)
    stride_n = fdp.ConsumeIntInRange(0, 5) if rare(fdp, 15) else ndim
    key = pick(fdp, KEYS) if rare(fdp, 7) else pick(fdp, sorted(storages))
    stype = pick(fdp, TYPES) if rare(fdp, 5) else "FloatStorage"
    numel = draw_int(fdp) if rare(fdp, 5) else len(storages.get(key, b"")) // 4
    return TensorRef(storage=key, storage_type=stype, numel=numel, offset=small(fdp, 8),
                     size=tuple(small(fdp, 4) for _ in range(ndim)),
                     stride=tuple(small(fdp, 7) for _ in range(stride_n)))


def draw_value(fdp, storages, depth=0):
    kind = fdp.ConsumeIntInRange(0, 9)
    if kind <= 5 or depth > 3:
        return draw_ref(fdp, storages)
    if kind == 6:
        return {draw_key(fdp): draw_value(fdp, storages, depth + 1) for _ in range(fdp.ConsumeIntInRange(0, 3))}
    if kind == 7:
        return [draw_value(fdp, storages, depth + 1) for _ in range(fdp.ConsumeIntInRange(0, 3))]
    return pick(fdp, ODD + INTS[:3])


def draw_key(fdp):
    return pick(fdp, [1, None, (1,), b"k", "module.w"]) if rare(fdp, 10) else f"p{fdp.ConsumeIntInRange(0, 9)}"


def draw_storages(fdp) -> dict[str, bytes]:
    out = {"0": STORAGE.tobytes()}
    if fdp.ConsumeBool():
        out["0"] = fdp.ConsumeBytes(fdp.ConsumeIntInRange(0, 96))
    if fdp.ConsumeBool():
        out["1"] = fdp.ConsumeBytes(fdp.ConsumeIntInRange(0, 256))
    return out


def expected(ref: TensorRef, storage: bytes) -> np.ndarray | None:
    """The tensor a record selects, element by element (small, valid records only)."""
    dtype = {"FloatStorage": np.float32, "DoubleStorage": np.float64, "HalfStorage": np.float16,
             "LongStorage": np.int64, "IntStorage": np.int32, "BoolStorage": np.bool_, "ByteStorage": np.uint8}[ref.storage_type]
    flat = np.frombuffer(storage, dtype=dtype)
    count = math.prod(ref.size)
    if count > 4096:
        return None
    out = np.empty(count, dtype=dtype)
    for flat_i, idx in enumerate(np.ndindex(*ref.size)):
        out[flat_i] = flat[ref.offset + sum(i * s for i, s in zip(idx, ref.stride))]
    return out.reshape(ref.size)


def check_checkpoint(path: Path, obj, storages) -> None:
    try:
        ck = load_checkpoint(path, limits=FUZZ_LIMITS)
    except CheckpointError:
        return
    if not isinstance(obj, dict):
        return                                    # a raw or mutated record: a named error or a dict of arrays
    for name, value in ck.tensors.items():
        assert isinstance(value, np.ndarray) and not value.flags.writeable, name
        section, param = name.split(".", 1)
        declared = obj.get(section, {}).get(param) if isinstance(obj.get(section), dict) else None
        if isinstance(declared, TensorRef):
            assert value.shape == tuple(declared.size), (name, value.shape, declared)
            if value.size:
                reach = declared.offset + sum((n - 1) * st for n, st in zip(declared.size, declared.stride))
                assert 0 <= reach < declared.numel, f"{name}: loaded, yet reaches element {reach} of {declared.numel}"
            want = expected(declared, storages[declared.storage])
            if want is not None:
                np.testing.assert_array_equal(value, want.astype(value.dtype), err_msg=name)


def check_voice(path: Path) -> None:
    try:
        pack = load_voice(str(path))
    except VoiceError:
        return
    assert pack.dtype == np.float32 and pack.shape[1:] == (1, STYLE_DIM) and np.isfinite(pack).all()
    style = np.ascontiguousarray(pack[min(5, pack.shape[0] - 1), 0, 128:].reshape(1, 128))
    circuit, arena = duration_circuit()
    out = circuit.run({"d_en": D_EN, "style_pred": style, "lengths": np.array([6], np.int32),
                       "speed": np.array([1.0], np.float32)}, arena=arena)
    dur = out.outputs["durations"]
    assert np.isfinite(out.outputs["d"]).all() and dur.min() >= 1 and dur.max() <= 50, dur


def one_input(data: bytes) -> None:
    fdp = atheris.FuzzedDataProvider(data)
    surface = fdp.ConsumeIntInRange(0, 4)
    path = DIR / ("v.pt" if surface == 4 else "c.npz" if surface == 3 else "c.pth")
    storages = draw_storages(fdp)
    obj = None
    if surface == 0:                              # structured records
        obj = checkpoint_obj()
        for _ in range(fdp.ConsumeIntInRange(0, 4)):
            section = pick(fdp, SECTIONS)
            obj[section][draw_key(fdp)] = draw_value(fdp, storages)
        if rare(fdp, 10):
            del obj[pick(fdp, SECTIONS)]
        for _ in range(fdp.ConsumeIntInRange(0, 40) if rare(fdp, 10) else 0):
            obj = {"bert": obj}
        record = pickle_bytes(obj)
    elif surface == 1:                            # mutated pickle opcodes
        record = bytearray(pickle_bytes(checkpoint_obj(draw_ref(fdp, storages))))
        for _ in range(fdp.ConsumeIntInRange(1, 6)):
            at = fdp.ConsumeIntInRange(0, len(record))
            op = fdp.ConsumeIntInRange(0, 2)
            chunk = fdp.ConsumeBytes(fdp.ConsumeIntInRange(1, 9))
            if op == 0:
                record[at:at + len(chunk)] = chunk
            elif op == 1:
                record[at:at] = chunk
            else:
                del record[at:at + len(chunk)]
        record = bytes(record)
    if surface in (0, 1):
        records = {"data.pkl": record, "byteorder": b"big" if rare(fdp, 20) else b"little"}
        records.update({f"data/{k}": v for k, v in storages.items()})
        records["version"] = b"3\n"
        path.write_bytes(torch_zip_bytes(records))
        check_checkpoint(path, obj, storages)
    elif surface == 2:                            # mutated zip bytes
        raw = bytearray(torch_zip_bytes({"data.pkl": pickle_bytes(checkpoint_obj()), "data/0": STORAGE.tobytes(),
                                         "version": b"3\n"}))
        for _ in range(fdp.ConsumeIntInRange(1, 8)):
            raw[fdp.ConsumeIntInRange(0, len(raw) - 1)] = fdp.ConsumeIntInRange(0, 255)
        if fdp.ConsumeBool():
            raw = raw[:fdp.ConsumeIntInRange(0, len(raw))]
        path.write_bytes(bytes(raw))
        check_checkpoint(path, None, storages)
    elif surface == 3:                            # npz with hostile .npy headers
        members = []
        for s in SECTIONS:
            shape = tuple(small(fdp, 7) for _ in range(fdp.ConsumeIntInRange(0, 3))) if rare(fdp, 3) else (2, 3)
            descr = pick(fdp, ["<f4", ">f4", "<f8", "<i8", "|b1", "|O", "<c8", "<U3"]) if fdp.ConsumeBool() else "<f4"
            data = fdp.ConsumeBytes(fdp.ConsumeIntInRange(0, 64)) if fdp.ConsumeBool() else STORAGE.tobytes()
            header = {"descr": descr, "fortran_order": fdp.ConsumeBool(), "shape": shape}
            members.append((f"{s}.w.npy", npy_bytes(header, data)))
        with zipfile.ZipFile(path, "w") as z:
            for name, blob in members:
                z.writestr(name, blob)
        check_checkpoint(path, None, storages)
    else:                                         # a voice pack: records, values, then C
        rows = fdp.ConsumeIntInRange(0, 600) if rare(fdp, 3) else PACK_ROWS
        values = np.frombuffer(fdp.ConsumeBytes(4 * 64).ljust(4 * 64, b"\0"), dtype=np.float32)
        scale = pick(fdp, [0.1, 1.0, 20.0, 999.0, 1e3, 1001.0, 1e30])
        finite = np.nan_to_num(values, nan=0.0, posinf=1.0, neginf=-1.0)
        chosen = finite if rare(fdp, 5) else np.clip(finite, -1.0, 1.0) * np.float32(scale)
        pack = np.resize(chosen.astype(np.float32), rows * STYLE_DIM)
        ref = TensorRef("0", "FloatStorage", pack.size, 0, (rows, 1, STYLE_DIM), (STYLE_DIM, STYLE_DIM, 1))
        if rare(fdp, 3):
            ref = draw_ref(fdp, {"0": pack.tobytes()})
        records = {"data.pkl": pickle_bytes(ref), "data/0": pack.tobytes(), "version": b"3\n"}
        path.write_bytes(torch_zip_bytes(records))
        check_voice(path)


# One input per surface, every choice at its default (an input that runs out draws zeros):
# b"\x04" is a plain voice pack, so every run, the sanitized replay included, reaches the C.
SEEDS = [bytes([i]) for i in range(5)]

if __name__ == "__main__":
    corpus = next((Path(a) for a in sys.argv[1:] if not a.startswith("-") and Path(a).is_dir()), None)
    if corpus is not None and not any(corpus.iterdir()):
        for i, seed in enumerate(SEEDS):
            (corpus / f"seed-{i}").write_bytes(seed)
    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()
