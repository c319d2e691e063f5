"""One experiment: build runner, buffer, controller and learner from the config, then train or evaluate.

Life of a batch while training: runner.run() plays batch_size_run episodes into an
EpisodeBatch -> ReplayBuffer.insert_episode_batch -> (once batch_size episodes are stored)
buffer.sample(batch_size) -> truncated to the longest filled episode -> moved to args.device
-> learner.train().
"""
import datetime
import os
import pprint
import time
from types import SimpleNamespace

import torch as th

from components.episode_buffer import ReplayBuffer
from components.transforms import OneHot
from controllers import REGISTRY as mac_REGISTRY
from learners import REGISTRY as le_REGISTRY
from runners import REGISTRY as r_REGISTRY
from utils.logging import Logger
from utils.timehelper import time_left, time_str


def run(_run, _config: dict, _log) -> None:
    """Sacred entry point (REGISTRY["default"]); `_config` is a plain, mutable copy of the merged config."""
    args = SimpleNamespace(**args_sanity_check(_config, _log))
    args.device = "cuda" if args.use_cuda else "cpu"
    args.unique_token = f"{run_label(args)}__{datetime.datetime.now().strftime('%Y-%m-%d_%H-%M-%S')}"
    if args.env == "sc2":
        _log.info(f"SMAC engine: {args.env_args['backend']} (env_args.backend; auto picks StarCraft II "
                  f"when it is installed under SC2PATH, else the built-in simulator)")

    _log.info("Experiment Parameters:")
    _log.info("\n\n" + pprint.pformat(_config, indent=4, width=1) + "\n")

    logger = Logger(_log)
    if args.use_tensorboard:
        logger.setup_tb(os.path.join(args.local_results_path, "tb_logs", args.unique_token))
    logger.setup_sacred(_run)
    try:
        run_sequential(args=args, logger=logger)
    finally:
        logger.close()
    _log.info("Exiting script")


def run_label(args: SimpleNamespace) -> str:
    """The run's name, tagged with the SMAC engine so results of the two engines are never mixed up."""
    return f"{args.name}_{args.env_args['backend']}" if args.env == "sc2" else args.name


