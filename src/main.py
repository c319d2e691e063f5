"""Command line entry point: a sacred experiment over the merged YAML configs.

    python src/main.py --config=qmix --env-config=sc2 with env_args.map_name=3m t_max=100000

Config precedence (later wins): config/default.yaml < config/envs/<ENV>.yaml <
config/algs/<ALG>.yaml < the sacred `with key=value` overrides. Results land under
<local_results_path>/sacred/<map_name or env>/<name>/<run id>/ (sacred's config.json,
info.json, cout.txt), plus tb_logs/ and models/ next to it; a relative local_results_path
is taken relative to the repository root, as PyMARL2 does for its results folder.
"""
import collections.abc
import copy
import functools
import os
import random
import signal
import sys
import tempfile
import traceback
import warnings
from os.path import abspath, dirname, join
from typing import NamedTuple

import numpy as np
import torch as th

with warnings.catch_warnings():
    # sacred 0.8.7 imports pkg_resources, which warns that it is deprecated.
    warnings.filterwarnings("ignore", message="pkg_resources is deprecated", category=UserWarning)
    from docopt import docopt
    from sacred import SETTINGS, Experiment
    from sacred.arg_parser import get_config_updates
    from sacred.observers import FileStorageObserver
    from sacred.randomness import get_seed
    from sacred.utils import SacredError, apply_backspaces_and_linefeeds

from envs import REGISTRY as env_REGISTRY  # noqa: E402
from envs import STARCRAFT_ENVS  # noqa: E402
from envs.gymma import REWARD_SCALARISATIONS  # noqa: E402
from envs.starcraft.interface.backend import select_backend  # noqa: E402
from envs.starcraft.interface.distributions import (  # noqa: E402
    CAPABILITY_KEYS, DISTRIBUTION_CONFIG_KEYS, check_capability_config, check_prob_obs_enemy)
from envs.starcraft.game.maps import gen_map_of, get_map_params  # noqa: E402
from envs.starcraft.interface.smacv2_configs import (  # noqa: E402
    check_scenario_name, read_config_file, scenario_config_path)
from run import checkpoint  # noqa: E402
from run import REGISTRY as run_REGISTRY  # noqa: E402
from run.run import unique_token  # noqa: E402
from run.seed_batch import (batch_checkpoints, batch_outcome, check_seeds, lane_record, lane_updates,  # noqa: E402
                             run_lanes)
from runners.parallel_runner import EnvWorkerError  # noqa: E402
from runners.runner_base import env_seeds  # noqa: E402
from utils.config_check import UsageError, env_arg_kinds, normalise_file, normalise_overrides, range_error  # noqa: E402
from utils.logging import get_logger, set_thread_label  # noqa: E402
from utils.run_index import flatten, run_kind  # noqa: E402
from utils.sacred_git import ask_git_once_per_repository  # noqa: E402
from utils.stop import CommandSignals, StopSignals, ignore_stop_signals  # noqa: E402
from utils.th_utils import resolve_train_precision  # noqa: E402

SRC_DIR = dirname(abspath(__file__))
REPO_DIR = dirname(SRC_DIR)
CONFIG_DIR = join(SRC_DIR, "config")
USAGE_EXIT_CODE = 2
# EPyMARL's learners that train on each agent's own reward (common_reward=False; the Q-learner without a mixer)
PER_AGENT_REWARD_LEARNERS = ("actor_critic_learner", "epymarl_ppo_learner", "epymarl_q_learner", "maddpg_learner",
                             "pac_learner")
# EPyMARL's learners, whose hidden_dim, as in EPyMARL, sets the agent's width too (rnn_hidden_dim) when given alone
EPYMARL_LEARNERS = PER_AGENT_REWARD_LEARNERS + ("pac_dcg_learner", "epymarl_coma_learner")
# SMAC's env, and SMACv2's: sc2wrapped plays a 10gen map with the capability_config given,
# sc2v2 one of the 15 scenarios of SMACv2's paper by name (EPyMARL's), from smacv2_configs/.
SMACV2_ENVS = tuple(env for env in STARCRAFT_ENVS if env != "sc2")

