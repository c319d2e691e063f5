"""What the episode and parallel runners share: the per-step episode loop, the envs stepped in
the runner's own process, the env-side transition helpers (also used inside the parallel
runner's worker processes) and the episode statistics logged under PyMARL2's names.

One batch row belongs to one env. At every step t of a run the row holds, for each env
still running: state/obs/avail_actions seen at t (pre-transition data), the actions chosen
at t, and the reward/terminated that followed (post-transition data). After its last env
step an env stores its final state and one more action choice, so that learners can
bootstrap from the last state of every episode.
"""
from collections import defaultdict
from functools import partial
from typing import Any, Callable, NamedTuple

import numpy as np
import torch as th

from components.episode_buffer import EpisodeBatch
from envs import REGISTRY as env_REGISTRY
from utils.run_index import rounded_test_nepisode
from utils.threads import torch_threads

# Torch threads while acting. The agent network runs on a few dozen rows per step, too little
# work to share between threads: on 2 cores that other processes also used, a second thread made
# select_actions for 8 envs x 6 agents 6-100x slower (0.2-0.6 ms -> 2.5-70 ms per call).
ACTING_THREADS = 1


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


def env_kwargs(env_args: dict, seed: int | None, index: int, n_envs: int) -> dict:
    """The constructor arguments of env `index` of `n_envs`: env_args with its own seed and, for an env
    that names its replays (replay_prefix), a prefix of its own, so that parallel envs never write
    their replays over each other's."""
    kwargs = dict(env_args, seed=seed)
    if n_envs > 1 and kwargs.get("replay_prefix"):
        kwargs["replay_prefix"] = f"{kwargs['replay_prefix']}_env{index}"
    return kwargs


class Observation(NamedTuple):
    """Pre-transition data of one env: what the agents see before choosing their actions."""

    state: Any
    avail_actions: Any
    obs: Any


class Transition(NamedTuple):
    """One env step: its reward, terminated flag and info, then the observation that followed."""

    reward: float | np.ndarray  # the team's, or each agent's [n_agents] with common_reward=False
    terminated: bool
    info: dict
    observation: Observation


def observe(env) -> Observation:
    # One array rather than SMAC's list of per-agent arrays: a third of the cost to pickle (worker
    # answers) and half to copy into the batch.
    return Observation(env.get_state(), env.get_avail_actions(), np.asarray(env.get_obs()))


def step_env(env, actions) -> Transition:
    """Apply the joint action; returns the step's reward/terminated/info and the next observation."""
    reward, terminated, info = env.step(actions)
    return Transition(reward, terminated, info, observe(env))


def reset_env(env) -> Observation:
    env.reset()
    return observe(env)


class InProcessEnvs:
    """The run's envs, built and stepped one after the other in the calling process.

    Same interface as the parallel runner's worker processes (EnvWorkers): seeds,
    seed_generation, env_info(), reset(), step(), get_stats(), save_replay(), close().
    """

    def __init__(self, env_name: str, env_args: dict, n_envs: int, seed_generation: int = 0):
        env_fn = env_factory(env_name)
        self.seeds = env_seeds(env_args.get("seed"), n_envs, seed_generation)
        self.seed_generation = seed_generation
        self.envs = [env_fn(**env_kwargs(env_args, seed, i, n_envs)) for i, seed in enumerate(self.seeds)]

    def env_info(self) -> dict:
        return self.envs[0].get_env_info()

    def reset(self) -> list:
        """Reset every env; one Observation per env."""
        return [reset_env(env) for env in self.envs]

    def step(self, indices: list, actions: np.ndarray) -> list:
        """Step env indices[k] with actions[k] ([len(indices), n_agents]); one Transition per stepped env."""
        return [step_env(self.envs[i], env_actions) for i, env_actions in zip(indices, actions)]

    def get_stats(self) -> list:
        return [env.get_stats() for env in self.envs]

    def save_replay(self) -> list:
        """Each env's replay path (None where it wrote none)."""
        return [env.save_replay() for env in self.envs]

    def close(self) -> None:
        for env in self.envs:
            env.close()


