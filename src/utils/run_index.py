"""Finding and identifying runs, shared by the sweep, plot and table tools: sacred run folders, what a
run recorded about itself in config.json (run_kind, unique_token), and dotted config keys
(`env_args.map_name`)."""
import json
import os
from typing import Any

RUN_FILES = ("config.json", "run.json", "info.json")


def read_json(path: str) -> dict:
    with open(path) as f:
        return json.load(f)


def run_folders(paths: list) -> list:
    """Sacred run folders (holding config.json, run.json and info.json) under `paths` (run folders, or
    any folder above them), sorted; FileNotFoundError for a path that does not exist."""
    found = []
    for path in paths:
        if not os.path.exists(path):
            raise FileNotFoundError(f"'{path}' does not exist; pass a results/sacred/<map or env> folder "
                                    f"or a run folder")
        for root, dirs, files in os.walk(path):
            dirs[:] = [d for d in dirs if d != "_sources"]
            if set(RUN_FILES) <= set(files):
                found.append(root)
    return sorted(found)


def run_kind(config: dict) -> str:
    """"evaluate" for a run that only tested a model (evaluate or save_replay, as in PyMARL2), else
    "train"; what the run recorded as run_kind, or for runs from before that key, what its config says."""
    if "run_kind" in config:
        return config["run_kind"]
    return "evaluate" if config.get("evaluate") or config.get("save_replay") else "train"


def get_dotted(config: dict, dotted: str) -> Any:
    """config['a']['b'] for 'a.b'; KeyError(dotted) when a key is missing."""
    value = config
    for part in dotted.split("."):
        if not isinstance(value, dict) or part not in value:
            raise KeyError(dotted)
        value = value[part]
    return value


def has_dotted(config: dict, dotted: str) -> bool:
    try:
        get_dotted(config, dotted)
    except KeyError:
        return False
    return True


def run_where(config: dict) -> str:
    """What the run played: its map (env_args.map_name) where it has one, else its env."""
    return str((get_dotted(config, "env_args.map_name") if has_dotted(config, "env_args.map_name") else None)
               or config["env"])


def flatten(config: dict, prefix: str = "") -> dict:
    """{'a.b': value} for nested {'a': {'b': value}} (an empty dict stays a value)."""
    flat = {}
    for key, value in config.items():
        if isinstance(value, dict) and value:
            flat.update(flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def nested(dotted: str, value: Any) -> dict:
    """{'a': {'b': value}} for 'a.b'."""
    for part in reversed(dotted.split(".")):
        value = {part: value}
    return value


# What a run of a seed batch records about the batch (config keys seeds and seed_batch, flattened; a single
# run records seed_batch {}): the runs of one batch are seeds of one setting.
SEED_BATCH_KEYS = ("seeds", "seed_batch", "seed_batch.id", "seed_batch.seeds", "seed_batch.index", "seed_batch.size")

# info.json key of each test round's per-episode values (utils/logging.py, Logger.log_episodes): {"T": [t_env of
# each round], "return": [[one value per episode] per round], "battle_won": [[...]] where the env reports it (null
# for a round in which not every episode did)}.
# Kept in sacred only (TensorBoard has the means); about 12 bytes per test episode, so a 10M-step SMAC run that
# tests 100 episodes every 50k steps adds 0.25 MB.
EPISODE_RECORD = "test_episodes"

# A run's test metric: the first of these it logged (the win rate where the env has one, else the return, or the
# agents' summed return with per-agent rewards); the tables and the absolute metric's choice of checkpoint use it.
TEST_METRICS = ("test_battle_won_mean", "test_return_mean", "test_total_return_mean")


def rounded_test_nepisode(test_nepisode: int, batch_size_run: int) -> int:
    """The test episodes a run plays per test (greedy or sampled, as its action selector tests): test_nepisode
    rounded down to whole parallel runs of batch_size_run episodes, at least one run (PyMARL2's
    args_sanity_check; 100 on 8 envs plays 96)."""
    return max(batch_size_run, test_nepisode // batch_size_run * batch_size_run)


def test_metric(info: dict) -> str | None:
    """The test metric a run's info.json logged (TEST_METRICS' first), None before its first test."""
    return next((name for name in TEST_METRICS if info.get(name)), None)


def first_at_or_after(values, steps, step: int) -> float | None:
    """The value of the first test logged at t_env >= step, None if the run never got there."""
    return next((float(value) for value, t in zip(values, steps) if t >= step), None)