# PyMARL2's "fd" capture redirects the process's file descriptors through an external `tee`;
# it fails where stdout/stderr are not real descriptors (pytest, notebooks, some launchers).
# "sys" tees sys.stdout/sys.stderr into the run's cout.txt and works everywhere.
SETTINGS.CAPTURE_MODE = "sys"

logger = get_logger()
ask_git_once_per_repository()  # the same record, one git query instead of one per source file
ex = Experiment("pymarl")
ex.logger = logger
ex.captured_out_filter = apply_backspaces_and_linefeeds


class OneLineError(SacredError):
    """Sacred prints this one line instead of a traceback and exits with status 1; `--debug`
    shows the traceback."""

    def __init__(self, message: str):
        super().__init__(message, print_traceback=False)


class InputError(OneLineError):
    """Bad user input: unknown map, backend or name, impossible settings, unusable checkpoint,
    a replay buffer too large for the memory, an env that returns NaN."""


class RunFailed(OneLineError):
    """Training cannot go on: a NaN/inf loss, env workers that keep failing."""


# The (dotted) keys given after `with` on this process's command line (main() sets them): a resumed
# run keeps the checkpoint's train_precision unless the command line gives one.
COMMAND_LINE_KEYS: set = set()


@ex.config_hook
def complete_config(config: dict, command_name: str, logger) -> dict:
    """Complete the config before sacred records it, so that config.json says what ran and identifies
    the run: the run's seed (sacred would only draw it after this hook), the env's seed, the
    per-worker env seeds derived from it, the training precision train_precision resolves to, for
    SMAC the engine that plays, for gymma the reward settings, for EPyMARL's learners the agent width
    a lone hidden_dim gives, whether the run trains or evaluates (run_kind), and its unique_token
    (the name of its tb_logs/ and models/ folders, which tools match runs by)."""
    check_settings(config)
    seed = config["seed"] if config.get("seed") is not None else get_seed()
    updates = {"seed": seed, "env_args": {"seed": seed}, "env_seeds": env_seeds(seed, config["batch_size_run"]),
               "train_precision": training_precision(config, logger), "run_kind": run_kind(config)}
    if config["env"] in STARCRAFT_ENVS:
        updates["env_args"].update(smac_settings(config))
    if config["env"] == "gymma":
        updates["env_args"].update(gymma_settings(config))
    if config["learner"] in EPYMARL_LEARNERS and "hidden_dim" in COMMAND_LINE_KEYS \
            and "rnn_hidden_dim" not in COMMAND_LINE_KEYS:
        updates["rnn_hidden_dim"] = config["hidden_dim"]  # EPyMARL's one width for agent and critic
    batch_record = lane_record()
    if batch_record is not None:
        updates["seed_batch"] = batch_record  # this run's place in its seed batch (run/seed_batch.py)
    updates["unique_token"] = unique_token(recursive_dict_update(copy.deepcopy(config), copy.deepcopy(updates)))
    if config["env"] in STARCRAFT_ENVS and config["save_replay"]:
        updates["env_args"]["replay_prefix"] = config["env_args"].get("replay_prefix") or updates["unique_token"]
    return updates


def training_precision(config: dict, log) -> str:
    """What train_precision resolves to on this machine ("float32" or "bfloat16"): the checkpoint's
    precision for a resumed run unless the command line sets train_precision, else the config's,
    with "auto" resolved (bfloat16 on a CPU with native bfloat16, see resolve_train_precision)."""
    requested = config["train_precision"]
    if config.get("resume") and "train_precision" not in COMMAND_LINE_KEYS:
        saved = checkpoint.saved_precision(config["checkpoint_path"], config["load_step"])
        if saved is not None and saved != requested:
            log.info(f"train_precision: {saved}, the precision the resumed checkpoint was trained in (the "
                     f"config says {requested}; give train_precision on the command line to change it)")
        requested = saved or requested
    device = "cuda" if config["use_cuda"] and th.cuda.is_available() else "cpu"
    try:
        precision, why = resolve_train_precision(requested, device)
    except ValueError as error:
        raise InputError(str(error)) from error
    if requested == "auto":
        log.info(f"train_precision=auto resolves to {precision} ({why})")
    return precision


