"""The checkpoint reader: real layout, hashing, weight-norm folding, and every refusal path."""
from __future__ import annotations

import pickle
import zipfile

import numpy as np
import pytest

from kcc.weights.checkpoint import (SECTIONS, Checkpoint, CheckpointError, _strip_module_prefix, checkpoint_digest,
                                    load_checkpoint, tensor_sha256)


def test_reads_the_five_sections_with_module_prefix_stripped(small_ckpt):
    names = small_ckpt.names()
    assert {n.split(".")[0] for n in names} == set(SECTIONS)
    assert "bert.embeddings.word_embeddings.weight" in small_ckpt
    assert not any(".module." in n or n.split(".", 1)[1].startswith("module.") for n in names)
    assert small_ckpt.get("bert.embeddings.word_embeddings.weight").shape == (178, 128)


def test_tensors_equal_what_torch_saved(small_ckpt_path, small_ckpt):
    import torch
    saved = torch.load(small_ckpt_path, map_location="cpu", weights_only=True)
    names = {f"{section}.{_strip_module_prefix(key)}": value for section, state in saved.items()
             for key, value in state.items()}
    assert set(names) == set(small_ckpt.tensors)                         # every tensor, no more
    for name, value in names.items():
        np.testing.assert_array_equal(small_ckpt.get(name), value.numpy(), err_msg=name)


def test_hashes_are_stable_and_sensitive(small_ckpt):
    name = "bert.embeddings.LayerNorm.weight"
    w = small_ckpt.get(name)
    assert small_ckpt.sha256(name) == tensor_sha256(w.copy()) == tensor_sha256(np.array(w, order="F"))
    bumped = w.copy()
    bumped[0] = np.nextafter(bumped[0], np.float32(np.inf))
    assert tensor_sha256(bumped) != tensor_sha256(w)
    # the checkpoint's digest is a function of its tensors: the same for a copy, another for one ulp
    same = Checkpoint(small_ckpt.path, {k: np.array(small_ckpt.get(k)) for k in small_ckpt.tensors})
    one_ulp = Checkpoint(small_ckpt.path, {**same.tensors, name: bumped})
    assert checkpoint_digest(same) == checkpoint_digest(small_ckpt) != checkpoint_digest(one_ulp)


def test_weights_are_read_only(small_ckpt):
    w = small_ckpt.get("bert.embeddings.word_embeddings.weight")
    with pytest.raises(ValueError):
        w[0, 0] = 1.0


def test_weight_norm_fold_matches_torch(small_ckpt):
    import torch
    ref = "text_encoder.cnn.0.0"
    g = torch.from_numpy(small_ckpt.get(f"{ref}.weight_g").copy())
    v = torch.from_numpy(small_ckpt.get(f"{ref}.weight_v").copy())
    expected = torch._weight_norm(v, g, 0).numpy()
    np.testing.assert_allclose(small_ckpt.weight_norm(ref), expected, rtol=1e-6, atol=1e-7)
    # A layer without weight norm folds to its plain weight.
    plain = small_ckpt.weight_norm("bert_encoder")
    np.testing.assert_array_equal(plain, small_ckpt.get("bert_encoder.weight"))


def _save(tmp_path, obj, name="ck.pth"):
    import torch
    path = tmp_path / name
    torch.save(obj, path)
    return path


def _tiny_state():
    import torch
    return {s: {"module.w.weight": torch.ones(2, 3)} for s in SECTIONS}


def test_zero_channel_weight_norm_folds_to_zero_not_nan(tmp_path):
    import torch
    state = _tiny_state()
    v = torch.randn(3, 2, 5)
    v[1] = 0.0
    state["decoder"] = {"module.conv.weight_g": torch.tensor([[[2.0]], [[0.0]], [[1.5]]]),
                        "module.conv.weight_v": v}
    ck = load_checkpoint(_save(tmp_path, state))
    w = ck.weight_norm("decoder.conv")
    assert np.isfinite(w).all()
    assert np.all(w[1] == 0.0)
    np.testing.assert_allclose(np.linalg.norm(w[0]), 2.0, rtol=1e-6)


def test_missing_file(tmp_path):
    with pytest.raises(CheckpointError, match="does not exist"):
        load_checkpoint(tmp_path / "nope.pth")


