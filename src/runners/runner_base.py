"""What the episode and parallel runners share: the per-step episode loop, the env-side
transition helpers (also used inside the parallel runner's worker processes) and the
episode statistics logged under PyMARL2's names.

One batch row belongs to one env. At every step t of a run the row holds, for each env
still running: state/obs/avail_actions seen at t (pre-transition data), the actions chosen
at t, and the reward/terminated that followed (post-transition data). After its last env
step an env stores its final state and one more action choice, so that learners can
bootstrap from the last state of every episode.
"""
from collections import defaultdict
from functools import partial
from typing import Callable

import numpy as np

from components.episode_buffer import EpisodeBatch
from envs import REGISTRY as env_REGISTRY


def env_factory(env_name: str) -> Callable:
    """The registered constructor of env `env_name` (picklable when registered as a class or module-level function)."""
    if env_name not in env_REGISTRY:
        raise ValueError(f"unknown env '{env_name}'; known envs: {', '.join(sorted(env_REGISTRY))}")
    return env_REGISTRY[env_name]


def env_seeds(base_seed: int | None, batch_size_run: int, generation: int = 0) -> list:
    """One seed per env of the run: the run's seed + env index (None when the run has no seed).

    Distinct seeds keep the parallel envs from replaying the same episodes (PyMARL2 gives every
    worker the same seed). Envs built again later (a restarted worker, a resumed run) take a new
    `generation`, which shifts their seeds past every seed used before.
    """
    return [env_seed(base_seed, i, batch_size_run, generation) for i in range(batch_size_run)]


def env_seed(base_seed: int | None, index: int, batch_size_run: int, generation: int) -> int | None:
    """Seed of env `index` in seed generation `generation`: base + index + batch_size_run * generation."""
    return None if base_seed is None else base_seed + index + batch_size_run * generation


def observe(env) -> dict:
    """Pre-transition data: what the agents see before choosing their actions."""
    return {"state": env.get_state(), "avail_actions": env.get_avail_actions(), "obs": env.get_obs()}


def step_env(env, actions) -> dict:
    """Apply the joint action; returns the reward/terminated/info of the step and the next observation."""
    reward, terminated, info = env.step(actions)
    return {"reward": reward, "terminated": terminated, "info": info, **observe(env)}


def stack_pre_transition(observations: list) -> dict:
    """Pre-transition data of several envs as arrays with the env index first."""
    return {key: np.stack([np.asarray(o[key]) for o in observations])
            for key in ("state", "avail_actions", "obs")}


def stack_post_transition(transitions: list) -> dict:
    """Reward and terminated flag of several envs; a time-out (info["episode_limit"]) is not terminal."""
    return {
        "reward": np.array([[tr["reward"]] for tr in transitions], dtype=np.float32),  # [envs, 1]
        "terminated": np.array([[tr["terminated"] and not tr["info"].get("episode_limit", False)]
                                for tr in transitions], dtype=np.uint8),  # [envs, 1]
    }


_CHECKED_FIELDS = ("state", "obs", "reward")  # env outputs that must be finite


class NonFiniteEnvOutput(ValueError):
    """An env returned NaN or inf in its observations, state or reward."""


def check_finite(data: dict, envs: list, seeds: list, env_name: str, t: int) -> None:
    """Raise NonFiniteEnvOutput naming the field, env and episode step of the first NaN/inf in
    the stacked env outputs `data` ({field: [len(envs), ...]})."""
    for key in _CHECKED_FIELDS:
        if key not in data:
            continue
        values = data[key].reshape(len(envs), -1)  # [envs, values per env]
        finite = np.isfinite(values).all(axis=1)  # [envs]
        if not finite.all():
            row = int(np.argmin(finite))
            bad = values[row][~np.isfinite(values[row])][0]
            raise NonFiniteEnvOutput(
                f"env '{env_name}' (env {envs[row]}, seed {seeds[envs[row]]}) returned {bad} in its {key} at "
                f"episode step {t}; the env must return finite numbers")