def gymma_settings(config: dict) -> dict:
    """The reward settings EPyMARL hands its gymma envs; the task is built once here so that a wrong
    key or env argument is one line before any worker starts."""
    settings = {"common_reward": config["common_reward"], "reward_scalarisation": config["reward_scalarisation"]}
    try:
        env_REGISTRY["gymma"](**dict(config["env_args"], **settings)).close()
    except (ValueError, TypeError) as error:
        raise InputError(str(error)) from error
    return settings


def smac_settings(config: dict) -> dict:
    """Check the map (and SMACv2's capability_config), resolve env_args.backend, and record replays
    (as GIFs under <local_results_path>/replays unless replay_dir is set) when save_replay is on."""
    env_args = config["env_args"]
    if "env_args.map_name" not in COMMAND_LINE_KEYS and config["env"] != "sc2v2":
        logger.warning(f"no env_args.map_name given: playing {env_args['map_name']}, the default of the env config")
    try:
        map_file = checked_map(config["env"], env_args)
        settings = {"backend": select_backend(env_args.get("backend", "auto"), map_file),
                    "record_replay": bool(config["save_replay"])}
    except ValueError as error:
        raise InputError(str(error)) from error
    if config["save_replay"] and not env_args.get("replay_dir"):
        settings["replay_dir"] = join(results_path(config["local_results_path"]), "replays")
    return settings


def checked_map(env_name: str, env_args: dict) -> str:
    """The map file that plays env_args.map_name on `env_name` (a STARCRAFT_ENVS env); ValueError in
    one line for a map of the other SMAC version, an unknown scenario, a bad capability_config or
    prob_obs_enemy."""
    map_name = env_args["map_name"]
    if env_name == "sc2":
        get_map_params(map_name)
        return map_name
    if env_name == "sc2v2":
        check_scenario_name(map_name)
    check_capability_config(env_args.get("capability_config", {}), map_name)
    check_prob_obs_enemy(env_args.get("prob_obs_enemy", 1.0))
    return gen_map_of(map_name)


@ex.main
def my_main(_run, _config, _log) -> None:
    config = plain_copy(_config)
    random.seed(config["seed"])
    np.random.seed(config["seed"])
    th.manual_seed(config["seed"])
    config["local_results_path"] = results_path(config["local_results_path"])
    if config["run"] not in run_REGISTRY:
        raise ValueError(f"unknown run '{config['run']}'; known: {', '.join(sorted(run_REGISTRY))}")
    try:
        run_REGISTRY[config["run"]](_run, config, _log)
    except ValueError as error:
        raise InputError(str(error)) from error
    except (FloatingPointError, EnvWorkerError, checkpoint.CheckpointWriteError) as error:
        raise RunFailed(str(error)) from error
    finally:
        keep_last_output(_run)


def keep_last_output(sacred_run) -> None:
    """Read the run's console output since sacred's last heartbeat into its record now. Sacred reads it
    once more only when a run completes: a stopped or failed run's cout.txt would otherwise end at the
    last heartbeat (every 10 s) and lack its last lines, such as "SIGINT received: stopping at t_env N".
    (sacred 0.8.7's Run._get_captured_output: the capture is closed by the time it reports the stop.)"""
    sacred_run._get_captured_output()


