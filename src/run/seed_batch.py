"""Many seeds in one process (``seeds=[1,2,3,4]``): each seed is an ordinary run, played on a thread of
its own (a *lane*), exactly as that run would be alone.

Each lane runs the unchanged single-run path (sacred run, run_sequential, its own envs, replay buffer,
networks, optimiser, logger, checkpoints) with its own seed. What makes the lanes independent is a
baton: a lane runs only while it holds the baton, and handing the baton over swaps the process-wide
state a run reads as if it were alone in the process:
  - the random generators (torch's CPU generator, numpy's and python's global ones): every draw a lane
    makes (network initialisation, exploration, minibatch sampling) comes from its own stream, in the
    order its single run draws them;
  - sys.stdout and sys.stderr: each lane's sacred capture (its cout.txt) sees its own output only.
A lane gives the baton up only around its training step (TrainingLoop.timed_step, `released()`):
the supported learners draw no random numbers there and write only to their own objects, so while
one lane trains, another collects episodes with the baton; the training step's matmuls run outside
Python's lock, which is where a batch of seeds gains on one run (see docs/speed.md). At most one lane
per core trains at once. Everything else is serialised (in no set order: the order does not change a
lane's numbers). A lane keeps the baton while it waits for its env workers, so a hung worker holds the
other seeds up until the runner gives up on it (env_worker_timeout).

Every lane trains with learner_threads=1 (recorded in its config.json): torch's thread count is one
per process, and on some CPUs a matmul's result depends on it, so a seed of a batch equals the single
run of the same config, learner_threads=1 included (tests/test_seed_batch.py checks every logged stat).
"""
import contextlib
import functools
import os
import random
import secrets
import signal
import sys
import threading
from typing import Callable, Iterator

import numpy as np
import torch as th

from run import checkpoint
from runners.parallel_runner import usable_cores
from utils.logging import route_log_records
from utils.stop import stop_requested

# Learners whose training step (learner.train) draws no random numbers and touches no process-wide state,
# so that it may run beside another lane's collection.
SUPPORTED_LEARNERS = ("nq_learner", "q_learner", "epymarl_q_learner", "ppo_learner", "epymarl_ppo_learner",
                      "actor_critic_learner")
SUPPORTED_CONFIGS = "qmix, vdn, iql, iql_td_lambda, qmix_att, qmix_large, the *_epymarl and *_ns Q-learners, " \
                    "mappo, ippo, ippo_epymarl, ia2c, maa2c"
# A batch of more seeds than this is refused: every seed keeps its own envs, buffer and networks.
MAX_SEEDS = 64


def check_seeds(config: dict) -> list[int] | None:
    """The seeds of a seed-batched run (config key ``seeds``), or None for a single run; ValueError in one
    line for a value that is not a non-empty list of distinct whole numbers in the seed range, or for a
    setting that a batch cannot run."""
    seeds = config.get("seeds")
    if seeds is None:
        return None
    check_seed_values(seeds)
    check_batch_settings(config)
    return list(seeds)


def check_seed_values(seeds) -> None:
    """ValueError unless `seeds` is a non-empty list of at most MAX_SEEDS distinct seeds in numpy's range."""
    if not isinstance(seeds, (list, tuple)) or not seeds:
        raise ValueError(f"seeds={seeds!r} must be a non-empty list of whole numbers, e.g. seeds=[1,2,3]")
    if any(isinstance(seed, bool) or not isinstance(seed, int) for seed in seeds):
        raise ValueError(f"seeds={list(seeds)!r} must hold whole numbers only, e.g. seeds=[1,2,3]")
    bad = [seed for seed in seeds if not 0 <= seed < 2 ** 32]
    if bad:
        raise ValueError(f"seeds: {bad[0]} is outside numpy's seed range 0 .. 2**32 - 1")
    if len(set(seeds)) != len(seeds):
        repeated = sorted({seed for seed in seeds if list(seeds).count(seed) > 1})
        raise ValueError(f"seeds={list(seeds)!r} repeats {', '.join(map(str, repeated))}: each seed is one run, "
                         f"the same seed twice would be the same run twice")
    if len(seeds) > MAX_SEEDS:
        raise ValueError(f"seeds: {len(seeds)} seeds in one process; at most {MAX_SEEDS} (each keeps its own envs, "
                         f"replay buffer and networks): split them over several runs")