class EpisodeStats:
    """Returns and summed final-step env info of the episodes since the last log."""

    def __init__(self):
        self.clear()

    def clear(self) -> None:
        self.returns = []
        self.sums = defaultdict(float)
        self.n_episodes = 0

    def add(self, episode_return: float, length: int, final_info: dict) -> None:
        self.returns.append(episode_return)
        self.n_episodes += 1
        self.sums["ep_length"] += length
        for key, value in final_info.items():
            if isinstance(value, (bool, int, float, np.number, np.bool_)):
                self.sums[key] += float(value)

    def log(self, logger, prefix: str, t_env: int) -> None:
        """Log return_mean/std and <key>_mean per info key (e.g. battle_won_mean, ep_length_mean), then reset."""
        logger.log_stat(prefix + "return_mean", np.mean(self.returns), t_env)
        logger.log_stat(prefix + "return_std", np.std(self.returns), t_env)
        for key, total in self.sums.items():
            logger.log_stat(f"{prefix}{key}_mean", total / self.n_episodes, t_env)
        self.clear()


class _EpisodesInProgress:
    """Return, length, end and last info of each env's episode during one run."""

    def __init__(self, n_envs: int):
        self.returns = [0.0] * n_envs
        self.lengths = [0] * n_envs
        self.ended = [False] * n_envs
        self.final_infos = [{} for _ in range(n_envs)]

    def record(self, transitions: dict) -> None:
        """Account for one env step of each env in `transitions` ({env index: step_env dict})."""
        for i, transition in transitions.items():
            self.returns[i] += float(transition["reward"])
            self.lengths[i] += 1
            self.ended[i] = bool(transition["terminated"])
            self.final_infos[i] = transition["info"]