def check_settings(config: dict) -> None:
    """Reject settings outside their range or that cannot work together with one InputError line,
    before the run starts."""
    problem = range_error(config)
    if problem:
        raise InputError(problem)
    if config["batch_size"] > config["buffer_size"]:
        raise InputError(f"batch_size={config['batch_size']} is larger than buffer_size={config['buffer_size']}: "
                         f"training batches are drawn from the episodes in the buffer; raise buffer_size or "
                         f"lower batch_size")
    if config["learner_threads"] < 0 or (config["learner_threads"] and config["tune_learner_threads"]):
        raise InputError(f"learner_threads={config['learner_threads']} must be 0 (torch's count, or tuned with "
                         f"tune_learner_threads=True) or a thread count")
    if not config["common_reward"] and config["env"] != "gymma":
        raise InputError(f"common_reward=False (a reward per agent) needs a gymma task: {config['env']} gives one "
                         f"team reward")
    if not config["common_reward"] and config["learner"] not in PER_AGENT_REWARD_LEARNERS:
        raise InputError(f"common_reward=False (a reward per agent): {config['learner']} trains on one team reward; "
                         f"the learners that take per-agent rewards: {', '.join(PER_AGENT_REWARD_LEARNERS)} "
                         f"(ia2c, maa2c, mappo, ippo_epymarl, iql_epymarl, maddpg, pac and their _ns configs)")
    if not config["common_reward"] and config["learner"] == "epymarl_q_learner" and config["mixer"] is not None:
        raise InputError(f"common_reward=False (a reward per agent): the {config['mixer']} mixer learns one team "
                         f"value from one team reward; use an independent learner (iql_epymarl, iql_ns)")
    if config["reward_scalarisation"] not in REWARD_SCALARISATIONS:
        raise InputError(f"reward_scalarisation={config['reward_scalarisation']!r}; choose one of: "
                         f"{', '.join(REWARD_SCALARISATIONS)}")
    if not config["use_rnn"] and config["agent"] not in ("rnn", "rnn_ns"):
        raise InputError(f"use_rnn=False makes the rnn (or rnn_ns) agent feed-forward; agent {config['agent']} "
                         f"has no such setting")
    if config.get("resume") and not config["checkpoint_path"]:
        raise InputError("resume=True needs checkpoint_path=<local_results_path>/models/<unique_token>")
    if config["absolute_metric"] and not (config["evaluate"] and config["checkpoint_path"]):
        raise InputError("absolute_metric=True re-tests the best checkpoint of a run: give it with evaluate=True "
                         "checkpoint_path=<local_results_path>/models/<unique_token>")
    if config["absolute_metric"] and config["load_step"]:
        raise InputError("absolute_metric=True picks the checkpoint itself (the best by the run's logged tests): "
                         "leave load_step at 0")
    if config["absolute_metric"] and config["save_replay"]:
        raise InputError("absolute_metric=True plays 10 x test_nepisode episodes: record replays with a plain "
                         "evaluate=True save_replay=True run of the checkpoint it picks (load_step)")
    if config.get("resume") and config["evaluate"]:
        raise InputError("resume=True continues training; to evaluate a checkpoint give only checkpoint_path "
                         "with evaluate=True")


