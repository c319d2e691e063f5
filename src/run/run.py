"""One experiment: build runner, buffer, controller and learner from the config, then train or evaluate.

Life of a batch while training (shapes for SMAC corridor: 6 agents, 30 actions, obs 156, state 282,
episode_limit 400):
  runner.run()                  -> dense EpisodeBatch of batch_size_run episodes, every field
                                   [batch_size_run, episode_limit + 1, ...], e.g. obs [8, 401, 6, 156]
                                   float32, actions [8, 401, 6, 1] uint8, avail_actions [8, 401, 6, 30]
                                   bool, "filled" [8, 401, 1] bool (True for the L + 1 steps of an
                                   episode of L env steps: its steps and the final state row)
  buffer.insert_episode_batch() -> each episode copied into a ring slot at its own length:
                                   obs [L + 1, 6, 156], ... (5064 bytes per step on corridor);
                                   the dense batch is then freed
  buffer.sample(batch_size)     -> (once batch_size episodes are stored) a dense EpisodeBatch padded
                                   to the longest drawn episode: obs [batch_size, max L + 1, 6, 156]
  .to(args.device)              -> learner.train(), which casts the compact fields at use
"""
import contextlib
import datetime
import os
import pprint
import secrets
import time
from types import SimpleNamespace
from typing import NamedTuple

import numpy as np
import psutil
import torch as th

from components.episode_buffer import EpisodeBatch, PrioritizedReplayBuffer, ReplayBuffer, StorageBytes
from controllers import REGISTRY as mac_REGISTRY
from envs import STARCRAFT_ENVS
from envs.starcraft.interface.backend import builtin_sources_digest
from learners import REGISTRY as le_REGISTRY
from run import checkpoint
from run.checkpoint import checkpoint_step  # noqa: F401  (importable from here, as before checkpoint.py)
from run.seed_batch import released, runs_to_come
from runners import REGISTRY as r_REGISTRY
from utils.allocator import keep_freed_memory
from utils.logging import Logger
from utils.run_index import TEST_METRICS, rounded_test_nepisode, test_metric
from utils.stop import StoppedWaiting, StopSignals
from utils.threads import ThreadTuner
from utils.timehelper import time_left, time_str

MEMORY_HEADROOM_BYTES = 1 << 30  # left free for everything but the replay buffer
MIN_STORED_STEPS = 2  # an episode of one env step keeps that step and the final state row
PER_PRIORITY_FLOOR = 1e-6  # added to every new priority (PyMARL2's per_run), so that none is 0


def run(_run, _config: dict, _log) -> None:
    """Sacred entry point (REGISTRY["default"]); `_config` is a plain, mutable copy of the merged config."""
    args = SimpleNamespace(**args_sanity_check(_config, _log))
    args.device = "cuda" if args.use_cuda else "cpu"
    resume = select_resume_checkpoint(args, _log) if args.resume else None
    if resume is not None:
        args.env_seed_generation = resume.state["runner"]["seed_generation"] + 1
    if args.env in STARCRAFT_ENVS:
        simulator = simulator_of(args)
        sources = f", sources sha256 {simulator}" if simulator else ""
        _log.info(f"SMAC engine: {args.env_args['backend']}{sources} (env_args.backend; auto picks StarCraft II "
                  f"when it is installed under SC2PATH, else the built-in simulator)")

    _log.info("Experiment Parameters:")
    _log.info("\n\n" + pprint.pformat(_config, indent=4, width=1) + "\n")

    logger = Logger(_log)
    if args.use_tensorboard:
        # On resume, events the interrupted run logged after its checkpoint are hidden (purged).
        logger.setup_tb(os.path.join(args.local_results_path, "tb_logs", args.unique_token),
                        purge_step=None if resume is None else resume.step + 1)
    logger.setup_sacred(_run)
    try:
        run_sequential(args=args, logger=logger, resume=resume)
    finally:
        logger.close()
    _log.info("Exiting script")


def simulator_of(args: SimpleNamespace) -> str | None:
    """The built-in SMAC simulator's source digest when the run plays on it, else None."""
    if args.env in STARCRAFT_ENVS and args.env_args.get("backend") == "builtin":
        return builtin_sources_digest()
    return None


