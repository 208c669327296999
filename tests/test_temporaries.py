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


# -- the one facility: older names swept under their lock, an ending process makes nothing new ----------------
def test_a_locked_sweep_removes_only_the_prefix_it_is_given(tmp_path):
    """Older kcc named the npm work directory '.npm-pack.XXXXXXXX' (no pid): the voices fetch
    removes those under its fetch lock, and nothing else."""
    (tmp_path / ".npm-pack.Ab12Cd34").mkdir()
    (tmp_path / ".npm-pack.Ab12Cd34" / "kokoro-js-1.2.1.tgz").write_bytes(b"x" * 100)
    (tmp_path / ".npm-pack.file").write_bytes(b"x")
    for keep in (".notes.part", "npm-pack.x", ".npm-packer", "af_heart.bin"):
        (tmp_path / keep).write_bytes(b"mine")
    removed = files.sweep_locked(tmp_path, ".npm-pack.")
    assert sorted(p.name for p in removed) == [".npm-pack.Ab12Cd34", ".npm-pack.file"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [".notes.part", ".npm-packer", "af_heart.bin", "npm-pack.x"]


def test_write_atomic_is_whole_or_nothing_and_names_the_target(tmp_path, monkeypatch):
    out = tmp_path / "item.wav"
    assert files.write_atomic(out, b"RIFF1234") == out and out.read_bytes() == b"RIFF1234"

    def full(fd):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(files.os, "fsync", full)
    with pytest.raises(OSError) as err:
        files.write_atomic(out, b"RIFF5678")
    assert err.value.errno == 28 and err.value.filename == str(out) and ".kcc-tmp" not in str(err.value)
    assert out.read_bytes() == b"RIFF1234" and sorted(p.name for p in tmp_path.iterdir()) == ["item.wav"]


def test_an_ending_process_removes_its_temporaries_and_makes_no_new_one(tmp_path, monkeypatch):
    """The command's thread runs on while the main thread ends the process: a temporary made
    after the clean-up would be left behind, so it is refused (ProcessEnding) and removed."""
    monkeypatch.setattr(AtomicFile, "live", set())
    monkeypatch.setattr(AtomicFile, "ending", False)
    before = AtomicFile(tmp_path / "a.wav")
    with temp_dir(tmp_path, "work") as work:
        (work / "x").write_bytes(b"x")
        AtomicFile.discard_live(ending=True)
        assert not work.exists() and not before.tmp.exists()
        with pytest.raises(files.ProcessEnding):
            AtomicFile(tmp_path / "b.wav")
        with pytest.raises(files.ProcessEnding):
            with temp_dir(tmp_path, "late"):
                pass
    assert list(tmp_path.iterdir()) == [] and AtomicFile.live == set()


def test_a_temporary_being_made_when_the_clean_up_runs_is_still_removed(tmp_path, monkeypatch):
    """Made and listed under one lock: a clean-up that runs while the command's thread is inside
    mkstemp waits for it and removes what it made (made first and listed after, the file could
    appear just after the clean-up and stay when the process ends)."""
    import threading
    monkeypatch.setattr(AtomicFile, "live", set())
    monkeypatch.setattr(AtomicFile, "ending", False)
    inside, go_on = threading.Event(), threading.Event()
    real = files.tempfile.mkstemp

    def slow_mkstemp(*a, **k):
        made = real(*a, **k)
        inside.set()
        go_on.wait(5)
        return made
    monkeypatch.setattr(files.tempfile, "mkstemp", slow_mkstemp)
    writer = threading.Thread(target=lambda: AtomicFile(tmp_path / "late.wav"))
    writer.start()
    assert inside.wait(5)
    cleaner = threading.Thread(target=AtomicFile.discard_live, kwargs={"ending": True})
    cleaner.start()
    cleaner.join(0.2)
    assert cleaner.is_alive()                     # it waits for the temporary being made
    go_on.set()
    writer.join(5)
    cleaner.join(5)
    assert list(tmp_path.iterdir()) == [] and AtomicFile.live == set()


def test_an_interrupt_inside_a_command_discards_without_ending(tmp_path, monkeypatch):
    """A command that raises Interrupted itself (not a signal) is cleaned up and returns; the
    process goes on (a test, an embedding program) and may write again."""
    monkeypatch.setattr(AtomicFile, "live", set())
    monkeypatch.setattr(AtomicFile, "ending", False)
    AtomicFile(tmp_path / "a.wav")
    AtomicFile.discard_live()
    assert list(tmp_path.iterdir()) == []
    with AtomicFile(tmp_path / "b.wav") as f:
        f.fh.write(b"ok")
        f.commit()
    assert (tmp_path / "b.wav").read_bytes() == b"ok"
