"""Whole files say how long they are; streams say they do not know. A whole-file server response
(stream false), `kcc say`'s files and kcc.speech.audio.encoder.encode() carry real lengths
(WAV RIFF and data sizes, FLAC STREAMINFO total samples), read the same by soundfile,
mutagen, Python's wave and FFmpeg's probe (PyAV); a streamed response keeps the streaming
form (WAV sizes 0xFFFFFFFF, FLAC total samples 0 = unknown)."""
from __future__ import annotations

import io
import struct
import wave

import av
import mutagen
import numpy as np
import pytest
import soundfile

from kcc.speech.audio.encoder import encode
from kcc.speech.audio.timestamps import SAMPLE_RATE
from kcc.speech.audio.wav import pcm16

from test_server import TEXT, expected, post, serving


def _flac_total_samples(data: bytes) -> int:
    """STREAMINFO's 36-bit total sample count (the first metadata block, after 'fLaC' and its header)."""
    assert data[:4] == b"fLaC" and data[4] & 0x7F == 0
    info = data[8:8 + 34]
    return ((info[13] & 0x0F) << 32) | struct.unpack(">I", info[14:18])[0]


def _lengths(data: bytes, fmt: str) -> dict[str, int]:
    """The sample count each reader finds in a whole file."""
    got = {"soundfile": soundfile.info(io.BytesIO(data)).frames,
           "soundfile.read": soundfile.read(io.BytesIO(data), dtype="int16")[0].shape[0],
           "mutagen": round(mutagen.File(io.BytesIO(data)).info.length * SAMPLE_RATE)}
    with av.open(io.BytesIO(data)) as c:                   # what ffprobe reports: the stream's duration
        st = c.streams.audio[0]
        got["ffprobe"] = round(float(st.duration * st.time_base) * SAMPLE_RATE) if st.duration else -1
    if fmt == "wav":
        with wave.open(io.BytesIO(data)) as w:
            got["wave"] = w.getnframes()
        riff, size = struct.unpack("<4sI", data[:8])
        got["riff"] = (size - 36) // 2
        got["data"] = struct.unpack("<I", data[40:44])[0] // 2
    else:
        got["streaminfo"] = _flac_total_samples(data)
    return got


def _assert_whole(data: bytes, fmt: str, n: int) -> None:
    got = _lengths(data, fmt)
    assert got == {k: n for k in got}, got
    samples, rate = soundfile.read(io.BytesIO(data), dtype="int16")
    assert rate == SAMPLE_RATE
    if fmt == "wav":                                    # the data chunk is the whole rest of the file
        assert samples.tobytes() == data[44:]


@pytest.mark.parametrize("fmt", ["wav", "flac"])
def test_a_whole_file_response_has_real_lengths_for_every_reader(tmp_path, fmt):
    want = expected(TEXT)
    with serving(tmp_path) as srv:
        status, headers, data = post(srv.port, {"input": TEXT, "voice": "alloy", "response_format": fmt,
                                                "stream": False})
    assert status == 200 and headers["content-type"].startswith(f"audio/{fmt}")
    _assert_whole(data, fmt, want.size)
    assert soundfile.read(io.BytesIO(data), dtype="int16")[0].tobytes() == pcm16(want)


@pytest.mark.parametrize("fmt", ["wav", "flac"])
def test_a_streamed_response_keeps_the_streaming_form(tmp_path, fmt):
    with serving(tmp_path) as srv:
        status, _, data = post(srv.port, {"input": TEXT, "voice": "alloy", "response_format": fmt, "stream": True})
    assert status == 200
    if fmt == "wav":
        assert data[4:8] == data[40:44] == b"\xff\xff\xff\xff"      # sizes unknown when the header was sent
    else:
        assert _flac_total_samples(data) == 0                      # 'unknown' in STREAMINFO
    with av.open(io.BytesIO(data)) as c:                            # and still decodes whole
        assert sum(f.samples for f in c.decode(c.streams.audio[0])) == expected(TEXT).size


@pytest.mark.parametrize("fmt", ["wav", "flac"])
@pytest.mark.parametrize("seconds", [0.01, 1.0, 7.3])
def test_encode_writes_real_lengths(fmt, seconds):
    n = round(seconds * SAMPLE_RATE)
    audio = (0.3 * np.sin(np.arange(n) / 7)).astype(np.float32)
    _assert_whole(encode(audio, fmt), fmt, n)


@pytest.mark.parametrize("fmt", ["wav", "flac"])
def test_kcc_say_files_have_real_lengths(tmp_path, monkeypatch, capsysbinary, fmt):
    from test_cli_conventions import TEXT as SAY_TEXT, _expected, _run
    from kcc.speech.engine import random_voice
    np.save(tmp_path / "v.npy", random_voice(0))
    out = tmp_path / f"a.{fmt}"
    rc, _, err, _ = _run(monkeypatch, capsysbinary, ["say", SAY_TEXT, "-o", str(out), "--voice", str(tmp_path / "v.npy")])
    assert rc == 0, err
    _assert_whole(out.read_bytes(), fmt, _expected().size)