def plain_copy(value):
    """Deep copy of sacred's (read-only) config containers as plain dicts and lists."""
    if isinstance(value, collections.abc.Mapping):
        return {key: plain_copy(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain_copy(item) for item in value]
    return value


def results_path(local_results_path: str) -> str:
    return join(REPO_DIR, local_results_path) if not os.path.isabs(local_results_path) else local_results_path


def recursive_dict_update(base: dict, update: dict) -> dict:
    """Merge `update` into `base` (in place): nested mappings are merged key by key, other values replaced."""
    for key, value in update.items():
        if isinstance(value, collections.abc.Mapping) and isinstance(base.get(key), collections.abc.Mapping):
            base[key] = recursive_dict_update(base[key], value)
        else:
            base[key] = value
    return base


def pop_option(params: list, option: str):
    """Remove `--option=value` or `--option value` from params and return value (None when absent)."""
    for i, token in enumerate(params):
        if token.startswith(option + "="):
            del params[i]
            return token[len(option) + 1:]
        if token == option:
            if i + 1 >= len(params) or params[i + 1].startswith("-"):
                raise UsageError(f"{option} needs a value, e.g. {option}=NAME")
            value = params[i + 1]
            del params[i:i + 2]
            return value
    return None


def available_configs(subfolder: str) -> list:
    folder = join(CONFIG_DIR, subfolder)
    return sorted(name[:-len(".yaml")] for name in os.listdir(folder) if name.endswith(".yaml"))


def load_yaml(path: str) -> dict:
    try:
        return read_config_file(path)
    except ValueError as error:
        raise UsageError(str(error)) from None


def load_named_config(params: list, option: str, subfolder: str) -> tuple:
    """(name, config dict) of the config file chosen with `option` (e.g. --config=qmix -> algs/qmix.yaml)."""
    names = available_configs(subfolder)
    name = pop_option(params, option)
    if name is None:
        raise UsageError(f"missing {option}=NAME; available: {', '.join(names)}")
    if name not in names:
        raise UsageError(f"unknown {option} '{name}'; available: {', '.join(names)}")
    return name, load_yaml(join(CONFIG_DIR, subfolder, f"{name}.yaml"))


def build_config(params: list) -> dict:
    """default.yaml < envs/ENV.yaml (< for env sc2v2, the scenario's smacv2_configs/MAP.yaml, MAP the
    env_args.map_name of the command line or of ENV.yaml) < algs/ALG.yaml; consumes --config and
    --env-config from params. Each file is checked like the command line (known keys, kinds;
    normalise_file), so a float key stays a float when a later file writes an integer
    (qmix_large.yaml's `weight_decay: 0`)."""
    alg_name, alg_config = load_named_config(params, "--config", "algs")
    env_name, env_config = load_named_config(params, "--env-config", "envs")
    config = load_yaml(join(CONFIG_DIR, "default.yaml"))
    env = env_config.get("env", config["env"])
    kinds, nested = env_kinds(env, {}), env_nested_keys(env)
    alg_config = without_foreign_env_args(alg_config, kinds)
    layers = [(env_config, f"src/config/envs/{env_name}.yaml")]
    if env == "sc2v2":
        layers.append(scenario_layer(env_config, params))
    layers.append((alg_config, f"src/config/algs/{alg_name}.yaml"))
    for layer, path in layers:
        recursive_dict_update(config, normalise_file(layer, config, kinds, path, nested))
    config.setdefault("name", alg_name)
    return config


def scenario_layer(env_config: dict, params: list) -> tuple[dict, str]:
    """(config layer, its path) of the SMACv2 scenario named by env_args.map_name on the command line,
    else in the env config; UsageError listing the scenarios for any other name."""
    map_name = command_line_updates(params).get("env_args", {}).get(
        "map_name", env_config.get("env_args", {}).get("map_name"))
    try:
        path = scenario_config_path(map_name, CONFIG_DIR)
    except ValueError as error:
        raise UsageError(str(error)) from None
    return load_yaml(path), f"src/config/envs/smacv2_configs/{map_name}.yaml"


def without_foreign_env_args(alg_config: dict, kinds: dict | None) -> dict:
    """An algorithm file's env_args without those the chosen env does not take (`kinds`: the env's
    arguments; None = any): coma.yaml and vmix.yaml set SMAC's state_last_action, which PyMARL2's
    other envs ignore as they take any keyword."""
    env_args = alg_config.get("env_args") if isinstance(alg_config, dict) else None
    if kinds is None or not isinstance(env_args, dict):
        return alg_config
    return {**alg_config, "env_args": {key: value for key, value in env_args.items() if key in kinds}}


def command_line_updates(params: list) -> dict:
    """The `with key=value ...` overrides, parsed the way sacred will parse them."""
    if "with" not in params:
        return {}
    updates, _ = get_config_updates([token for token in params[params.index("with") + 1:] if "=" in token])
    return updates


def checked_params(params: list, config: dict) -> list:
    """params with the `with` overrides checked against `config` and normalised (normalise_overrides);
    UsageError for an unknown key or a value of the wrong kind."""
    if "with" not in params:
        return params
    start = params.index("with") + 1
    if "=" in "".join(params[start:start + 1]):  # the env may be chosen on the command line
        env_name = command_line_updates(params).get("env", config["env"])
    else:
        env_name = config["env"]
    return params[:start] + normalise_overrides(params[start:], config, env_kinds(env_name, config.get("env_args", {})),
                                                env_nested_keys(env_name))


def env_kinds(env_name: str, env_args: dict) -> dict | None:
    """{env_args key: kind} for the env: its constructor's arguments (env_arg_kinds) and the keys its
    config already sets; None when the constructor takes any keyword."""
    kinds = env_arg_kinds(env_factory(env_name))
    return None if kinds is None else {**{key: None for key in env_args}, **kinds}


def env_nested_keys(env_name: str) -> dict:
    """{dotted path pattern (fnmatch) of a mapping inside env_args: the keys the env reads there} for
    the env's mapping arguments, so that the command line may add such a key (normalise_overrides):
    SMACv2's capability_config and its distributions' settings."""
    if env_name in SMACV2_ENVS:
        return {"env_args.capability_config": CAPABILITY_KEYS, "env_args.capability_config.*": DISTRIBUTION_CONFIG_KEYS}
    return {}


def env_factory(env_name: str):
    """The constructor whose signature declares the env's arguments: the SMAC and SMACv2 simulators'
    for sc2, sc2wrapped and sc2v2, whose registry entries are lazy factories (SMACv2's capability
    wrapper passes every keyword argument on to StarCraft2EnvV2)."""
    if env_name == "sc2":
        from envs.starcraft.interface.starcraft2 import StarCraft2Env
        return StarCraft2Env
    if env_name in SMACV2_ENVS:
        from envs.starcraft.interface.starcraft2_v2 import StarCraft2EnvV2
        return StarCraft2EnvV2
    return env_REGISTRY.get(env_name)


def new_entries(updates: dict, config: dict) -> dict:
    """The entries of `updates` (nested) under keys that `config` lacks."""
    new = {}
    for key, value in updates.items():
        if key not in config:
            new[key] = value
        elif isinstance(value, collections.abc.Mapping) and isinstance(config[key], collections.abc.Mapping):
            nested = new_entries(value, config[key])
            if nested:
                new[key] = nested
    return new


def check_writable(folder: str) -> None:
    """Say in one line why `folder` (a run's sacred folder) cannot be written, before the run starts. It is
    not made here (sacred makes it when the run starts, so that a run refused before then leaves no empty
    folder): its deepest existing parent is tried instead."""
    parent = os.path.abspath(folder)
    while not os.path.exists(parent):
        parent = os.path.dirname(parent)
    try:
        if not os.path.isdir(parent):
            raise NotADirectoryError(f"{parent} is a file")
        with tempfile.TemporaryFile(dir=parent):
            pass
    except OSError as error:
        raise UsageError(f"cannot write results to {folder} ({error.strerror or error}): choose another "
                         f"local_results_path") from None


def observer_dir(config: dict, updates: dict) -> str:
    """<local_results_path>/sacred/<map name, gymma's env id, or the env name>/<name>, honouring `with` overrides;
    evaluation runs go to its eval/ sub-folder, so that they never sit among the training runs."""
    effective = recursive_dict_update(copy.deepcopy(config), updates)
    env_args = effective.get("env_args", {})
    # gymma's key "package:EnvId" names the task: its id is the folder
    group = env_args.get("map_name") or str(env_args.get("key") or "").split(":")[-1] or effective["env"]
    folder = join(results_path(effective["local_results_path"]), "sacred", str(group), str(effective["name"]))
    return join(folder, "eval") if run_kind(effective) == "evaluate" else folder


USAGE = """usage: {prog} --config=ALG --env-config=ENV [sacred options] [with KEY=VALUE ...]

Trains (or, with evaluate=True, evaluates) the algorithm src/config/algs/ALG.yaml on the
environment src/config/envs/ENV.yaml. Settings merge as in PyMARL2: src/config/default.yaml <
the env's YAML < the algorithm's YAML < `with KEY=VALUE` (nested keys dotted: env_args.map_name=3m).

  ALG: {algs}
  ENV: {envs}

example: {prog} --config=qmix --env-config=sc2 with env_args.map_name=3m t_max=400000
Every key, its default and its meaning are in those YAML files; the README explains the results
layout, resuming (resume=True), sweeps and plots. Sacred's own options (--debug, -p, ...) come
before `with`: python src/main.py --config=qmix --env-config=sc2 print_config shows the merged config."""


def main(argv: list) -> int:
    params = list(argv)
    prog = os.path.basename(argv[0])
    if any(token in ("-h", "--help") for token in params[1:params.index("with") if "with" in params else None]):
        print(USAGE.format(prog=prog, algs=", ".join(available_configs("algs")),
                           envs=", ".join(available_configs("envs"))))
        return 0
    try:
        config = build_config(params)
        params = checked_params(params, config)
        updates = command_line_updates(params)
        seeds = batch_seeds(config, updates)
        file_obs_path = observer_dir(config, updates)
        check_writable(file_obs_path)
        command = sacred_command(params)
    except UsageError as error:
        print(f"{prog}: error: {error}", file=sys.stderr)
        return USAGE_EXIT_CODE
    COMMAND_LINE_KEYS.update(flatten(updates))
    # Sacred refuses a `with` key its config lacks; the checks above allowed it (an env argument the
    # env config leaves out, a capability SMACv2's config leaves commented out), so declare it.
    ex.add_config(recursive_dict_update(config, new_entries(updates, config)))
    logger.info(f"Saving to FileStorageObserver in {file_obs_path}.")
    with CommandSignals():
        if seeds is not None:
            return run_seed_batch(command, seeds, config, prog)
        return run_single(command, file_obs_path, prog)


def run_single(command: "SacredCommand", folder: str, prog: str) -> int:
    """The sacred run of `command`, recorded in `folder`; its exit status (0, a stop signal's, or that of
    the error it says in one line)."""
    ex.observers.append(FileStorageObserver(folder))
    try:
        ex.run(command.name, command.updates, command.named_configs, {}, {}, command.options)
    except KeyboardInterrupt as interrupt:
        # The training loop saved a final checkpoint (save_model=True) and closed the env workers.
        return interrupted_exit_code(interrupt, prog)
    except SacredError as error:
        if command.options.get("--debug") or command.options.get("--pdb"):
            raise  # sacred's --debug: the traceback
        return error_exit_code(error, prog)
    return 0


class SacredCommand(NamedTuple):
    """Sacred's command line: the command (main), `with` updates, named configs and sacred's options."""
    name: str
    updates: dict
    named_configs: list
    options: dict


def sacred_command(params: list) -> SacredCommand:
    """Sacred's command line in `params`, read as Experiment.run_commandline reads it (which main.py does
    not call, so that it can say a run's errors in its own style); UsageError for a command sacred does
    not know."""
    _short_usage, _usage, internal_usage = ex.get_usage()
    options = docopt(internal_usage, [str(token) for token in params[1:]], default_help=False)
    command = options.get("COMMAND") or ex.default_command
    problem = ex._check_command(command)
    if problem:
        raise UsageError(problem.removeprefix("Error: "))
    updates, named_configs = get_config_updates(options["UPDATE"])
    return SacredCommand(command, updates, named_configs, options)


def error_exit_code(error: SacredError, prog: str, label: str = "") -> int:
    """Say in one line, in the command line's style, why the run stopped; the exit status: 2 for bad
    input (InputError: settings, files, checkpoints), 1 for a run that failed (RunFailed and others)."""
    print(f"{prog}: {label}error: {error}", file=sys.stderr)
    return USAGE_EXIT_CODE if isinstance(error, InputError) else 1


def interrupted_exit_code(interrupt: KeyboardInterrupt, prog: str, label: str = "") -> int:
    """Say which signal stopped the run and return the shell's status for it (128 + its number)."""
    signal_name = getattr(interrupt, "signal_name", "SIGINT")
    print(f"{prog}: {label}interrupted by {signal_name}", file=sys.stderr)
    return 128 + signal.Signals[signal_name].value


def batch_seeds(config: dict, updates: dict) -> dict[int, str | None] | None:
    """{seed: the models folder it resumes, or None} of a seed batch (`seeds` of the merged config and
    command line), or None for one run; UsageError for a value or setting a batch cannot run
    (run/seed_batch.py's check_seeds), or runs of a batch to resume that are not found."""
    merged = recursive_dict_update(copy.deepcopy(config), copy.deepcopy(updates))
    try:
        seeds = check_seeds(merged)
        if seeds is None or not merged.get("resume"):
            return None if seeds is None else dict.fromkeys(seeds)
        if not merged["checkpoint_path"]:
            raise ValueError("seeds with resume=True needs checkpoint_path=<local_results_path>/models/<unique_token> "
                             "of any one run of the batch")
        return batch_checkpoints(merged["checkpoint_path"], seeds)
    except ValueError as error:
        raise UsageError(str(error)) from None


class SeedBatch(NamedTuple):
    """What each run of a seed batch is started with: sacred's command line, the merged config files
    (`config`), the runs' name (`{seed}` in it becomes each run's seed), each seed's models folder to
    resume (or None) and the program's name for messages."""
    command: SacredCommand
    config: dict
    name: str
    checkpoints: dict
    prog: str


def run_seed_batch(command: SacredCommand, seeds: dict[int, str | None], config: dict, prog: str) -> int:
    """Run one sacred run per seed side by side in this process (run/seed_batch.py), each recorded as
    the run `seed=N` would be, plus its place in the batch (config key seed_batch). `seeds` maps each
    seed to the models folder it resumes (resume=True), else None; `config`: the merged config files,
    before the command line's updates. The runs start one after the other (run/seed_batch.py's
    run_lanes); the exit status is batch_outcome's."""
    batch = SeedBatch(command, config, str(command.updates.get("name", config["name"])), seeds, prog)
    logger.info(f"{len(seeds)} runs side by side in this process, seeds {', '.join(map(str, seeds))}")
    with StopSignals() as stop:  # the runs' threads see the signals this thread receives (utils/stop.py)
        lanes = run_lanes(list(seeds), functools.partial(run_one_seed, batch))
        stopped_by = stop.received
    problem, status = batch_outcome(lanes, stopped_by)
    if problem:
        print(f"{prog}: {problem}", file=sys.stderr)
    return status


def run_one_seed(batch: SeedBatch, seed: int) -> int:
    """One run of a seed batch, on its lane: a sacred run with an observer of its own (an observer
    records one run at a time); returns its exit status, having said in one line why it is not 0."""
    label = f"seed {seed}"
    set_thread_label(f"{label} | ")
    command = batch.command
    updates = recursive_dict_update(copy.deepcopy(command.updates), lane_updates(seed, batch.checkpoints[seed]))
    if "{seed}" in batch.name:
        updates["name"] = batch.name.replace("{seed}", str(seed))
    try:
        run = ex._create_run(command.name, updates, command.named_configs, {}, {}, command.options)
        run.observers = [FileStorageObserver(observer_dir(batch.config, updates))]
        run()
    except KeyboardInterrupt as interrupt:
        return interrupted_exit_code(interrupt, batch.prog, f"{label}: ")
    except SacredError as error:
        return error_exit_code(error, batch.prog, f"{label}: ")
    except Exception:
        print(f"{batch.prog}: {label} failed:\n{traceback.format_exc()}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    exit_status = main(sys.argv)
    ignore_stop_signals()  # a late signal must not change the exit status (utils/stop.py)
    sys.exit(exit_status)