def args_sanity_check(config: dict, _log) -> dict:
    """Fall back to the CPU without CUDA; round test_nepisode to whole parallel runs (at least one)."""
    if config["use_cuda"] and not th.cuda.is_available():
        config["use_cuda"] = False
        _log.warning("CUDA flag use_cuda was switched OFF automatically because no CUDA devices are available!")
    batch_size_run = config["batch_size_run"]
    config["test_nepisode"] = max(batch_size_run, config["test_nepisode"] // batch_size_run * batch_size_run)
    return config


def _lookup(registry: dict, name: str, what: str):
    if name not in registry:
        raise ValueError(f"unknown {what} '{name}'; known: {', '.join(sorted(registry))}")
    return registry[name]


def run_sequential(args: SimpleNamespace, logger: Logger) -> None:
    """Train for t_max env steps, or only evaluate when args.evaluate / args.save_replay is set."""
    runner = _lookup(r_REGISTRY, args.runner, "runner")(args=args, logger=logger)
    try:
        buffer, learner = setup_learning(args, runner, logger)
        if args.checkpoint_path:
            load_checkpoint(args, learner, runner, logger)
        elif args.evaluate or args.save_replay:
            logger.console_logger.warning("evaluating freshly initialised models: no checkpoint_path given")
        if args.evaluate or args.save_replay:
            evaluate_sequential(args, runner, logger)
        else:
            TrainingLoop(args, runner, buffer, learner, logger).run()
    finally:
        runner.close_env()


def build_scheme(env_info: dict) -> tuple:
    """Fields stored per step (scheme), the agent group and the one-hot actions added on write."""
    scheme = {
        "state": {"vshape": env_info["state_shape"]},
        "obs": {"vshape": env_info["obs_shape"], "group": "agents"},
        "actions": {"vshape": (1,), "group": "agents", "dtype": th.long},
        "avail_actions": {"vshape": (env_info["n_actions"],), "group": "agents", "dtype": th.int},
        "reward": {"vshape": (1,)},
        "terminated": {"vshape": (1,), "dtype": th.uint8},
    }
    groups = {"agents": env_info["n_agents"]}
    preprocess = {"actions": ("actions_onehot", [OneHot(out_dim=env_info["n_actions"])])}
    return scheme, groups, preprocess


def setup_learning(args: SimpleNamespace, runner, logger: Logger) -> tuple:
    """Copy the env's sizes into args and build (buffer, learner); the runner gets the scheme and controller."""
    env_info = runner.get_env_info()
    for key in ("n_agents", "n_actions", "state_shape", "obs_shape", "episode_limit"):
        setattr(args, key, env_info[key])
    scheme, groups, preprocess = build_scheme(env_info)
    # One extra step holds the final state and the action chosen in it.
    buffer = ReplayBuffer(scheme, groups, args.buffer_size, env_info["episode_limit"] + 1,
                          preprocess=preprocess, device="cpu" if args.buffer_cpu_only else args.device)
    mac = _lookup(mac_REGISTRY, args.mac, "mac")(buffer.scheme, groups, args)
    runner.setup(scheme=scheme, groups=groups, preprocess=preprocess, mac=mac)
    learner = _lookup(le_REGISTRY, args.learner, "learner")(mac, buffer.scheme, logger, args)
    if args.use_cuda:
        learner.cuda()
    return buffer, learner


def checkpoint_step(checkpoint_path: str, load_step: int) -> int:
    """The saved t_env to load: the largest when load_step is 0, else the one closest to load_step."""
    if not os.path.isdir(checkpoint_path):
        raise FileNotFoundError(f"checkpoint_path '{checkpoint_path}' is not a directory; "
                                f"pass a folder like <local_results_path>/models/<unique_token>")
    steps = [int(name) for name in os.listdir(checkpoint_path)
             if name.isdigit() and os.path.isdir(os.path.join(checkpoint_path, name))]
    if not steps:
        raise FileNotFoundError(f"checkpoint_path '{checkpoint_path}' has no saved models "
                                f"(sub-folders named by t_env, written when save_model=True)")
    if load_step == 0:
        return max(steps)
    return min(steps, key=lambda step: abs(step - load_step))


def load_checkpoint(args: SimpleNamespace, learner, runner, logger: Logger) -> None:
    step = checkpoint_step(args.checkpoint_path, args.load_step)
    model_path = os.path.join(args.checkpoint_path, str(step))
    logger.console_logger.info(f"Loading model from {model_path}")
    learner.load_models(model_path)
    runner.t_env = step


def run_tests(args: SimpleNamespace, runner) -> None:
    """Greedy test episodes (test_nepisode in all); the runner logs test_* stats after the last one."""
    for _ in range(max(1, args.test_nepisode // runner.batch_size)):
        runner.run(test_mode=True)


def evaluate_sequential(args: SimpleNamespace, runner, logger: Logger) -> None:
    with th.no_grad():
        run_tests(args, runner)
    if args.save_replay:
        runner.save_replay()
    logger.print_recent_stats()
    logger.console_logger.info(f"Env stats: {runner.get_env_stats()}")


class TrainingLoop:
    """PyMARL2's training loop: collect, learn, and every so often test, save models and print stats."""

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

    def run(self) -> None:
        self.logger.console_logger.info(f"Beginning training for {self.args.t_max} timesteps")
        while self.runner.t_env <= self.args.t_max:
            self.collect()
            if self.buffer.can_sample(self.args.batch_size):
                self.learn()
            if (self.runner.t_env - self.last_test_t) / self.args.test_interval >= 1.0:
                self.test()
            if self.args.save_model and (self.runner.t_env - self.model_save_t >= self.args.save_model_interval
                                         or self.model_save_t == 0):
                self.save_models()
            self.episode += self.args.batch_size_run
            if self.runner.t_env - self.last_log_t >= self.args.log_interval:
                self.print_stats()
        self.logger.console_logger.info("Finished Training")

    def collect(self) -> None:
        with th.no_grad():
            self.buffer.insert_episode_batch(self.runner.run(test_mode=False))

    def learn(self) -> None:
        sample = self.buffer.sample(self.args.batch_size)
        sample = sample[:, :sample.max_t_filled()]  # drop steps no sampled episode reached
        if sample.device != self.args.device:
            sample.to(self.args.device)
        self.learner.train(sample, self.runner.t_env, self.episode)

    def test(self) -> None:
        t_env, t_max = self.runner.t_env, self.args.t_max
        log = self.logger.console_logger
        log.info(f"t_env: {t_env} / {t_max}")
        log.info(f"Estimated time left: {time_left(self.last_test_time, self.last_test_t, t_env, t_max)}. "
                 f"Time passed: {time_str(time.time() - self.start_time)}")
        self.last_test_time = time.time()
        self.last_test_t = t_env
        with th.no_grad():
            run_tests(self.args, self.runner)

    def save_models(self) -> None:
        self.model_save_t = self.runner.t_env
        save_path = os.path.join(self.args.local_results_path, "models", self.args.unique_token,
                                 str(self.runner.t_env))
        os.makedirs(save_path, exist_ok=True)
        self.logger.console_logger.info(f"Saving models to {save_path}")
        self.learner.save_models(save_path)

    def print_stats(self) -> None:
        self.logger.log_stat("episode", self.episode, self.runner.t_env)
        self.logger.print_recent_stats()
        self.last_log_t = self.runner.t_env