class BatchArrays:
    """numpy arrays [batch, T, ...] of the batch fields the envs (and the chosen actions) fill, written in
    place by the runner.

    On the CPU they share memory with the batch, so a write lands in the batch at once and no
    tensor is built per step. On another device (CUDA) they are a host copy, and push(keys, t)
    copies step t of those fields into the batch, each step once, right after it is written.
    """

    OBSERVED = ("state", "avail_actions", "obs", "filled")  # written at the step they describe
    OUTCOMES = ("reward", "terminated")  # written at step t once the env step from t is taken
    ACTED = ("actions",)  # the controller's choice at step t
    FIELDS = OBSERVED + OUTCOMES + ACTED

    def __init__(self, batch: EpisodeBatch, shared: bool):
        self.batch = batch
        self.shared = shared
        arrays = {key: (batch[key] if shared else th.zeros_like(batch[key], device="cpu")).numpy()
                  for key in self.FIELDS}
        self.state, self.avail_actions, self.obs = arrays["state"], arrays["avail_actions"], arrays["obs"]
        self.reward, self.terminated, self.filled = arrays["reward"], arrays["terminated"], arrays["filled"]
        self.actions = arrays["actions"]
        self._arrays = arrays

    def push(self, keys: tuple, t: int) -> None:
        """Copy step t of fields `keys` into the batch (nothing to do when shared)."""
        if self.shared:
            return
        for key in keys:
            self.batch[key][:, t] = th.from_numpy(self._arrays[key][:, t])  # [batch, ...]


class NonFiniteEnvOutput(ValueError):
    """An env returned NaN or inf in its observations, state or reward."""


def check_finite(data: dict, envs: list, seeds: list, env_name: str, t: int) -> None:
    """Raise NonFiniteEnvOutput naming the field, env and episode step of the first NaN/inf in
    the env outputs `data` ({field: [len(envs), ...]}, fields among state, obs and reward)."""
    for key, values in data.items():
        values = values.reshape(len(envs), -1)  # [envs, values per env]
        if np.isfinite(values).all():
            continue
        row = int(np.argmin(np.isfinite(values).all(axis=1)))
        bad = values[row][~np.isfinite(values[row])][0]
        raise NonFiniteEnvOutput(
            f"env '{env_name}' (env {envs[row]}, seed {seeds[envs[row]]}) returned {bad} in its {key} at "
            f"episode step {t}; the env must return finite numbers")


# Final-step info keys whose per-episode values a test round keeps (besides the return), when the env reports them.
EPISODE_KEYS = ("battle_won",)


class EpisodeStats:
    """Returns and summed final-step env info of the episodes since the last log, and the per-episode
    values of EPISODE_KEYS."""

    def __init__(self):
        self.clear()

    def clear(self) -> None:
        self.returns = []
        self.sums = defaultdict(float)
        self.per_episode = defaultdict(list)
        self.n_episodes = 0

    def add(self, episode_return: float | np.ndarray, length: int, final_info: dict) -> None:
        self.returns.append(episode_return)
        self.n_episodes += 1
        self.sums["ep_length"] += length
        for key, value in final_info.items():
            if isinstance(value, (bool, int, float, np.number, np.bool_)):
                self.sums[key] += float(value)
                if key in EPISODE_KEYS:
                    self.per_episode[key].append(float(value))

    def log_episodes(self, logger, t_env: int) -> None:
        """Keep this round's per-episode returns (the agents' summed return with per-agent rewards) and
        EPISODE_KEYS values in the run's record (Logger.log_episodes); call before log()."""
        returns = np.asarray(self.returns)  # [episodes] or [episodes, n_agents]
        values = {"return": (returns if returns.ndim == 1 else returns.sum(-1)).tolist()}
        values.update({key: list(found) for key, found in self.per_episode.items() if len(found) == self.n_episodes})
        logger.log_episodes(values, t_env)

    def log(self, logger, prefix: str, t_env: int) -> None:
        """Log return_mean/std, or with per-agent rewards (common_reward=False) EPyMARL's agent_<i>_return_mean/std
        and total_return_mean/std, and <key>_mean per info key (e.g. battle_won_mean, ep_length_mean); then reset."""
        returns = np.asarray(self.returns)  # [episodes] or [episodes, n_agents]
        if returns.ndim == 1:
            logger.log_stat(prefix + "return_mean", returns.mean(), t_env)
            logger.log_stat(prefix + "return_std", returns.std(), t_env)
        else:
            for agent_id in range(returns.shape[1]):
                logger.log_stat(f"{prefix}agent_{agent_id}_return_mean", returns[:, agent_id].mean(), t_env)
                logger.log_stat(f"{prefix}agent_{agent_id}_return_std", returns[:, agent_id].std(), t_env)
            logger.log_stat(prefix + "total_return_mean", returns.sum(-1).mean(), t_env)
            logger.log_stat(prefix + "total_return_std", returns.sum(-1).std(), t_env)
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

    def record(self, i: int, transition: Transition) -> None:
        """Account for one env step of env i."""
        reward = transition.reward  # the team's (a float) or each agent's (an array, common_reward=False)
        self.returns[i] += reward if isinstance(reward, np.ndarray) and reward.ndim else float(reward)
        self.lengths[i] += 1
        self.ended[i] = bool(transition.terminated)
        self.final_infos[i] = transition.info


