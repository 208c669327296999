"""kcc's OpenMP wait policy (kcc.compiler.threads.set_wait_policy): passive unless the user chose
one, and in effect in libgomp, which reads it once as a stage library loads it."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kcc.compiler.build import compile_to, compiler
from kcc.compiler.threads import WAIT_POLICY, set_wait_policy

ROOT = Path(__file__).resolve().parents[1]
SHOW = "#include <omp.h>\nvoid kcc_show_env(void) { omp_display_env(1); }\n"
# a fresh process: load the library the way kcc does (build._loads, before any CompiledCircuit)
LOAD = ("import ctypes, sys; from pathlib import Path; from kcc.compiler.build import _loads\n"
        "assert _loads(Path(sys.argv[1])); ctypes.CDLL(sys.argv[1]).kcc_show_env()")


def test_set_wait_policy_sets_passive_only_where_unset():
    env = {}
    assert set_wait_policy(env) == "passive" == WAIT_POLICY and env == {"OMP_WAIT_POLICY": "passive"}
    env = {"OMP_WAIT_POLICY": "active"}
    assert set_wait_policy(env) == "active" and env == {"OMP_WAIT_POLICY": "active"}


# libgomp shows an unset policy as PASSIVE too, but spins 300000 rounds: the spin count tells them apart
@pytest.mark.parametrize("user, seen", [(None, ("PASSIVE", "0")), ("active", ("ACTIVE", "30000000000")),
                                        ("passive", ("PASSIVE", "0"))])
def test_libgomp_runs_with_the_policy(tmp_path, user, seen):
    src = tmp_path / "show.c"
    src.write_text(SHOW)
    compile_to(compiler(), ["-shared", "-fPIC", "-fopenmp"], src, tmp_path / "show.so", "show")
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    env["PYTHONPATH"] = str(ROOT)
    if user:
        env["OMP_WAIT_POLICY"] = user
    got = subprocess.run([sys.executable, "-c", LOAD, str(tmp_path / "show.so")], capture_output=True, text=True,
                         env=env, timeout=60)
    assert got.returncode == 0, got.stderr
    assert f"OMP_WAIT_POLICY = '{seen[0]}'" in got.stderr and f"GOMP_SPINCOUNT = '{seen[1]}'" in got.stderr