def check_same_simulator(folder: str, saved: str | None, current: str | None, allow_change: bool, _log) -> None:
    """Refuse to resume a checkpoint trained on other built-in simulator code (`saved`, the
    digest it recorded, against `current`): its curves would mix two simulators' battles, unless
    allow_simulator_change=True (`allow_change`) says to go on."""
    if saved == current:
        return
    if saved is None or current is None:
        _log.warning(f"the checkpoint records no built-in simulator version (saved by an older marlkit, or not "
                     f"on the built-in simulator); this run plays on {current or 'another engine'}")
        return
    if not allow_change:
        raise checkpoint.CheckpointError(
            f"checkpoint {folder} was trained on the built-in simulator with sources sha256 {saved}, this code's "
            f"is {current}: its battles may differ and the curves would mix both; resume with the code "
            f"it was trained with (its git commit is in the run's sacred run.json), or give "
            f"allow_simulator_change=True to go on anyway")
    _log.warning(f"allow_simulator_change=True: going on with simulator sources {current}; the checkpoint "
                 f"was trained on {saved} (the curves from here on are the new simulator's)")


class ResumePoint(SimpleNamespace):
    """The checkpoint a run resumes from: folder, step (its t_env) and state (training_state.pt)."""


def checkpoint_token(checkpoint_path: str) -> str:
    """The unique_token of the run whose models folder is checkpoint_path (the folder's name)."""
    return os.path.basename(os.path.normpath(checkpoint_path))


def is_new_branch(args: SimpleNamespace) -> bool:
    """Whether a resumed run saves under a token of its own (load_step picked an older checkpoint)."""
    return checkpoint_token(args.checkpoint_path) != args.unique_token


def select_resume_checkpoint(args: SimpleNamespace, _log) -> ResumePoint:
    """The complete checkpoint under args.checkpoint_path to resume from (see checkpoint.select)."""
    folder, step, state = checkpoint.select(args.checkpoint_path, args.load_step, need_state=True, log=_log)
    _log.info(f"Resuming from {folder} (t_env {step}, episode {state['episode']})")
    check_same_simulator(folder, state.get("simulator"), simulator_of(args), args.allow_simulator_change, _log)
    for stale in checkpoint.remove_stale_temporaries(args.checkpoint_path):
        _log.warning(f"removed {stale}, a checkpoint that a process which died while saving left unfinished")
    if is_new_branch(args):
        _log.warning(f"load_step={args.load_step} picks a checkpoint older than the newest in {args.checkpoint_path}: "
                     f"the resumed run is a new branch, saved under models/{args.unique_token}")
    saved = state.get("train_precision")
    if saved is None:
        _log.warning(f"the checkpoint does not record its training precision (saved by an older marlkit, whose "
                     f"default on CPUs with bfloat16 was bfloat16); training goes on in {args.train_precision}")
    elif saved != args.train_precision:
        _log.warning(f"training goes on in {args.train_precision} as the command line says; the checkpoint was "
                     f"trained in {saved}")
    else:
        _log.info(f"training goes on in {saved}, the precision the checkpoint was trained in")
    return ResumePoint(folder=folder, step=step, state=state)


def unique_token(config: dict) -> str:
    """The name of the run's tb_logs/ and models/ folders: `<name>[_<engine>][_bfloat16]__<date>_<6 hex>`.
    The SMAC engine and a precision other than float32 are part of it so that such runs are never
    mixed up by name; the random suffix keeps two runs started in the same second apart. A resumed
    run keeps the token of the run it continues (its checkpoint folder's name), unless load_step
    picks an older checkpoint than the newest: it then starts a new branch with a token of its own,
    so that two timelines never share one folder."""
    if config.get("resume") and not checkpoint.is_older_step(config["checkpoint_path"], config["load_step"]):
        return checkpoint_token(config["checkpoint_path"])
    label = config["name"]
    if config["env"] in STARCRAFT_ENVS:
        label += f"_{config['env_args']['backend']}"
    if config["train_precision"] != "float32":
        label += f"_{config['train_precision']}"
    return f"{label}__{datetime.datetime.now().strftime('%Y-%m-%d_%H-%M-%S')}_{secrets.token_hex(3)}"


def args_sanity_check(config: dict, _log) -> dict:
    """Fall back to the CPU without CUDA; round test_nepisode to whole parallel runs (at least one)."""
    if config["use_cuda"] and not th.cuda.is_available():
        config["use_cuda"] = False
        _log.warning("CUDA flag use_cuda was switched OFF automatically because no CUDA devices are available!")
    config["test_nepisode"] = rounded_test_nepisode(config["test_nepisode"], config["batch_size_run"])
    return config


def _lookup(registry: dict, name: str, what: str):
    if name not in registry:
        raise ValueError(f"unknown {what} '{name}'; known: {', '.join(sorted(registry))}")
    return registry[name]


