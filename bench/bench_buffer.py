"""Replay buffer memory and speed on SMAC corridor's shapes (issue 7's workload), without training.

Usage (from the repository root):
    python bench/bench_buffer.py [--buffer-size 5000] [--episode-length 100] [--spread 0]
                                 [--batch-size 128] [--batch-size-run 8] [--old-rows 256] [--repeats 10]
                                 [--save] [--seed 0]

Fills a ReplayBuffer (run.build_scheme's scheme for the null env's corridor shapes: 6 agents, 30
actions, obs 156, state 282, episode_limit 400) by inserting dense runner-like batches of
batch_size_run episodes until it has wrapped around once more by a fifth, then reports:
  - bytes: the old layout's (every episode padded to episode_limit + 1 steps, float one-hot
    actions, long actions and filled, int32 avail_actions), computed, against the stored bytes
    of the new buffer, measured;
  - RSS: this process's resident memory before the buffer and after filling it;
  - insert: seconds per insert_episode_batch of batch_size_run episodes;
  - sample: seconds per sample(batch_size) of the new buffer, and of the old layout (a dense
    old-layout batch of --old-rows episodes, sampled and cut as the old ReplayBuffer did;
    0 skips it);
  - with --save, the checkpoint file (ReplayBuffer.state_dict) size and its save/load times.
Episode lengths are episode-length, or uniform in episode-length +- spread.
"""
import argparse
import datetime
import os
import sys
import tempfile
import time

import numpy as np
import psutil
import torch as th

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src"))

from components.episode_buffer import EpisodeBatch, ReplayBuffer  # noqa: E402  (needs src/ on sys.path)
from components.transforms import OneHot  # noqa: E402
from envs.null_env import NullEnv  # noqa: E402
from run import checkpoint  # noqa: E402
from run.run import build_scheme  # noqa: E402
from machine_info import describe_machine  # noqa: E402

GB = 1e9


def old_step_bytes(info: dict) -> int:
    """Bytes per step of the old layout: float32 obs, state, reward and actions_onehot, int64 actions
    and filled, int32 avail_actions, uint8 terminated."""
    agents, actions = info["n_agents"], info["n_actions"]
    return (4 * (agents * info["obs_shape"] + info["state_shape"] + 1) + 8 * agents + 4 * agents * actions
            + 4 * agents * actions + 1 + 8)


def old_scheme(info: dict) -> tuple:
    """The old layout's scheme and preprocess (long actions, int32 avail_actions, one-hot copy)."""
    scheme, groups, _ = build_scheme(info)
    scheme["actions"] = dict(scheme["actions"], dtype=th.long)
    scheme["avail_actions"] = dict(scheme["avail_actions"], dtype=th.int)
    scheme["terminated"] = dict(scheme["terminated"], dtype=th.uint8)
    return scheme, groups, {"actions": ("actions_onehot", [OneHot(out_dim=info["n_actions"])])}


def runner_batch(scheme: dict, groups: dict, preprocess: dict, info: dict, n_episodes: int,
                 rng: np.random.Generator) -> EpisodeBatch:
    """A dense batch of n_episodes, every step of episode_limit + 1 written with random data."""
    steps, agents, actions = info["episode_limit"] + 1, info["n_agents"], info["n_actions"]
    batch = EpisodeBatch(scheme, groups, n_episodes, steps, preprocess=preprocess)
    batch.update({
        "state": rng.standard_normal((n_episodes, steps, info["state_shape"]), dtype=np.float32),
        "obs": rng.standard_normal((n_episodes, steps, agents, info["obs_shape"]), dtype=np.float32),
        "actions": rng.integers(actions, size=(n_episodes, steps, agents, 1)),
        "avail_actions": rng.random((n_episodes, steps, agents, actions)) < 0.5,
        "reward": rng.standard_normal((n_episodes, steps, 1), dtype=np.float32),
        "terminated": np.zeros((n_episodes, steps, 1), dtype=bool)})
    return batch


def set_lengths(batch: EpisodeBatch, lengths: np.ndarray) -> None:
    """Mark the first L + 1 steps of each episode filled (L env steps and the final state row)."""
    steps = th.arange(batch.max_seq_length)  # [time]
    batch["filled"][:] = (steps[None, :] <= th.as_tensor(lengths)[:, None]).unsqueeze(-1)  # [batch, time, 1]


def draw_lengths(args: argparse.Namespace, limit: int, n: int, rng: np.random.Generator) -> np.ndarray:
    low, high = max(1, args.episode_length - args.spread), min(limit, args.episode_length + args.spread)
    return rng.integers(low, high + 1, size=n)