class BatchRunner:
    """Runs `batch_size` envs for one episode each and returns the episodes as one EpisodeBatch.

    Subclasses own the envs: `_reset_envs()` returns one observation dict per env and
    `_step_envs({env index: actions})` one `step_env` dict per stepped env.
    """

    def __init__(self, args, logger):
        self.args = args
        self.logger = logger
        self.batch_size = args.batch_size_run
        # A resumed run builds its envs with the seed generation after the checkpoint's.
        self.seed_generation = getattr(args, "env_seed_generation", 0)
        self.env_seeds = env_seeds(args.env_args.get("seed"), args.batch_size_run, self.seed_generation)
        self.t = 0
        self.t_env = 0
        self.train_stats = EpisodeStats()
        self.test_stats = EpisodeStats()
        self.log_train_stats_t = -args.runner_log_interval  # log after the first run
        self.n_test_episodes = max(1, args.test_nepisode // self.batch_size) * self.batch_size
        self.env_info = None  # set by subclasses once their envs exist
        self.new_batch = None
        self.mac = None
        self.batch = None

    def setup(self, scheme: dict, groups: dict, preprocess: dict, mac) -> None:
        self.new_batch = partial(EpisodeBatch, scheme, groups, self.batch_size, self.episode_limit + 1,
                                 preprocess=preprocess, device=self.args.device)
        self.mac = mac

    @property
    def episode_limit(self) -> int:
        return self.env_info["episode_limit"]

    def get_env_info(self) -> dict:
        return self.env_info

    def run(self, test_mode: bool = False) -> EpisodeBatch:
        """One episode per env; training runs advance t_env by the env steps taken."""
        self.batch = self.new_batch()
        self.mac.init_hidden(batch_size=self.batch_size)
        self.t = 0
        self._store_pre_transition(list(range(self.batch_size)), self._reset_envs())
        episodes = _EpisodesInProgress(self.batch_size)
        acting = list(range(self.batch_size))  # envs whose row needs actions at self.t
        while True:
            actions = self._select_actions(acting, test_mode)  # [len(acting), n_agents]
            stepping = [i for i in acting if not episodes.ended[i]]
            if not stepping:
                break
            self._check_within_limit()
            actions_of = dict(zip(acting, actions.numpy()))  # env index -> [n_agents]
            transitions = self._step_envs({i: actions_of[i] for i in stepping})
            episodes.record(transitions)
            self._store_step(stepping, [transitions[i] for i in stepping])
            acting = stepping
        self._finish_run(episodes, test_mode)
        return self.batch

    def _select_actions(self, acting: list, test_mode: bool):
        actions = self.mac.select_actions(self.batch, t_ep=self.t, t_env=self.t_env, bs=acting,
                                          test_mode=test_mode).to("cpu")  # [len(acting), n_agents]
        # [len(acting), 1 (time), n_agents]; not marking filled: the pre-transition data did
        self.batch.update({"actions": actions.unsqueeze(1)}, bs=acting, ts=self.t, mark_filled=False)
        return actions

    def _check_within_limit(self) -> None:
        if self.t >= self.episode_limit:
            raise RuntimeError(f"env '{self.args.env}' ran past its episode_limit {self.episode_limit}; "
                               f"it must end every episode within episode_limit steps")

    def _store_step(self, stepping: list, transitions: list) -> None:
        post = stack_post_transition(transitions)
        check_finite(post, stepping, self.env_seeds, self.args.env, self.t + 1)
        self.batch.update(post, bs=stepping, ts=self.t, mark_filled=False)
        self.t += 1
        self._store_pre_transition(stepping, transitions)

    def _store_pre_transition(self, envs: list, observations: list) -> None:
        pre = stack_pre_transition(observations)
        check_finite(pre, envs, self.env_seeds, self.args.env, self.t)
        self.batch.update(pre, bs=envs, ts=self.t)

    def _finish_run(self, episodes: "_EpisodesInProgress", test_mode: bool) -> None:
        stats = self.test_stats if test_mode else self.train_stats
        for episode_return, length, info in zip(episodes.returns, episodes.lengths, episodes.final_infos):
            stats.add(episode_return, length, info)
        if test_mode:
            if len(stats.returns) >= self.n_test_episodes:
                stats.log(self.logger, "test_", self.t_env)
            return
        self.t_env += sum(episodes.lengths)
        if self.t_env - self.log_train_stats_t >= self.args.runner_log_interval:
            stats.log(self.logger, "", self.t_env)
            if hasattr(self.mac.action_selector, "epsilon"):
                self.logger.log_stat("epsilon", self.mac.action_selector.epsilon, self.t_env)
            self.log_train_stats_t = self.t_env

    def state_dict(self) -> dict:
        """What a resumed run needs to carry on: env step count, logging position, seed generation
        and the training-episode stats gathered since the last log."""
        stats = self.train_stats
        return {"t_env": self.t_env, "log_train_stats_t": self.log_train_stats_t,
                "seed_generation": self.seed_generation,
                "train_stats": {"returns": list(stats.returns), "sums": dict(stats.sums),
                                "n_episodes": stats.n_episodes}}

    def load_state_dict(self, state: dict) -> None:
        """Restore the counters of state_dict(); the envs keep the seeds they were built with."""
        self.t_env = state["t_env"]
        self.log_train_stats_t = state["log_train_stats_t"]
        self.train_stats.returns = list(state["train_stats"]["returns"])
        self.train_stats.sums.update(state["train_stats"]["sums"])
        self.train_stats.n_episodes = state["train_stats"]["n_episodes"]

    def get_env_stats(self) -> list:
        """get_stats() of every env (e.g. battles_won, win_rate for SMAC)."""
        raise NotImplementedError

    def save_replay(self) -> None:
        raise NotImplementedError

    def close_env(self) -> None:
        raise NotImplementedError

    def _reset_envs(self) -> list:
        raise NotImplementedError

    def _step_envs(self, actions: dict) -> dict:
        raise NotImplementedError