def run_sequential(args: SimpleNamespace, logger: Logger, resume: ResumePoint | None = None) -> None:
    """Train for t_max env steps, or only evaluate when args.evaluate / args.save_replay is set."""
    keep_freed_memory()  # the training step's large temporaries are reused, not page-faulted in every step
    runner = _lookup(r_REGISTRY, args.runner, "runner")(args=args, logger=logger)
    try:
        buffer, learner = setup_learning(args, runner, logger)
        loop = LOOPS[args.run](args, runner, buffer, learner, logger)
        if args.absolute_metric:
            evaluate_absolute_metric(args, learner, runner, logger)
            return
        if resume is not None:
            loop.resume(resume)
        elif args.checkpoint_path:
            load_checkpoint(args, learner, runner, logger)
        elif args.evaluate or args.save_replay:
            logger.console_logger.warning("evaluating freshly initialised models: no checkpoint_path given")
        if args.evaluate or args.save_replay:
            evaluate_sequential(args, runner, logger)
        else:
            loop.run()
    finally:
        runner.close_env()


def smallest_int_dtype(n_values: int) -> th.dtype:
    """The smallest torch integer dtype that holds 0 .. n_values - 1 (uint8 for every SMAC map)."""
    for dtype in (th.uint8, th.int16, th.int32):
        if n_values - 1 <= th.iinfo(dtype).max:
            return dtype
    return th.int64


def build_scheme(env_info: dict, save_probs: bool = False, common_reward: bool = True) -> tuple:
    """Fields stored per step (scheme), the agent group and the preprocess applied on write.

    The dtypes are compact, as the buffer holds millions of steps: learners and controllers cast
    actions, avail_actions and terminated at use and build the one-hot actions there, so the
    preprocess is empty; it is returned for the runner and buffer, which take one. With save_probs
    (IPPO) the probabilities each action was sampled from are stored too (float32, per agent).
    """
    scheme = {
        "state": {"vshape": env_info["state_shape"]},
        "obs": {"vshape": env_info["obs_shape"], "group": "agents"},
        "actions": {"vshape": (1,), "group": "agents", "dtype": smallest_int_dtype(env_info["n_actions"])},
        "avail_actions": {"vshape": (env_info["n_actions"],), "group": "agents", "dtype": th.bool},
        "reward": {"vshape": (1,) if common_reward else (env_info["n_agents"],)},  # the team's, or each agent's
        "terminated": {"vshape": (1,), "dtype": th.bool},
    }
    if save_probs:
        scheme["probs"] = {"vshape": (env_info["n_actions"],), "group": "agents"}
    groups = {"agents": env_info["n_agents"]}
    return scheme, groups, {}


def setup_learning(args: SimpleNamespace, runner, logger: Logger) -> tuple:
    """Copy the env's sizes into args and build (buffer, learner); the runner gets the scheme and controller."""
    env_info = runner.get_env_info()
    for key in ("n_agents", "n_actions", "state_shape", "obs_shape", "episode_limit"):
        setattr(args, key, env_info[key])
    if args.agent_own_state_size is True:
        args.agent_own_state_size = agent_own_state_size(env_info, logger)
    scheme, groups, preprocess = build_scheme(env_info, args.save_probs, args.common_reward)
    buffer_device = "cpu" if args.buffer_cpu_only else args.device
    # One extra step holds the final state and the action chosen in it.
    max_seq_length = env_info["episode_limit"] + 1
    check_buffer_memory(args.buffer_size, ReplayBuffer.storage_bytes(scheme, groups, preprocess), max_seq_length,
                        buffer_device, logger, copies=runs_to_come(vars(args)))
    if args.use_per:
        buffer = PrioritizedReplayBuffer(scheme, groups, args.buffer_size, max_seq_length, args.per_alpha,
                                         args.per_beta, args.t_max, preprocess=preprocess, device=buffer_device)
    else:
        buffer = ReplayBuffer(scheme, groups, args.buffer_size, max_seq_length, preprocess=preprocess,
                              device=buffer_device)
    mac = _lookup(mac_REGISTRY, args.mac, "mac")(buffer.scheme, groups, args)
    runner.setup(scheme=scheme, groups=groups, preprocess=preprocess, mac=mac)
    learner = _lookup(le_REGISTRY, args.learner, "learner")(mac, buffer.scheme, logger, args)
    if args.use_cuda:
        learner.cuda()
    return buffer, learner


def agent_own_state_size(env_info: dict, logger: Logger) -> int:
    """Each agent's part of the state, which Qatten's keys read (``agent_own_state_size: True``): the
    env's ally state features (SMAC: health, cooldown or energy, relative x and y, shield, unit type
    bits; PyMARL2 computes 4 + shield bits + unit type bits from the map), or, where the env does not
    list them, the state split evenly among the agents."""
    if "agent_features" in env_info:
        return len(env_info["agent_features"])
    size = int(np.prod(env_info["state_shape"])) // env_info["n_agents"]
    logger.console_logger.info(f"agent_own_state_size: the env does not list its agents' state features; "
                               f"each agent's part is taken as state size / n_agents = {size}")
    return size