def check_runner_preprocess(preprocess: dict | None) -> None:
    """Refuse a preprocess the runner would silently skip: it writes the env fields straight into
    the batch (BatchArrays), bypassing EpisodeBatch.update(); only "actions" goes through update()."""
    skipped = sorted(set(preprocess or {}) - {"actions"})
    if skipped:
        raise ValueError(f"the runner writes {', '.join(skipped)} straight into the batch and applies no "
                         f"preprocess to them; derive such fields where they are used")


class BatchRunner:
    """Runs `batch_size` envs for one episode each and returns the episodes as one EpisodeBatch.

    Subclasses set `self.envs` (InProcessEnvs, or anything with its interface) and env_info.
    """

    def __init__(self, args, logger):
        self.args = args
        self.logger = logger
        self.batch_size = args.batch_size_run
        # A resumed run builds its envs with the seed generation after the checkpoint's.
        self.first_seed_generation = getattr(args, "env_seed_generation", 0)
        self.t = 0
        self.t_env = 0
        self.train_stats = EpisodeStats()
        self.test_stats = EpisodeStats()
        self.log_train_stats_t = -args.runner_log_interval  # log after the first run
        self.n_test_episodes = rounded_test_nepisode(args.test_nepisode, self.batch_size)
        self.envs = None  # set by subclasses
        self.env_info = None  # set by subclasses once their envs exist
        self.new_batch = None
        self.mac = None
        self.batch = None
        self.arrays = None

    def setup(self, scheme: dict, groups: dict, preprocess: dict, mac) -> None:
        check_runner_preprocess(preprocess)
        self.new_batch = partial(EpisodeBatch, scheme, groups, self.batch_size, self.episode_limit + 1,
                                 preprocess=preprocess, device=self.args.device)
        self.mac = mac

    @property
    def episode_limit(self) -> int:
        return self.env_info["episode_limit"]

    @property
    def env_seeds(self) -> list:
        """The seed each env was (last) built with."""
        return self.envs.seeds

    @property
    def seed_generation(self) -> int:
        return self.envs.seed_generation

    def get_env_info(self) -> dict:
        return self.env_info

    def run(self, test_mode: bool = False) -> EpisodeBatch:
        """One episode per env; training runs advance t_env by the env steps taken."""
        self.batch = self.new_batch()
        self.arrays = BatchArrays(self.batch, shared=th.device(self.batch.device).type == "cpu")
        self.mac.init_hidden(batch_size=self.batch_size)
        self.t = 0
        episodes = _EpisodesInProgress(self.batch_size)
        acting = list(range(self.batch_size))  # envs whose row needs actions at self.t
        with torch_threads(ACTING_THREADS):
            self._store_observations(acting, self.envs.reset())
            while True:
                actions = self._select_actions(acting, test_mode)  # [len(acting), n_agents]
                rows = [k for k, i in enumerate(acting) if not episodes.ended[i]]  # positions in acting
                if not rows:
                    break
                self._check_within_limit()
                stepping = [acting[k] for k in rows]
                env_actions = actions if len(rows) == len(acting) else actions[rows]  # [len(stepping), n_agents]
                transitions = self.envs.step(stepping, env_actions)
                self._store_transitions(stepping, transitions, episodes)
                acting = stepping
        self._finish_run(episodes, test_mode)
        return self.batch

    def _select_actions(self, acting: list, test_mode: bool) -> np.ndarray:
        rows = self._rows(acting)  # a slice when all envs act: select_actions then indexes without a copy
        actions = self.mac.select_actions(self.batch, t_ep=self.t, t_env=self.t_env, bs=rows,
                                          test_mode=test_mode)  # [len(acting), n_agents]
        if isinstance(actions, tuple):  # a selector with save_probs: the probabilities it sampled from
            actions, probs = actions
            self.batch["probs"][rows, self.t] = probs.to(self.batch["probs"])  # [len(acting), n_agents, n_actions]
        if "actions" in self.batch.preprocess:  # update() also writes the derived field (e.g. one-hot)
            # [len(acting), 1 (time), n_agents]; not marking filled: the pre-transition data did
            self.batch.update({"actions": actions.unsqueeze(1)}, bs=rows, ts=self.t, mark_filled=False)
            return actions.cpu().numpy()
        actions = actions.cpu().numpy()  # [len(acting), n_agents]
        self.arrays.actions[rows, self.t, :, 0] = actions  # cast to the field's small int type
        self.arrays.push(self.arrays.ACTED, self.t)
        return actions

    def _rows(self, envs: list) -> list | slice:
        """Batch rows of `envs`: a slice when they are all the rows (a view, not a copy, when indexing)."""
        return slice(None) if len(envs) == self.batch_size else envs

    def _check_within_limit(self) -> None:
        if self.t >= self.episode_limit:
            raise RuntimeError(f"env '{self.args.env}' ran past its episode_limit {self.episode_limit}; "
                               f"it must end every episode within episode_limit steps")

    def _store_transitions(self, stepping: list, transitions: list, episodes: _EpisodesInProgress) -> None:
        """Post-transition data at t and the next observations at t + 1 of the stepped envs."""
        arrays, t = self.arrays, self.t
        for i, transition in zip(stepping, transitions):
            episodes.record(i, transition)
            arrays.reward[i, t] = transition.reward
            # A time-out (info["episode_limit"]) is not terminal: learners bootstrap from its last state.
            arrays.terminated[i, t] = transition.terminated and not transition.info.get("episode_limit", False)
        rows = self._rows(stepping)
        check_finite({"reward": arrays.reward[rows, t]}, stepping, self.env_seeds, self.args.env, t + 1)
        arrays.push(arrays.OUTCOMES, t)
        self.t += 1
        self._store_observations(stepping, [transition.observation for transition in transitions])

    def _store_observations(self, envs: list, observations: list) -> None:
        """Pre-transition data of `envs` at step t; marks those rows filled."""
        arrays, t = self.arrays, self.t
        for i, observation in zip(envs, observations):
            arrays.state[i, t] = observation.state
            arrays.avail_actions[i, t] = observation.avail_actions
            arrays.obs[i, t] = observation.obs
            arrays.filled[i, t] = 1
        rows = self._rows(envs)
        check_finite({"state": arrays.state[rows, t], "obs": arrays.obs[rows, t]}, envs, self.env_seeds,
                     self.args.env, t)
        arrays.push(arrays.OBSERVED, t)

    def _finish_run(self, episodes: _EpisodesInProgress, test_mode: bool) -> None:
        stats = self.test_stats if test_mode else self.train_stats
        for episode_return, length, info in zip(episodes.returns, episodes.lengths, episodes.final_infos):
            stats.add(episode_return, length, info)
        if test_mode:
            if len(stats.returns) >= self.n_test_episodes:
                stats.log_episodes(self.logger, self.t_env)
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
        return self.envs.get_stats()

    def save_replay(self) -> list:
        """Write each env's replay of its recent episodes; their paths (None where an env wrote none)."""
        return self.envs.save_replay()

    def close_env(self) -> None:
        self.envs.close()
