"""A cache kcc can trust: only its user can write it, and what it loads from it (stage
libraries, artifact manifests) carries a signature under a key kept outside the cache."""
from __future__ import annotations

import os
import stat

import pytest

from kcc import cache_trust
from kcc.cache_trust import CacheError
from kcc.files import cache_dir, cache_subdir

_SRC = "int kcc_probe(void);\nint kcc_probe(void) { return 42; }\n"


@pytest.fixture()
def env(own_cache):
    return own_cache.parent                     # the test's directory: cache/ and config/ below it


def _mode(p) -> int:
    return stat.S_IMODE(os.lstat(p).st_mode)


def test_kcc_makes_its_cache_and_subdirectories_0700(env):
    os.umask(0o022)
    root = cache_dir()
    sub = cache_subdir("models")
    assert root == env / "cache" and _mode(root) == 0o700 and _mode(sub) == 0o700


@pytest.mark.parametrize("mode", [0o777, 0o770, 0o720, 0o702, 0o1777])
def test_a_cache_others_can_write_is_refused_with_the_fix(env, mode):
    root = env / "cache"
    root.mkdir()
    os.chmod(root, mode)
    with pytest.raises(CacheError, match=rf"{root} can be written by others \(mode {mode:04o}\).*chmod 700 {root}"):
        cache_dir()


@pytest.mark.parametrize("mode", [0o777, 0o775, 0o757])
def test_a_writable_subdirectory_is_refused(env, mode):
    sub = cache_subdir("models")
    os.chmod(sub, mode)
    with pytest.raises(CacheError, match=rf"{sub} can be written by others.*chmod 700"):
        cache_subdir("models")
    with pytest.raises(CacheError, match=rf"{sub} can be written"):
        cache_subdir("models", "deeper")


def test_a_readable_cache_of_ours_is_fine(env):
    root = env / "cache"
    root.mkdir()
    os.chmod(root, 0o755)                   # others may read (no secrets in it), not write
    assert cache_dir() == root


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a directory to another user needs root")
@pytest.mark.parametrize("where", ["root", "models"])
def test_a_cache_another_user_owns_is_refused(env, where):
    sub = cache_subdir("models")
    target = sub if where == "models" else env / "cache"
    os.chown(target, 4242, -1)
    with pytest.raises(CacheError, match=rf"{target} is owned by uid 4242, not by you.*chown"):
        cache_subdir("models")


@pytest.mark.parametrize("kind", ["symlink", "file"])
def test_a_cache_path_that_is_not_a_directory_is_refused(env, kind, monkeypatch):
    real = env / "elsewhere"
    real.mkdir(mode=0o700)
    root = env / "cache"
    if kind == "symlink":
        root.symlink_to(real)
    else:
        root.write_text("x")
    with pytest.raises(CacheError, match="symbolic link" if kind == "symlink" else "not a directory"):
        cache_dir()
    sub_link = env / "c2"
    sub_link.mkdir(mode=0o700)
    (sub_link / "models").symlink_to(real)
    monkeypatch.setenv("KCC_CACHE_DIR", str(sub_link))
    with pytest.raises(CacheError, match="symbolic link"):
        cache_subdir("models")


def test_the_signing_key_is_made_0600_outside_the_cache_and_kept(env):
    sig = cache_trust.sign(b"data", "p")
    key = env / "config" / "kcc" / cache_trust.KEY_NAME
    assert _mode(key) == 0o600 and _mode(key.parent) == 0o700 and key.stat().st_size == 32
    assert cache_trust.sign(b"data", "p") == sig and cache_trust.verify(b"data", "p", sig)
    assert not cache_trust.verify(b"data", "other purpose", sig)
    assert not cache_trust.verify(b"datb", "p", sig)
    assert not (env / "cache").exists() or cache_trust.KEY_NAME not in os.listdir(env / "cache")


@pytest.mark.parametrize("mode, why", [(0o644, "can be read by others"), (0o640, "can be read by others"),
                                       (0o620, "can be written by others")])
def test_a_key_others_can_read_or_write_is_refused(env, mode, why):
    cache_trust.sign(b"x", "p")
    key = env / "config" / "kcc" / cache_trust.KEY_NAME
    os.chmod(key, mode)
    cache_trust._key.cache_clear()
    with pytest.raises(CacheError, match=rf"{why}.*chmod 600"):
        cache_trust.sign(b"x", "p")


@pytest.mark.parametrize("content", [b"", b"short", b"k" * 33])
def test_a_key_of_the_wrong_size_is_refused(env, content):
    where = env / "config" / "kcc"
    where.mkdir(parents=True, mode=0o700)
    (where / cache_trust.KEY_NAME).write_bytes(content)
    os.chmod(where / cache_trust.KEY_NAME, 0o600)
    cache_trust._key.cache_clear()
    with pytest.raises(CacheError, match="is not 32 bytes"):
        cache_trust.sign(b"x", "p")


def test_racing_processes_share_one_key(env):
    import subprocess
    import sys
    code = "from kcc import cache_trust; print(cache_trust.sign(b'x', 'p'))"
    procs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": os.getcwd()}) for _ in range(4)]
    outs = {p.communicate(timeout=60)[0].strip() for p in procs}
    assert len(outs) == 1 and all(p.returncode == 0 for p in procs)
    assert sorted(os.listdir(env / "config" / "kcc")) == [cache_trust.KEY_NAME]


# -- the build cache: a library is opened only with a sidecar kcc signed ----------------------
def _planted(env, build, sidecar_text):
    """A library with a constructor that leaves a marker, in place of a cached entry."""
    import subprocess
    marker = env / "constructor-ran"
    src = env / "evil.c"
    src.write_text('#include <stdio.h>\n__attribute__((constructor)) static void boom(void) '
                   f'{{ FILE *f = fopen("{marker}", "w"); if (f) fclose(f); }}\n'
                   "int kcc_probe(void) { return 666; }\n")
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(build.library), str(src)], check=True)
    sidecar = build.library.with_name(build.library.name + ".sig")
    sidecar.write_text(sidecar_text(build.library))
    return marker


def _rehashed(lib):
    from kcc.files import file_sha256
    return file_sha256(lib) + "\n"


def _foreign_key(lib):
    import hashlib
    import hmac
    from kcc.files import file_sha256
    return hmac.new(b"k" * 32, b"build-library\0" + f"{lib.name}\0{file_sha256(lib)}".encode(),
                    hashlib.sha256).hexdigest()


def _another_entrys_signature(lib):
    # a signature kcc made, for another file name: does not stand in for this one
    from kcc.files import file_sha256
    return cache_trust.sign(f"other.so\0{file_sha256(lib)}".encode(), "build-library")


@pytest.mark.parametrize("sidecar_text", [_rehashed, _foreign_key, _another_entrys_signature, lambda lib: ""])
def test_a_planted_build_cache_library_is_rebuilt_before_it_is_opened(env, sidecar_text):
    import ctypes

    from kcc.compiler.build import build_library
    first = build_library(_SRC, name="probe")
    marker = _planted(env, first, sidecar_text)
    again = build_library(_SRC, name="probe")
    assert not marker.exists()                                 # never dlopened
    assert not again.cached and ctypes.CDLL(str(again.library)).kcc_probe() == 42
