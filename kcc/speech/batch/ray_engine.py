"""The distributed engine: the same items on Ray Data. A pool of stateful actors (map_batches
with a class) each loads one synthesizer in its constructor, so a node builds the compiled
artifact once (kcc.compiler.build's cache, per node) and loads it once per actor, never per item; the
actors write each item's outputs themselves (OUTDIR must be a path every node sees) and return
only its small outcome record.

The driver reads the manifest itself (manifest.py) instead of ray.data.read_json / read_text:
plain-text ids are line numbers, and repeated ids are found, in one ordered pass over a file of
text that is small next to its audio; the items then go to Ray with from_items. Ray Data
restarts an actor that dies and retries its batch (its defaults: max_restarts=-1,
max_task_retries=-1), and finished items are skipped by their sidecars, so a killed worker
costs only the items it had in flight.
"""
from __future__ import annotations

import json
import os
import secrets
from typing import Callable, Iterable, Iterator

import numpy as np

from kcc.speech.batch.item import ItemWorker, JobOptions, Outcome
from kcc.speech.batch.local_pool import SynthSpec, load
from kcc.speech.batch.manifest import Item, item_from_dict

# One block per item up to this many (an actor task runs a block; a retried task redoes only
# its unfinished items): fine-grained balance without a scheduling cost per item on huge jobs.
MAX_BLOCKS = 1000


class RayUnavailable(RuntimeError):
    """--engine ray was asked for but Ray cannot be imported or started."""


class SynthActor:
    def __init__(self, factory: Callable, options: JobOptions):
        self.worker = ItemWorker(factory(), options)

    def __call__(self, batch: dict) -> dict:
        outcomes = [self.worker.run(item_from_dict(json.loads(s))).to_dict() for s in batch["item"]]
        return {"outcome": np.array([json.dumps(o) for o in outcomes], dtype=object)}


def run_ray(items: Iterable[Item], options: JobOptions, factory: Callable, workers: int, threads: int,
            address: str | None = None) -> Iterator[Outcome]:
    """Outcomes as Ray returns them. Uses the Ray already initialised in this process, else
    connects to `address`, else starts a local Ray with workers x threads CPUs."""
    try:
        import ray
    except ImportError as exc:
        raise RayUnavailable(f"--engine ray needs Ray (pip install 'ray[data]'): {exc}") from None
    rows = [{"item": json.dumps(i.to_dict(), ensure_ascii=False)} for i in items]
    if not rows:
        return
    if isinstance(factory, SynthSpec) and not address:
        load(factory)          # a local Ray's actors share this node: build the artifact once, here
    started = not ray.is_initialized()
    restore_env = {}
    if started:
        try:
            if address:
                ray.init(address=address, log_to_driver=False)
            else:
                restore_env = _require_token_for_local_ray()
                ray.init(num_cpus=workers * threads, include_dashboard=False, log_to_driver=False,
                         _node_ip_address="127.0.0.1")
        except Exception as exc:
            _restore(restore_env)
            raise RayUnavailable(f"cannot start Ray{f' at {address}' if address else ''}: {exc}") from None
    try:
        ctx = ray.data.DataContext.get_current()
        ctx.enable_progress_bars = False
        ds = ray.data.from_items(rows, override_num_blocks=min(len(rows), MAX_BLOCKS))
        ds = ds.map_batches(SynthActor, fn_constructor_args=(factory, options), batch_size=1,
                            batch_format="numpy", concurrency=workers, num_cpus=threads)
        for row in ds.iter_rows():
            yield Outcome(**json.loads(row["outcome"]))
    finally:
        if started:
            ray.shutdown()
            _restore(restore_env)


# The local Ray kcc starts: Ray's GCS and raylet accept connections on every interface (Ray 2.60
# keeps binding them to all addresses whatever _node_ip_address says; where a Ray honours it,
# they bind loopback), and whoever reaches them can run code as the user. So kcc's own Ray
# requires Ray's token authentication with a fresh random token per run, handed to Ray's
# processes in their environment and never written to disk; a client without it is refused
# (Unauthenticated). A cluster given with --address is the user's to secure.
_AUTH_ENV = ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")


def _require_token_for_local_ray() -> dict:
    """Set Ray's token mode and a per-run token in this process's environment (Ray's processes
    inherit it); returns what to put back afterwards."""
    before = {k: os.environ.get(k) for k in _AUTH_ENV}
    os.environ.pop("RAY_AUTH_TOKEN_PATH", None)
    os.environ["RAY_AUTH_MODE"] = "token"
    os.environ["RAY_AUTH_TOKEN"] = secrets.token_hex(32)
    _reload_ray_auth()
    return before


def _restore(before: dict) -> None:
    if not before:
        return
    for k, v in before.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    _reload_ray_auth()


def _reload_ray_auth() -> None:
    """Ray caches its auth mode and token per process: make it read the environment again."""
    try:
        from ray._raylet import AuthenticationTokenLoader, Config
    except ImportError:          # a Ray without token authentication: nothing cached
        return
    Config.initialize("")
    AuthenticationTokenLoader.instance().reset_cache()
