"""kcc's temporaries carry its tag and its pid, so a later run removes what a killed or
interrupted one left (and only that): never a user's file, never a live process's."""
from __future__ import annotations

import os
import subprocess
import time

import pytest

from kcc import files
from kcc.files import AtomicFile, remove_dir_atomically, sweep_temporaries, temp_dir, temp_prefix


def _dead_pid() -> int:
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def test_kcc_temporaries_name_their_process(tmp_path):
    with AtomicFile(tmp_path / "out.wav") as f:
        assert f.tmp.name.startswith(f".kcc-tmp.{os.getpid()}.out.wav.") and f.tmp.name.endswith(".part")
    with temp_dir(tmp_path, "model-x") as d:
        assert d.name.startswith(temp_prefix("model-x")) and d.is_dir() and d in AtomicFile.live
    assert not d.exists() and d not in AtomicFile.live


@pytest.mark.parametrize("name", [".foo.part", ".out.wav.abc123.part", ".kcc-tmp.part", ".kcc-tmp.12x.a.part",
                                  "kcc-tmp.1.a.part", ".kcc-tmp.1.a.part.bak", ".kcc-tmp.1.a"])
def test_a_users_look_alike_is_never_swept(tmp_path, name):
    (tmp_path / name).write_text("mine")
    assert sweep_temporaries(tmp_path, max_age_s=0) == []
    assert (tmp_path / name).read_text() == "mine"


@pytest.mark.parametrize("kind", ["file", "dir"])
def test_a_dead_processes_temporary_goes_a_live_ones_stays(tmp_path, kind):
    dead = tmp_path / f".kcc-tmp.{_dead_pid()}.out.wav.a1.part"
    live = tmp_path / f".kcc-tmp.{os.getppid()}.out.wav.b2.part"
    mine = tmp_path / f"{temp_prefix('x')}c3.part"
    for p in (dead, live, mine):
        if kind == "dir":
            p.mkdir()
            (p / "weights.bin").write_bytes(b"\0" * 100)
        else:
            p.write_bytes(b"half")
    assert sweep_temporaries(tmp_path) == [dead]
    assert not dead.exists() and live.exists() and mine.exists()


def test_an_old_temporary_goes_even_if_its_pid_was_reused(tmp_path):
    old = tmp_path / f".kcc-tmp.{os.getppid()}.out.wav.a1.part"
    old.write_bytes(b"half")
    day_ago = time.time() - 2 * 24 * 3600
    os.utime(old, (day_ago, day_ago))
    assert sweep_temporaries(tmp_path) == [old]


def test_a_symlinked_temporary_is_removed_not_followed(tmp_path):
    target = tmp_path / "keep"
    target.mkdir()
    (target / "file").write_text("keep")
    link = tmp_path / f".kcc-tmp.{_dead_pid()}.x.y.part"
    link.symlink_to(target)
    assert sweep_temporaries(tmp_path) == [link]
    assert (target / "file").read_text() == "keep"


def test_an_atomic_write_sweeps_its_directory_once(tmp_path):
    """kcc say writes through AtomicFile: its directory's dead temporaries (ENOSPC, kill -9 of an
    earlier run) go with the first write there."""
    AtomicFile.swept.discard(tmp_path)
    stale = tmp_path / f".kcc-tmp.{_dead_pid()}.out.wav.q.part"
    stale.write_bytes(b"half")
    users = tmp_path / ".out.wav.abc.part"
    users.write_bytes(b"mine")
    with AtomicFile(tmp_path / "out.wav") as f:
        f.fh.write(b"x")
        f.commit()
    assert not stale.exists() and users.read_bytes() == b"mine" and (tmp_path / "out.wav").read_bytes() == b"x"


def test_a_killed_say_leaves_a_temporary_the_next_say_removes(tmp_path):
    """kill -9 mid-write: the temporary stays (nothing can run), and the next write in that
    directory removes it."""
    import sys
    code = ("import os, sys, time; from kcc.files import AtomicFile; "
            f"f = AtomicFile({str(tmp_path / 'out.wav')!r}); f.fh.write(b'x' * 1000); f.fh.flush(); "
            "print(f.tmp, flush=True); time.sleep(60)")
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                         env={**os.environ, "PYTHONPATH": os.getcwd()})
    left = p.stdout.readline().strip()
    p.kill()
    p.wait()
    assert os.path.exists(left)
    AtomicFile.swept.discard(tmp_path)
    with AtomicFile(tmp_path / "other.wav") as f:
        f.commit()
    assert not os.path.exists(left)


def test_a_directory_is_removed_whole_and_nothing_its_links_lead_to(tmp_path):
    d = tmp_path / "artifact"
    (d / "sub").mkdir(parents=True)
    (d / "weights.bin").write_bytes(b"w" * 10_000)
    (d / "sub" / "lib.so").write_bytes(b"l" * 5_000)
    keep = tmp_path / "keep"
    keep.write_text("mine")
    (d / "link-to-file").symlink_to(keep)
    (d / "link-to-dir").symlink_to(tmp_path)
    freed = remove_dir_atomically(d)
    assert 15_000 <= freed < 15_000 + 64 * 1024          # what its own files took on disk, links not followed
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep"] and keep.read_text() == "mine"
    assert remove_dir_atomically(d) == 0                  # already gone: nothing to do, no error


def test_a_directory_removal_cut_short_leaves_a_name_the_sweep_knows(tmp_path, monkeypatch):
    d = tmp_path / "artifact"
    d.mkdir()
    (d / "weights.bin").write_bytes(b"w" * 100)
    monkeypatch.setattr(files.shutil, "rmtree", lambda *a, **k: None)     # killed after the rename
    remove_dir_atomically(d)
    [left] = list(tmp_path.iterdir())
    assert not d.exists() and left.name.startswith(temp_prefix("artifact")) and left.name.endswith(".part")
    assert files._TEMP_RE.match(left.name) and left not in AtomicFile.live
