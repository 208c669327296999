"""kcc batch --engine ray on a local 2-CPU Ray: a worker killed mid-run, a job stopped and resumed,
outputs bit-identical to the local pool. One Ray for the module (starting one costs
~20 s on 2 cores); skipped when Ray is not importable or KCC_SKIP_RAY=1."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

if os.environ.get("KCC_SKIP_RAY") == "1":
    pytest.skip("KCC_SKIP_RAY=1", allow_module_level=True)
ray = pytest.importorskip("ray")

from kcc.speech.batch import Batch                                            # noqa: E402
from test_batch import PHONEME_ITEMS, FakeFactory, job_kwargs, outputs, run_batch, voice_dir  # noqa: E402,F401

TESTS = Path(__file__).resolve().parent
ITEMS = PHONEME_ITEMS + [{"id": f"q{i}", "phonemes": "ə lˈɔŋɡɚ sˈɛntəns " * (1 + i), "seed": 30 + i}
                         for i in range(3)]


@pytest.fixture(scope="module", autouse=True)
def local_ray():
    # Workers import the test doubles (FakeFactory) by module name, as spawned pool workers do.
    path = os.pathsep.join([str(TESTS.parent), str(TESTS), os.environ.get("PYTHONPATH", "")])
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": path}})
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    out = tmp_path_factory.mktemp("reference")
    job, got = run_batch(ITEMS, out, workers=2, processes=True)            # the local pool
    assert job.ok and len(got) == len(ITEMS)
    return outputs(out)


def test_ray_survives_a_killed_worker_and_matches_the_local_pool(tmp_path, reference):
    marks = tmp_path / "marks"
    marks.mkdir()
    job, got = run_batch(ITEMS, tmp_path / "out", engine="ray", workers=2, threads=1,
                         synth=FakeFactory(marks=str(marks), kill_seed=31))
    assert job.ok, job.summary["failures"]
    assert sorted(o.id for o in got) == sorted(r["id"] for r in ITEMS) and {o.status for o in got} == {"done"}
    assert (marks / "killed-31").exists()
    loads = len(list(marks.glob("load-*")))
    assert 2 <= loads <= 4 < len(ITEMS)                    # per actor (and its restart), never per item
    assert outputs(tmp_path / "out") == reference
    assert job.summary["engine"] == "ray" and job.summary["counts"]["done"] == len(ITEMS)


def test_ray_job_stopped_midway_resumes(tmp_path, reference):
    out = tmp_path / "out"
    it = iter(Batch(ITEMS, out, **job_kwargs(engine="ray", workers=2, threads=1)))
    first = [next(it) for _ in range(3)]
    it.close()
    assert all(o.status == "done" for o in first)
    job, got = run_batch(ITEMS, out, engine="ray", workers=2, threads=1)
    status = {o.id: o.status for o in got}
    assert job.ok and len(status) == len(ITEMS)
    assert all(status[o.id] == "skipped" for o in first)
    assert outputs(out) == reference