def check_batch_settings(config: dict) -> None:
    """ValueError for a setting of `config` that a seed batch cannot run."""
    if config["learner"] not in SUPPORTED_LEARNERS:
        raise ValueError(f"seeds: learner {config['learner']} cannot train seeds side by side; the learners that "
                         f"can: {', '.join(SUPPORTED_LEARNERS)} ({SUPPORTED_CONFIGS}); run one seed at a time "
                         f"with seed=N, or a sweep (src/sweep.py)")
    for key in ("evaluate", "save_replay"):
        if config.get(key):
            raise ValueError(f"seeds with {key}=True: not supported; evaluate each seed's checkpoint alone")
    if config.get("resume") and config.get("load_step"):
        raise ValueError(f"seeds with resume=True resume each seed's newest checkpoint; load_step="
                         f"{config['load_step']} picks one of a single run: resume that run alone")
    if config.get("use_cuda") and th.cuda.is_available():
        raise ValueError("seeds with use_cuda=True on a machine with CUDA: seed batches are untested on the GPU; "
                         "add use_cuda=False")
    if config.get("seed") is not None:
        raise ValueError(f"give either seed={config['seed']} (one run) or seeds=[...] (one run per seed), not both")


def lane_updates(seed: int, checkpoint_path: str | None = None) -> dict:
    """The config updates that make a lane the single run of `seed` (resuming `checkpoint_path` when
    given): its seed, no further batch and one torch thread (its config's seed_batch comes from
    lane_record, through main.py's config hook)."""
    updates = {"seed": seed, "seeds": None, "learner_threads": 1, "tune_learner_threads": False}
    if checkpoint_path is not None:
        updates["checkpoint_path"] = checkpoint_path
    return updates


def batch_checkpoints(checkpoint_path: str, seeds: list[int]) -> dict[int, str]:
    """{seed: models folder} of the runs to resume for `seeds=[...] resume=True checkpoint_path=...`:
    checkpoint_path is the models folder of any one run of the interrupted batch; the others are the
    folders beside it whose newest checkpoint records the same batch (training_state's seed_batch).
    ValueError in one line when checkpoint_path was not saved by a batch or a seed is not among its runs."""
    own = checkpoint.saved_state(checkpoint_path, 0)
    batch = (own or {}).get("seed_batch") or {}
    if not batch:
        raise ValueError(f"checkpoint_path {checkpoint_path} was not saved by a run of a seed batch (seeds=[...]) "
                         f"that records it; resume it alone, without seeds")
    parent = os.path.dirname(os.path.normpath(checkpoint_path))
    found = {}
    for name in sorted(os.listdir(parent)):
        state = checkpoint.saved_state(os.path.join(parent, name), 0)
        if state is not None and (state.get("seed_batch") or {}).get("id") == batch["id"]:
            found[state["seed"]] = os.path.join(parent, name)
    missing = [seed for seed in seeds if seed not in found]
    if missing:
        raise ValueError(f"seeds: {', '.join(map(str, missing))} not among the saved runs of the batch "
                         f"{batch['id']} of {checkpoint_path} (seeds {', '.join(map(str, sorted(found)))} there)")
    return {seed: found[seed] for seed in seeds}


def training_slots() -> int:
    """How many lanes may train at once: one per core. On 2 cores, 4 seeds of qmix on the null env took
    2,293 env steps/s together with 2 slots, 1,969 with 4 (a training thread per lane, the collecting
    lane slowed by the crowd) and 1,357 with 1 (docs/speed.md)."""
    return usable_cores()


def lane_record() -> dict | None:
    """The seed batch the calling thread's run belongs to ({id, seeds, index, size}: config key seed_batch),
    or None outside a seed batch."""
    thread = threading.current_thread()
    return dict(thread.record) if isinstance(thread, LaneThread) else None


def runs_to_come(config: dict) -> int:
    """This run and those of its seed batch that start after it (each with a replay buffer of its own: the
    memory check counts theirs too, the earlier runs' already hold theirs); 1 outside a batch."""
    batch = config.get("seed_batch") or {}
    return batch["size"] - batch["index"] if batch else 1


class Lane:
    """One seed's run and the process-wide state it sees while it holds the baton."""

    def __init__(self, label: str):
        self.label = label
        self.rng = None  # (torch, numpy, python) generator states; None until the lane first gives the baton up
        self.stdout, self.stderr = sys.stdout, sys.stderr

    def save(self) -> None:
        self.rng = (th.get_rng_state(), np.random.get_state(), random.getstate())
        self.stdout, self.stderr = sys.stdout, sys.stderr

    def restore(self) -> None:
        if self.rng is not None:
            th.set_rng_state(self.rng[0])
            np.random.set_state(self.rng[1])
            random.setstate(self.rng[2])
        sys.stdout, sys.stderr = self.stdout, self.stderr