def available_memory(device: str) -> int:
    """Free bytes on `device`: available host memory, or the GPU's free memory."""
    if device.startswith("cuda"):
        return th.cuda.mem_get_info()[0]
    return psutil.virtual_memory().available


def check_buffer_memory(buffer_size: int, sizes: StorageBytes, max_seq_length: int, device: str,
                        logger: Logger, copies: int = 1) -> None:
    """Log the replay buffer's bytes per step and its size if every episode lasted max_seq_length - 1
    env steps; warn when that worst case would not fit in memory, and stop at once (ValueError)
    when even episodes of one step would not. `copies`: the replay buffers of this size still to be
    filled in the process (a seed batch's runs from this one on).

    Episodes are stored at their own length, so the real size lies between the two.
    """
    available = available_memory(device)
    free = available - MEMORY_HEADROOM_BYTES
    worst = sizes.for_episodes(buffer_size, max_seq_length) * copies
    least = sizes.for_episodes(buffer_size, MIN_STORED_STEPS) * copies
    of_seeds = f" for {copies} seeds in one process" if copies > 1 else ""
    logger.console_logger.info(f"Replay buffer: {buffer_size} episodes, {sizes.step} bytes per stored step, at most "
                               f"{worst / 1e9:.2f} GB{of_seeds} on {device} ({available / 1e9:.2f} GB available)")
    if least > free:
        fix = "run fewer seeds at once (seeds=[...]) or lower buffer_size" if copies > 1 else "lower buffer_size"
        raise ValueError(f"the replay buffer needs at least {least} bytes ({least / 1e9:.2f} GB){of_seeds} for "
                         f"buffer_size={buffer_size} but only {available / 1e9:.2f} GB of memory is available on "
                         f"{device} (1 GB is kept free); {fix}")
    if worst > free:
        fitting_steps = (free // (buffer_size * copies) - sizes.episode) // sizes.step - 1
        logger.console_logger.warning(f"the replay buffer may outgrow the memory: {worst / 1e9:.2f} GB if every "
                                      f"episode reaches episode_limit={max_seq_length - 1}; {buffer_size} episodes "
                                      f"fit on {device} while they average at most {fitting_steps} steps")


def load_checkpoint(args: SimpleNamespace, learner, runner, logger: Logger) -> None:
    """PyMARL2's loading: the networks and optimiser of a checkpoint; training (if any) goes on from its t_env."""
    model_path, step, _ = checkpoint.select(args.checkpoint_path, args.load_step, need_state=False,
                                            log=logger.console_logger)
    logger.console_logger.info(f"Loading model from {model_path}")
    with checkpoint_mismatch(model_path):
        learner.load_models(model_path)
    runner.t_env = step


@contextlib.contextmanager
def checkpoint_mismatch(folder: str):
    """Turn a saved state that does not fit this config's networks into one CheckpointError line."""
    try:
        yield
    except (RuntimeError, KeyError) as error:
        reason = " ".join(str(error).split())[:300]
        raise checkpoint.CheckpointError(f"checkpoint {folder} does not fit this run's config (network sizes, "
                                         f"env or mixer differ): {reason}") from None


def run_tests(args: SimpleNamespace, runner, rounds: int = 1) -> None:
    """Greedy test episodes (test_nepisode in all, `rounds` times as many for the absolute metric); the
    runner logs test_* stats after the last one."""
    for _ in range(rounds * max(1, args.test_nepisode // runner.batch_size)):
        runner.run(test_mode=True)


# The absolute metric: the best checkpoint re-tested on this many times test_nepisode episodes (Gorsane et al.,
# "Towards a Standardised Performance Evaluation Protocol for Cooperative MARL", 2022).
ABSOLUTE_ROUNDS = 10


class BestCheckpoint(NamedTuple):
    """The checkpoint the absolute metric re-tests, and the logged test that picked it."""
    t_env: int
    metric: str
    value: float
    tested_at: int  # t_env of that test: the checkpoint's own, or the last one before it
    unique_token: str
    ties: int  # checkpoints scored as high (the earliest is taken)


def best_checkpoint(checkpoint_path: str) -> BestCheckpoint:
    """The checkpoint under checkpoint_path whose test, as the run logged it, scored highest (the earliest of
    equals). A checkpoint's test is the one the run logged at its t_env, else the last one before it: the
    loop tests and saves each when its own interval has passed, so their t_env drift apart unless
    save_model_interval equals test_interval, and a checkpoint may be scored by a test of older weights
    (tested_at says which). The curve and the run's token are read from the newest checkpoint's training
    state (the token: the folder's name for checkpoints from before it was recorded)."""
    state = checkpoint.saved_state(checkpoint_path, 0)
    if state is None or "sacred_info" not in state:
        raise checkpoint.CheckpointError(f"the newest checkpoint in {checkpoint_path} keeps no training state with "
                                         f"the run's logged tests: the absolute metric cannot pick its best one")
    info = state["sacred_info"]
    metric = test_metric(info)
    if metric is None:
        raise checkpoint.CheckpointError(f"the run of {checkpoint_path} logged no test ({', '.join(TEST_METRICS)})")
    tested = list(zip(info[f"{metric}_T"], info[metric]))
    scored = []
    for step in checkpoint.saved_steps(checkpoint_path):
        before = [(t, value) for t, value in tested if t <= step]
        if before:
            tested_at, value = before[-1]
            scored.append((value, -step, tested_at))
    if not scored:
        raise checkpoint.CheckpointError(f"no checkpoint in {checkpoint_path} was saved after a test")
    value, negative_step, tested_at = max(scored)
    token = state.get("unique_token") or checkpoint_token(checkpoint_path)
    ties = sum(score == value for score, _, _ in scored)
    return BestCheckpoint(-negative_step, metric, value, tested_at, token, ties)


def evaluate_absolute_metric(args: SimpleNamespace, learner, runner, logger: Logger) -> None:
    """Load the best checkpoint of args.checkpoint_path (best_checkpoint), test it greedily on ABSOLUTE_ROUNDS
    x test_nepisode episodes as one test round, and record what was picked under "absolute_metric" in this
    evaluation run's info.json (the episodes themselves under test_episodes, their means as test_*_mean)."""
    best = best_checkpoint(args.checkpoint_path)
    step = best.t_env
    folder = os.path.join(args.checkpoint_path, str(step))
    checkpoint.verify(folder, need_state=False)
    log = logger.console_logger
    log.info(f"Absolute metric: the best checkpoint of run {best.unique_token} by its logged {best.metric} is "
             f"t_env {step} ({best.value:.4g}); loading {folder}")
    if best.ties > 1:
        log.warning(f"{best.ties} checkpoints scored {best.value:.4g}: the earliest, t_env {step}, is re-tested")
    if best.tested_at != step:
        log.warning(f"the checkpoint of t_env {step} was scored by the test of t_env {best.tested_at}, the last one "
                    f"before it (the run saved and tested at different steps; save_model_interval equal to "
                    f"test_interval keeps them together)")
    with checkpoint_mismatch(folder):
        learner.load_models(folder)
    runner.t_env = step
    runner.n_test_episodes *= ABSOLUTE_ROUNDS
    with th.no_grad():
        run_tests(args, runner, rounds=ABSOLUTE_ROUNDS)
    n_episodes = runner.n_test_episodes
    if logger.use_sacred:
        logger.sacred_info["absolute_metric"] = {"unique_token": best.unique_token, "t_env": step,
                                                 "selected_by": best.metric, "logged_value": best.value,
                                                 "tested_at": best.tested_at, "episodes": n_episodes}
    log.info(evaluation_summary(logger.stats, n_episodes, step, merge_env_stats(runner.get_env_stats())))


def evaluate_sequential(args: SimpleNamespace, runner, logger: Logger) -> None:
    """Run test_nepisode test episodes and print one summary line (and, with save_replay, one line
    listing the replays written)."""
    log = logger.console_logger
    if args.save_replay:
        log.info(f"save_replay=True: recording the {args.test_nepisode} test episodes of {runner.batch_size} "
                 f"env(s); their replays are written when the episodes end")
    with th.no_grad():
        run_tests(args, runner)
    log.info(evaluation_summary(logger.stats, args.test_nepisode, runner.t_env, merge_env_stats(runner.get_env_stats())))
    if args.save_replay:
        paths = [path for path in runner.save_replay() if path]
        log.info(f"Replays written ({len(paths)}): {', '.join(paths)}" if paths else "No replay was written")


def evaluation_summary(stats: dict, n_episodes: int, t_env: int, env_stats: dict) -> str:
    """'Evaluation: N episodes at t_env T: test_... means; env stats: ...' from the logged test stats."""
    means = ", ".join(f"{key} {values[-1][1]:.4g}" for key, values in sorted(stats.items())
                      if key.startswith("test_") and values)
    counts = ", ".join(f"{key} {value:.4g}" for key, value in env_stats.items())
    return f"Evaluation: {n_episodes} episodes at t_env {t_env}: {means}" + (f"; env stats: {counts}" if counts else "")


def merge_env_stats(per_env: list) -> dict:
    """The envs' get_stats() summed into one dict; a win_rate is recomputed from the summed battles
    (keys that are not numbers are dropped)."""
    merged = {}
    for stats in per_env:
        for key, value in (stats or {}).items():
            if isinstance(value, (int, float)) and not isinstance(value, bool) and key != "win_rate":
                merged[key] = merged.get(key, 0) + value
    if merged.get("battles_game"):
        merged["win_rate"] = merged["battles_won"] / merged["battles_game"]
    return merged


class TrainingInterrupted(KeyboardInterrupt):
    """Training stopped on SIGINT/SIGTERM after saving; sacred records the run as INTERRUPTED."""

    def __init__(self, signal_name: str):
        super().__init__(signal_name)
        self.signal_name = signal_name


class TrainingLoop:
    """PyMARL2's training loop: collect, learn, and every so often test, save models and print stats.

    The checkpoint is written at the end of an iteration, so it holds a consistent state to resume
    from: t_env, episode count, networks, optimiser, buffer and the logged curves all agree.
    """

    def __init__(self, args: SimpleNamespace, runner, buffer: ReplayBuffer, learner, logger: Logger):
        self.args = args
        self.runner = runner
        self.buffer = buffer
        self.learner = learner
        self.logger = logger
        self.episode = 0
        self.last_test_t = -args.test_interval - 1  # test right after the first batch
        self.last_log_t = 0
        self.model_save_t = 0
        self.start_time = time.time()
        self.last_test_time = self.start_time
        # On the GPU the host threads hardly matter: keep torch's count there.
        on_cpu = args.device == "cpu"
        self.threads = ThreadTuner(args.learner_threads if on_cpu else 0, max_threads=th.get_num_threads(),
                                   tune=on_cpu and args.tune_learner_threads)

    def run(self) -> None:
        """Train until t_max or a stop signal, then save a final checkpoint (save_model); further signals
        change nothing (see utils/stop.py)."""
        self.logger.console_logger.info(f"Beginning training for {self.args.t_max} timesteps")
        with StopSignals() as stop:
            try:
                while self.runner.t_env <= self.args.t_max and stop.received is None:
                    self.iterate()
            except StoppedWaiting as stopped:
                self.logger.console_logger.warning(f"{stopped}: the unfinished episode batch is dropped")
            if stop.received is not None:
                self.logger.console_logger.warning(f"{stop.received} received: stopping at t_env {self.runner.t_env}")
            if self.args.save_model and self.model_save_t != self.runner.t_env:
                self.save_models()
            received, repeats = stop.received, stop.repeats
        if repeats:
            self.logger.console_logger.warning(f"{repeats} more stop signal(s) came while stopping: the run saved "
                                               f"and stops all the same (SIGKILL stops it without saving)")
        if received is not None:
            raise TrainingInterrupted(received)
        self.logger.console_logger.info("Finished Training")

    def iterate(self) -> None:
        self.collect()
        if self.ready() and self.accumulated():
            self.learn()
        if (self.runner.t_env - self.last_test_t) / self.args.test_interval >= 1.0:
            self.test()
        self.episode += self.args.batch_size_run
        if self.runner.t_env - self.last_log_t >= self.args.log_interval:
            self.print_stats()
        if self.args.save_model and (self.runner.t_env - self.model_save_t >= self.args.save_model_interval
                                     or self.model_save_t == 0):
            self.save_models()

    def accumulated(self) -> bool:
        """Whether this iteration trains: always, or with accumulated_episodes (IPPO) only when the
        episode count after this batch is a multiple of it. PyMARL2 skips the rest of the iteration
        too (episode count, tests, saves, logs), so a value that does not divide batch_size_run
        stops its training for good; here only the training step is skipped."""
        every = self.args.accumulated_episodes
        return not every or (self.episode + self.args.batch_size_run) % every == 0

    def ready(self) -> bool:
        """Whether the buffers hold enough episodes to train."""
        return self.buffer.can_sample(self.args.batch_size)

    def replay_buffers(self) -> dict:
        """The loop's replay buffers by checkpoint file name."""
        return {checkpoint.BUFFER_FILE: self.buffer}

    def collect(self) -> None:
        with th.no_grad():
            episodes = self.runner.run(test_mode=False)
            for buffer in self.replay_buffers().values():
                buffer.insert_episode_batch(episodes)

    def on_device(self, sample: EpisodeBatch) -> EpisodeBatch:
        if sample.device != self.args.device:
            sample.to(self.args.device)
        return sample

    def learn(self) -> None:
        """One training step on a sample; with prioritized replay (use_per) the sample is drawn by
        priority, weighted by importance, and its episodes' priorities are updated after the step."""
        # No steps to drop: the buffer pads a sample only to its longest drawn episode.
        if self.args.use_per:
            sample, slots, weights = self.buffer.sample(self.args.batch_size, self.runner.t_env)
            weights = th.as_tensor(weights, device=self.args.device)  # [batch_size]
        else:
            sample, weights = self.buffer.sample(self.args.batch_size), None
        with self.timed_step(work=sample.max_seq_length):
            info = self.learner.train(self.on_device(sample), self.runner.t_env, self.episode, per_weight=weights)
        if weights is not None:
            self.buffer.update_priorities(slots, info["td_errors_abs"].numpy() + PER_PRIORITY_FLOOR)

    @contextlib.contextmanager
    def timed_step(self, work: int):
        """Runs a training step under the thread tuner (`work`: its sampled steps) and logs a change of
        the thread count. In a seed batch the step runs without the baton (run/seed_batch.py): the body
        must draw no random numbers."""
        chosen = self.threads.current
        with self.threads.step(work=work), released():  # other seeds of a seed batch run meanwhile
            yield
        if self.threads.current != chosen:
            self.logger.log_stat("learner_threads", self.threads.current, self.runner.t_env)
            speeds = ", ".join(f"{n}: {1e3 * s:.2f} ms" for n, s in sorted(self.threads.seconds.items()))
            self.logger.console_logger.debug(f"training step now on {self.threads.current} torch thread(s); "
                                             f"recent time per sampled step by thread count: {speeds}")

    def test(self) -> None:
        t_env, t_max = self.runner.t_env, self.args.t_max
        log = self.logger.console_logger
        log.info(f"t_env: {t_env} / {t_max}")
        log.info(f"Estimated time left: {time_left(self.last_test_time, self.last_test_t, t_env, t_max)}. "
                 f"Time passed: {time_str(time.time() - self.start_time)}")
        self.last_test_time = time.time()
        self.last_test_t = t_env
        with th.no_grad():
            try:
                run_tests(self.args, self.runner)
            except StoppedWaiting as stopped:
                log.warning(f"{stopped}: the test episodes of t_env {t_env} are cut short")

    def save_models(self) -> None:
        """Write the checkpoint of this t_env (models, training state, buffer with save_buffer) atomically."""
        self.model_save_t = self.runner.t_env
        save_path = os.path.join(self.args.local_results_path, "models", self.args.unique_token,
                                 str(self.runner.t_env))
        self.logger.console_logger.info(f"Saving models to {save_path}")
        checkpoint.write_atomically(save_path, self._write_checkpoint)

    def _write_checkpoint(self, folder: str) -> None:
        self.learner.save_models(folder)
        files = self.learner.model_files()
        if self.args.save_buffer:
            for name, buffer in self.replay_buffers().items():
                th.save(buffer.state_dict(), os.path.join(folder, name))
                files.append(name)
        th.save(self.training_state(files), os.path.join(folder, checkpoint.TRAINING_STATE))

    def training_state(self, files: list) -> dict:
        """Everything but the networks, optimiser and buffer that a resumed run needs."""
        return {"version": checkpoint.STATE_VERSION, "files": files, "episode": self.episode,
                "last_test_t": self.last_test_t, "last_log_t": self.last_log_t, "model_save_t": self.model_save_t,
                "runner": self.runner.state_dict(), "learner": self.learner.state_dict(),
                "train_precision": self.args.train_precision, "simulator": simulator_of(self.args),
                "rng": checkpoint.rng_states(), "sacred_info": self.logger.sacred_info_copy(),
                "seed": getattr(self.args, "seed", None), "seed_batch": getattr(self.args, "seed_batch", {}),
                "unique_token": self.args.unique_token}

    def resume(self, point) -> None:
        """Load a checkpoint written by save_models and carry on exactly where it was taken."""
        state = point.state
        with checkpoint_mismatch(point.folder):
            self.learner.load_models(point.folder)
            self.learner.load_target_models(point.folder)
        self.learner.load_state_dict(state["learner"])
        self.runner.load_state_dict(state["runner"])
        self.episode = state["episode"]
        self.last_test_t, self.last_log_t = state["last_test_t"], state["last_log_t"]
        self.model_save_t = state["model_save_t"]
        self.logger.restore_sacred_info(state["sacred_info"], to_tensorboard=is_new_branch(self.args))
        if checkpoint.BUFFER_FILE not in state["files"]:
            self.logger.console_logger.warning("the checkpoint has no replay buffer (save_buffer was off): "
                                               "learning restarts once batch_size new episodes are stored")
        elif not self.args.save_buffer:
            self.logger.console_logger.warning("save_buffer=False: the checkpoint's replay buffer is not loaded; "
                                               "learning restarts once batch_size new episodes are stored")
        else:
            for name, buffer in self.replay_buffers().items():
                checkpoint.load_buffer_state(buffer, checkpoint.load_file(point.folder, name, mmap=True), point.folder)
        checkpoint.set_rng_states(state["rng"])
        self.logger.console_logger.info(f"Resumed at t_env {self.runner.t_env}, episode {self.episode}, "
                                        f"{self.buffer.episodes_in_buffer} episodes in the replay buffer")

    def print_stats(self) -> None:
        self.logger.log_stat("episode", self.episode, self.runner.t_env)
        self.logger.print_recent_stats()
        self.last_log_t = self.runner.t_env


def off_policy_buffer(args: SimpleNamespace, buffer: ReplayBuffer, logger: Logger) -> ReplayBuffer:
    """A replay buffer of off_buffer_size episodes with `buffer`'s layout (DOP's and RIIT's off-policy data)."""
    scheme, groups, preprocess = buffer.layout
    check_buffer_memory(args.off_buffer_size, ReplayBuffer.storage_bytes(scheme, groups, preprocess),
                        buffer.max_seq_length, buffer.device, logger)
    return ReplayBuffer(scheme, groups, args.off_buffer_size, buffer.max_seq_length, preprocess=preprocess,
                        device=buffer.device)


class TwoBufferLoop(TrainingLoop):
    """A training loop that also keeps every episode in an off-policy buffer (off_buffer_size), saved and
    resumed beside the on-policy one; its learner has the method LEARNER_METHOD besides train."""

    LEARNER_METHOD, LEARNER = "", ""

    def __init__(self, args: SimpleNamespace, runner, buffer: ReplayBuffer, learner, logger: Logger):
        if not hasattr(learner, self.LEARNER_METHOD):
            raise ValueError(f"run {args.run} trains {self.LEARNER}, not {args.learner}")
        super().__init__(args, runner, buffer, learner, logger)
        self.off_buffer = off_policy_buffer(args, buffer, logger)

    def replay_buffers(self) -> dict:
        return {**super().replay_buffers(), checkpoint.OFF_BUFFER_FILE: self.off_buffer}


class DOPTrainingLoop(TwoBufferLoop):
    """PyMARL2's dop_run (``run: dop_run``): every episode goes into the on-policy buffer (buffer_size) and
    into an off-policy one (off_buffer_size). Once they hold batch_size and off_batch_size episodes, each
    iteration trains the critic on batch_size episodes drawn from the first and off_batch_size from the
    second (learner.train_critic), then the policy on the batch_size newest episodes (learner.train)."""

    LEARNER_METHOD, LEARNER = "train_critic", "DOP's learner (offpg_learner)"

    def ready(self) -> bool:
        return self.buffer.can_sample(self.args.batch_size) and self.off_buffer.can_sample(self.args.off_batch_size)

    def learn(self) -> None:
        on_policy = self.on_device(self.buffer.sample(self.args.batch_size))
        off_policy = self.on_device(self.off_buffer.sample(self.args.off_batch_size))
        newest = self.on_device(self.buffer.sample_latest(self.args.batch_size))
        work = on_policy.max_seq_length + off_policy.max_seq_length + newest.max_seq_length
        with self.timed_step(work=work):
            self.learner.train_critic(on_policy, off_policy, self.runner.t_env)
            self.learner.train(newest, self.runner.t_env, self.episode)


class OnOffTrainingLoop(TwoBufferLoop):
    """PyMARL2's on_off run (RIIT, ``run: on_off``): every episode goes into the on-policy buffer (buffer_size)
    and into an off-policy one (off_buffer_size). Once the off-policy buffer holds buffer_size episodes, each
    iteration trains the critic alone on off_batch_size episodes drawn from it (learner.train_off_policy);
    once the on-policy buffer is full too, the critic and the actors on its batch_size newest episodes."""

    LEARNER_METHOD, LEARNER = "train_off_policy", "RIIT's learner (fmac_learner)"

    def ready(self) -> bool:
        return self.off_buffer.can_sample(max(self.args.buffer_size, self.args.off_batch_size))

    def learn(self) -> None:
        off_policy = self.on_device(self.off_buffer.sample(self.args.off_batch_size))
        with self.timed_step(work=off_policy.max_seq_length):
            self.learner.train_off_policy(off_policy, self.runner.t_env, self.episode)
        if self.buffer.can_sample(self.args.buffer_size):
            newest = self.on_device(self.buffer.sample_latest(self.args.batch_size))
            with self.timed_step(work=newest.max_seq_length):
                self.learner.train(newest, self.runner.t_env, self.episode)


# The training loops of the `run` settings (run/ REGISTRY).
LOOPS = {"default": TrainingLoop, "dop_run": DOPTrainingLoop, "on_off": OnOffTrainingLoop}