def fill(buffer: ReplayBuffer, batch: EpisodeBatch, args: argparse.Namespace, limit: int,
         rng: np.random.Generator) -> float:
    """Insert until the ring has wrapped once and a fifth more; returns seconds per insert."""
    n_inserts = -(-buffer.buffer_size * 6 // 5 // args.batch_size_run)
    seconds = 0.0
    for _ in range(n_inserts):
        set_lengths(batch, draw_lengths(args, limit, args.batch_size_run, rng))
        start = time.perf_counter()
        buffer.insert_episode_batch(batch)
        seconds += time.perf_counter() - start
    return seconds / n_inserts


def time_calls(call, repeats: int) -> float:
    call()  # warm-up
    start = time.perf_counter()
    for _ in range(repeats):
        call()
    return (time.perf_counter() - start) / repeats


def old_sample_seconds(batch: EpisodeBatch, info: dict, args: argparse.Namespace, rng: np.random.Generator) -> float:
    """The old ReplayBuffer.sample and TrainingLoop.learn's cut, on a dense old-layout batch of --old-rows
    episodes that repeat `batch`'s."""
    scheme, groups, preprocess = old_scheme(info)
    dense = EpisodeBatch(scheme, groups, args.old_rows, batch.max_seq_length, preprocess=preprocess)
    for start in range(0, args.old_rows, batch.batch_size):
        n = min(batch.batch_size, args.old_rows - start)
        dense.update({key: value[:n] for key, value in batch.data.transition_data.items()},
                     bs=slice(start, start + n), mark_filled=False)  # dtypes cast, one-hot added
    set_lengths(dense, draw_lengths(args, info["episode_limit"], args.old_rows, rng))

    def sample() -> None:
        drawn = dense[np.random.choice(args.old_rows, args.batch_size, replace=False)]
        drawn[:, :drawn.max_t_filled()].to("cpu")

    return time_calls(sample, args.repeats)


def save_and_load(buffer: ReplayBuffer, scheme: dict) -> tuple:
    """(file bytes, save seconds, load seconds) of the buffer's checkpoint file, as run.py writes and reads it."""
    fresh = ReplayBuffer(scheme, buffer.groups, buffer.buffer_size, buffer.max_seq_length, buffer.preprocess)
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, checkpoint.BUFFER_FILE)
        start = time.perf_counter()
        th.save(buffer.state_dict(), path)
        saved = time.perf_counter()
        checkpoint.load_buffer_state(fresh, checkpoint.load_file(folder, checkpoint.BUFFER_FILE, mmap=True), folder)
        loaded = time.perf_counter()
        return os.path.getsize(path), saved - start, loaded - saved


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--buffer-size", type=int, default=5000)
    parser.add_argument("--episode-length", type=int, default=100)
    parser.add_argument("--spread", type=int, default=0)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--batch-size-run", type=int, default=8)
    parser.add_argument("--old-rows", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--save", action="store_true")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if 0 < args.old_rows < args.batch_size:
        parser.error(f"--old-rows must be 0 or at least --batch-size ({args.batch_size})")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    th.set_num_threads(1)
    np.random.seed(args.seed)
    rng = np.random.default_rng(args.seed)
    info = NullEnv(map_name="corridor").get_env_info()
    limit = info["episode_limit"]
    print(f"command: python bench/bench_buffer.py --buffer-size {args.buffer_size} --episode-length "
          f"{args.episode_length} --spread {args.spread} --batch-size {args.batch_size} --batch-size-run "
          f"{args.batch_size_run} --old-rows {args.old_rows} --repeats {args.repeats} --seed {args.seed}"
          f"{' --save' if args.save else ''}")
    print(f"machine: {describe_machine()}, torch {th.__version__} (1 thread)")
    print(f"date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M UTC}")

    scheme, groups, preprocess = build_scheme(info)
    batch = runner_batch(scheme, groups, preprocess, info, args.batch_size_run, rng)
    process = psutil.Process()
    rss_before = process.memory_info().rss
    buffer = ReplayBuffer(scheme, groups, args.buffer_size, limit + 1, preprocess=preprocess)
    insert_seconds = fill(buffer, batch, args, limit, rng)
    rss_after = process.memory_info().rss
    sample_seconds = time_calls(lambda: buffer.sample(args.batch_size), args.repeats)
    step_bytes = ReplayBuffer.storage_bytes(scheme, groups, preprocess).step
    stored_steps = int(buffer.lengths.sum())
    old_bytes = args.buffer_size * (limit + 1) * old_step_bytes(info)

    print(f"buffer: {args.buffer_size} episodes of {args.episode_length} +- {args.spread} steps, "
          f"{stored_steps} stored steps")
    print(f"bytes per step: old {old_step_bytes(info)}, new {step_bytes}")
    print(f"buffer bytes: old {old_bytes / GB:.2f} GB (computed), new {buffer.stored_bytes() / GB:.3f} GB "
          f"(measured; stored steps x bytes per step = {stored_steps * step_bytes / GB:.3f} GB), "
          f"ratio {old_bytes / buffer.stored_bytes():.1f}x")
    print(f"process RSS: {rss_before / GB:.3f} GB before the buffer, {rss_after / GB:.3f} GB after filling "
          f"(+{(rss_after - rss_before) / GB:.3f} GB)")
    print(f"insert of {args.batch_size_run} episodes: {insert_seconds * 1e3:.2f} ms")
    print(f"sample of {args.batch_size} episodes: new {sample_seconds * 1e3:.1f} ms", end="")
    if args.old_rows:
        old_seconds = old_sample_seconds(batch, info, args, rng)
        print(f", old layout {old_seconds * 1e3:.1f} ms (new/old {sample_seconds / old_seconds:.2f})", end="")
    print()
    if args.save:
        size, save_s, load_s = save_and_load(buffer, scheme)
        print(f"checkpoint: {size / GB:.3f} GB file ({size / buffer.stored_bytes():.3f} x stored bytes), "
              f"save {save_s:.1f} s, load {load_s:.1f} s")


if __name__ == "__main__":
    main()