class Baton:
    """Lets one lane run at a time, swapping the process-wide state at each hand-over (see the module doc),
    and at most `training_slots` lanes train at once without it."""

    def __init__(self, training_slots: int):
        self._lock = threading.Lock()
        self._training = threading.Semaphore(training_slots)
        self.base_streams = (sys.stdout, sys.stderr)

    def take(self, lane: Lane) -> None:
        self._lock.acquire()
        lane.restore()

    def give(self, lane: Lane) -> None:
        lane.save()
        sys.stdout, sys.stderr = self.base_streams
        self._lock.release()

    @contextlib.contextmanager
    def held(self, lane: Lane) -> Iterator[None]:
        """The body runs holding the baton, with `lane`'s state."""
        self.take(lane)
        try:
            yield
        finally:
            self.give(lane)

    @contextlib.contextmanager
    def training_without(self, lane: Lane) -> Iterator[None]:
        """The body (`lane`'s training step, which holds the baton until here) runs without it, in a
        training slot, its log records going to the lane's own output."""
        self.give(lane)
        try:
            with self._training, route_log_records(lane.stderr):
                yield
        finally:
            self.take(lane)


@contextlib.contextmanager
def released() -> Iterator[None]:
    """Run the body (a training step) without the baton when the current thread is a lane, a no-op in a
    single run: other lanes run meanwhile. The body must draw no random numbers."""
    thread = threading.current_thread()
    if not isinstance(thread, LaneThread):
        yield
        return
    thread.has_trained.set()
    with thread.baton.training_without(thread.lane):
        yield


class LaneThread(threading.Thread):
    """Runs `body` (one seed's whole run) as a lane. `outcome`: its exit status once it has ended (None
    before, and for a lane never started); `has_trained` is set once it first gives the baton up for a
    training step (its set-up done)."""

    def __init__(self, baton: Baton, lane: Lane, seed: int, body: Callable[[], int], record: dict):
        super().__init__(name=f"lane {lane.label}", daemon=True)
        self.baton, self.lane, self.seed, self.body, self.record = baton, lane, seed, body, record
        self.outcome = None
        self.has_trained = threading.Event()

    def run(self) -> None:
        self.outcome = 1  # unless the body returns its own status
        with self.baton.held(self.lane):
            th.set_num_threads(1)  # a new thread starts with torch's default count (OpenMP's is per thread)
            self.outcome = self.body()


def run_lanes(seeds: list[int], body: Callable[[int], int]) -> list[LaneThread]:
    """Run `body(seed)` as a lane for each seed and return the lanes once all that started have ended. They
    start one after the other, each once the one before has set up and trained once (or ended), so that a
    setting that fails at set-up, which would fail the same way for every seed, fails once: after a run
    that ended with an error before training, or once a stop signal came, no further lane starts. The
    waits are short, so that the calling (main) thread handles stop signals meanwhile."""
    baton, batch_id = Baton(training_slots()), secrets.token_hex(3)
    lanes = [LaneThread(baton, Lane(f"seed {seed}"), seed, functools.partial(body, seed),
                        {"id": batch_id, "seeds": list(seeds), "index": index, "size": len(seeds)})
             for index, seed in enumerate(seeds)]
    started = []
    for lane in lanes:
        if started and not _ready_for_next(started[-1]):
            break
        lane.start()
        started.append(lane)
    for lane in started:
        while lane.is_alive():
            lane.join(timeout=0.2)
    return lanes


def _ready_for_next(previous: LaneThread) -> bool:
    """Wait until `previous` has trained once or ended; whether the next lane may start."""
    while not previous.has_trained.is_set() and previous.is_alive():
        previous.join(timeout=0.2)
    failed_before_training = not previous.has_trained.is_set() and previous.outcome
    return not failed_before_training and stop_requested() is None


def batch_outcome(lanes: list[LaneThread], stopped_by: str | None) -> tuple[str, int]:
    """(what to say, or "", the exit status) of a seed batch: a stop signal's status if one came, else the
    highest of its runs' (2 bad input, 1 failed), else 1 if some runs were not started, else 0."""
    not_started = [lane.seed for lane in lanes if lane.ident is None]
    failed = [lane.seed for lane in lanes if lane.outcome]
    problem = ""
    if not_started:
        why = f"stopped by {stopped_by}" if stopped_by else f"the run of seed {failed[0]} failed before training"
        problem = f"seeds {', '.join(map(str, not_started))} not started: {why}"
    if stopped_by:
        return problem, 128 + signal.Signals[stopped_by].value
    return problem, max((lane.outcome or 0 for lane in lanes), default=0) or (1 if not_started else 0)