def test_directory_is_not_a_checkpoint(tmp_path):
    with pytest.raises(CheckpointError, match="not a regular file"):
        load_checkpoint(tmp_path)


def test_truncated_file(tmp_path):
    good = _save(tmp_path, _tiny_state())
    raw = good.read_bytes()
    bad = tmp_path / "half.pth"
    bad.write_bytes(raw[: len(raw) // 2])
    with pytest.raises(CheckpointError, match=r"half\.pth: not a torch zip .*\(truncated or corrupt\)"):
        load_checkpoint(bad)


def test_corrupt_storage_record(tmp_path):
    good = _save(tmp_path, _tiny_state())
    bad = tmp_path / "ck2.pth"                          # (a name none of the messages' words are in)
    with zipfile.ZipFile(good) as zin, zipfile.ZipFile(bad, "w") as zout:
        for item in zin.infolist():
            data = zin.read(item.filename)
            if item.filename.endswith("data.pkl"):
                data = data[:10] + b"\xff\xfe garbage" + data[20:]
            zout.writestr(item, data)
    with pytest.raises(CheckpointError, match=r"data\.pkl: malformed pickle record"):
        load_checkpoint(bad)


def test_missing_section(tmp_path):
    state = _tiny_state()
    del state["decoder"]
    with pytest.raises(CheckpointError, match="missing section.*decoder"):
        load_checkpoint(_save(tmp_path, state))


def test_missing_key_and_wrong_shape(small_ckpt):
    with pytest.raises(CheckpointError, match="no tensor named 'bert.embeddings.nope.weight'"):
        small_ckpt.get("bert.embeddings.nope.weight")
    with pytest.raises(CheckpointError, match=r"has shape \(178, 128\), expected \(178, 64\)"):
        small_ckpt.get("bert.embeddings.word_embeddings.weight", shape=(178, 64))


class _Exploit:
    def __reduce__(self):
        import os
        return (os.system, ("touch /tmp/kcc-pwned-by-pickle",))


def test_pickle_that_executes_code_is_refused(tmp_path):
    import os
    marker = "/tmp/kcc-pwned-by-pickle"
    if os.path.exists(marker):
        os.remove(marker)
    path = tmp_path / "evil.pth"
    payload = pickle.dumps({s: {"x": _Exploit()} for s in SECTIONS}, protocol=2)
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("evil/data.pkl", payload)
        z.writestr("evil/version", "3\n")
    with pytest.raises(CheckpointError, match="refusing pickle global"):
        load_checkpoint(path)
    assert not os.path.exists(marker)


def test_not_a_zip(tmp_path):
    path = tmp_path / "plain.pth"
    path.write_bytes(pickle.dumps({"bert": {}}))
    with pytest.raises(CheckpointError, match="not a torch zip checkpoint"):
        load_checkpoint(path)


def test_non_tensor_entry_is_refused(tmp_path):
    import torch
    state = _tiny_state()
    state["bert"]["module.note"] = 3
    path = tmp_path / "odd.pth"
    torch.save(state, path)
    with pytest.raises(CheckpointError, match=r"odd\.pth: bert\.module\.note is int, not a tensor"):
        load_checkpoint(path)


def test_sha_mismatched_checkpoint_is_refused(small_ckpt_path, tmp_path):
    from kcc.weights.checkpoint import file_sha256
    good = file_sha256(small_ckpt_path)
    assert load_checkpoint(small_ckpt_path, sha256=good).names()
    with pytest.raises(CheckpointError, match="differs from the expected"):
        load_checkpoint(small_ckpt_path, sha256="0" * 64)


def _mixed_state():
    rng = np.random.default_rng(7)
    return {s: {"module.w": rng.standard_normal((3, 4)).astype(np.float32),
                "ids": np.arange(5, dtype=np.int64), "half": rng.standard_normal((2, 2, 2)).astype(np.float16),
                "scalar": np.array(3.5, np.float32), "empty": np.zeros((0, 3), np.float32),
                "big_endian": np.arange(4, dtype=">f4"), "transposed": rng.standard_normal((2, 3)).T,
                "mask": np.array([True, False]), "i8": np.array([-3, 7], np.int8)} for s in SECTIONS}


def test_torch_free_writer_is_read_exactly_by_torch_weights_only(tmp_path):
    import torch
    from kcc.weights.torch_zip import save_torch_zip
    state = _mixed_state()
    path = save_torch_zip(state, tmp_path / "written.pth")
    back = torch.load(path, map_location="cpu", weights_only=True)
    assert set(back) == set(SECTIONS)
    for section, params in state.items():
        assert list(back[section]) == list(params)
        for key, value in params.items():
            got = back[section][key].numpy()
            assert got.dtype == value.dtype.newbyteorder("=") and got.shape == value.shape, key
            np.testing.assert_array_equal(got, value)


def test_torch_free_writer_round_trips_through_kcc(tmp_path):
    from kcc.weights.checkpoint import load_torch_zip
    from kcc.weights.torch_zip import save_torch_zip
    state = _mixed_state()
    back = load_torch_zip(save_torch_zip(state, tmp_path / "rt.pth"))
    for section, params in state.items():
        for key, value in params.items():
            assert back[section][key].shape == value.shape
            np.testing.assert_array_equal(back[section][key], value)
    ck = load_checkpoint(tmp_path / "rt.pth")
    assert ck.get("bert.w").dtype == np.float32 and ck.get("bert.half").dtype == np.float32
    assert ck.get("bert.ids").dtype == np.int64


def test_written_bytes_are_deterministic_and_data_is_aligned(tmp_path):
    from kcc.weights.torch_zip import ALIGNMENT, save_torch_zip
    a = save_torch_zip(_mixed_state(), tmp_path / "a" / "m.pth")
    b = save_torch_zip(_mixed_state(), tmp_path / "b" / "m.pth")
    assert a.read_bytes() == b.read_bytes()
    with zipfile.ZipFile(a) as z:
        for info in z.infolist():
            assert (info.header_offset + 30 + len(info.filename) + len(info.extra)) % ALIGNMENT == 0


def test_a_real_layout_section_survives_the_writer_and_torch(small_ckpt, tmp_path):
    import torch
    from kcc.weights.torch_zip import save_torch_zip
    state = {s: {n.split(".", 1)[1]: small_ckpt.get(n) for n in small_ckpt.names() if n.startswith(f"{s}.")}
             for s in SECTIONS}
    state = {s: (params if s == "text_encoder" else dict(list(params.items())[:3])) for s, params in state.items()}
    path = save_torch_zip(state, tmp_path / "section.pth")
    ck = load_checkpoint(path)
    assert checkpoint_digest(ck, "text_encoder.") == checkpoint_digest(small_ckpt, "text_encoder.")
    back = torch.load(path, weights_only=True)
    for key, value in state["text_encoder"].items():
        np.testing.assert_array_equal(back["text_encoder"][key].numpy(), value)


def test_npz_checkpoint_round_trip(tmp_path):
    from kcc.weights.torch_zip import save_npz_checkpoint, save_torch_zip
    state = _mixed_state()
    flat = {f"{s}.{k}": v for s, params in state.items() for k, v in params.items()}
    path = save_npz_checkpoint(flat, tmp_path / "m.npz")
    with zipfile.ZipFile(path) as z:
        assert {i.compress_type for i in z.infolist()} == {zipfile.ZIP_STORED}
    from_npz = load_checkpoint(path)
    from_pth = load_checkpoint(save_torch_zip(state, tmp_path / "m.pth"))
    assert from_npz.names() == from_pth.names()
    assert checkpoint_digest(from_npz) == checkpoint_digest(from_pth)


def test_written_checkpoint_gets_the_umask_mode_and_keeps_a_replaced_files_mode(tmp_path):
    import os
    import stat
    from kcc.weights.torch_zip import save_torch_zip
    old = os.umask(0o027)
    try:
        fresh = save_torch_zip({"a": np.zeros(2, np.float32)}, tmp_path / "fresh.pth")
        assert stat.S_IMODE(os.stat(fresh).st_mode) == 0o640
        kept = tmp_path / "kept.pth"
        kept.write_bytes(b"old")
        os.chmod(kept, 0o604)
        save_torch_zip({"a": np.zeros(2, np.float32)}, kept)
        assert stat.S_IMODE(os.stat(kept).st_mode) == 0o604 and kept.read_bytes()[:2] == b"PK"
    finally:
        os.umask(old)
