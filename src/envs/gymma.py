"""`gymma`: any Gymnasium or PettingZoo multi-agent task behind the MultiAgentEnv interface, with
EPyMARL's env_args (`key`, `time_limit`, `pretrained_wrapper`, `seed`) and reward settings.

    python src/main.py --config=qmix --env-config=gymma with env_args.time_limit=50 \
        env_args.key="lbforaging:Foraging-8x8-2p-3f-v3"

`key` is a Gymnasium id, "package:EnvId" importing the package that registers it (lbforaging, rware),
"pz-<family>-<env-name>" for a PettingZoo parallel env as EPyMARL names them
("pz-mpe-simple-spread-v3"; the MPE family comes from the maintained `mpe2` package), or
"vmas-<scenario>" for a VMAS scenario with discrete actions, one env ("vmas-balance"). Other env_args
go to the env's constructor (VMAS: the scenario's keyword arguments). As in EPyMARL's gymma wrapper:
- each agent's observation is flattened and zero-padded to the longest one; the state is all agents'
  padded observations joined, agent 0 first;
- an agent's actions are those of its own Discrete space, the rest of the longest space unavailable
  (and, where the env reports an "action_mask" for an agent in its info, only those it allows);
- the env is seeded once, when it is built (its RNG then runs on across resets);
- the episode is cut at `time_limit` steps, or earlier where the env ends it itself (or truncates it);
  as in EPyMARL a cut episode's last step is terminal (no bootstrap) unless bootstrap_time_limit is
  set, which marks it info["episode_limit"] so that the learner bootstraps, as PyMARL2 does on SMAC;
- the agents' rewards are summed or averaged into the team's (common_reward, reward_scalarisation), or
  with common_reward=False step() returns each agent's, an array [n_agents];
- `pretrained_wrapper` (EPyMARL's, for MPE's simple tag and simple adversary) takes one agent out of the
  team and plays it with a fixed policy (FixedPolicyAgent below).
"""
import difflib
import functools
import importlib
import pickle
import pkgutil
from typing import Any, Callable

import numpy as np

from .multiagentenv import MultiAgentEnv

PETTINGZOO_PREFIX = "pz-"
VMAS_PREFIX = "vmas-"
RETIRED = (1,)  # the action mask of an agent a PettingZoo env has retired: action 0 only
# PettingZoo families that moved to their own package (PettingZoo >= 1.25 raises on pettingzoo.mpe).
PETTINGZOO_MOVED = {"mpe": "mpe2"}
REWARD_SCALARISATIONS = ("sum", "mean")


class GymmaError(ValueError):
    """A gymma env_arg that names no env, or one this wrapper cannot play."""


def _gymnasium():
    """gymnasium, imported on use: the other envs do not need it."""
    import gymnasium

    return gymnasium


class _GymTask:
    """A Gymnasium multi-agent env: tuple spaces, one entry per agent; list rewards."""

    def __init__(self, key: str, kwargs: dict) -> None:
        self.env = self._make(key, kwargs)
        self.observation_spaces = list(self.env.observation_space)
        self.action_spaces = list(self.env.action_space)

    @staticmethod
    def _make(key: str, kwargs: dict):
        gym = _gymnasium()
        try:  # without gymnasium's env checker: it only warns, on the first step, and adds a layer to every step
            return gym.make(key, **{"disable_env_checker": True, **kwargs})
        except ModuleNotFoundError as error:
            raise GymmaError(_missing_package_message(key, error)) from None
        except gym.error.Error as error:
            raise GymmaError(_unknown_key_message(key, error)) from None

    def seed(self, seed: int) -> None:
        unwrapped = self.env.unwrapped
        if callable(getattr(unwrapped, "seed", None)):
            unwrapped.seed(seed)
        else:
            self.env.reset(seed=seed)

    def reset(self) -> tuple[list, dict]:
        observations, info = self.env.reset()
        return list(observations), info

    def step(self, actions: list[int]) -> tuple[list, list, bool, bool, dict]:
        observations, rewards, terminated, truncated, info = self.env.step(actions)
        rewards = list(rewards) if isinstance(rewards, (list, tuple)) or np.ndim(rewards) else [rewards]
        return list(observations), rewards, _all_done(terminated), _all_done(truncated), info

    def action_masks(self, info: dict) -> list | None:
        return info.get("action_mask")

    def close(self) -> None:
        self.env.close()


def _all_done(flags) -> bool:
    """A task's terminated or truncated: one bool (LBF, RWARE), or one per agent (all must be set)."""
    return flags if isinstance(flags, bool) else bool(np.all(flags))


class _VMASTask(_GymTask):
    """A VMAS scenario ("vmas-<scenario>") as EPyMARL builds it: one env (num_envs 1), discrete actions,
    VMAS's Gymnasium wrapper (tuple spaces, list rewards). VMAS keeps one random state for all its envs in
    a process (it swaps it with the global generators around each call, leaving those as they were), so
    each env follows its own seed only in a process of its own (the parallel runner's workers)."""

    @staticmethod
    def _make(key: str, kwargs: dict):
        try:
            import vmas
        except ModuleNotFoundError as error:
            raise GymmaError(_missing_package_message(key, error)) from None
        scenario = key[len(VMAS_PREFIX):]
        if scenario not in _vmas_scenarios():
            raise GymmaError(_unknown_key_message(key, ValueError(f"VMAS has no scenario {scenario!r}"),
                                                  [VMAS_PREFIX + name for name in _vmas_scenarios()]))
        return vmas.make_env(scenario, num_envs=1, continuous_actions=False, dict_spaces=False,
                             terminated_truncated=True, wrapper="gymnasium", **kwargs)


@functools.cache
def _vmas_scenarios() -> tuple[str, ...]:
    """The names of VMAS's scenarios (its scenarios/ modules, sub-folders included, as EPyMARL registers them);
    listed once per process, not for every env built."""
    folder = importlib.import_module("vmas.scenarios").__path__
    return tuple(sorted(info.name.rpartition(".")[2] for info in pkgutil.walk_packages(folder, "vmas.scenarios.")
                        if not info.ispkg and "__" not in info.name))


class _PettingZooTask:
    """A PettingZoo parallel env: dict spaces, observations and rewards by agent name. Agents the env
    has retired keep their last observation and receive reward 0. Unlike EPyMARL's wrapper, which
    replaces the rewards of an episode's last step by 0 (its env has retired every agent by then), the
    last step's rewards count."""

    def __init__(self, key: str, kwargs: dict) -> None:
        package, name = _pettingzoo_module(key)
        try:
            module = importlib.import_module(f"{package}.{name}")
        except ModuleNotFoundError as error:
            if error.name == package and package.startswith("pettingzoo."):
                raise GymmaError(f"env_args.key={key!r}: PettingZoo has no family {package.split('.')[1]!r}; "
                                 f"families: {', '.join(_pettingzoo_families())}") from None
            if error.name != f"{package}.{name}":  # the family's package, or something the env imports
                raise GymmaError(_missing_package_message(key, error)) from None
            raise GymmaError(_unknown_key_message(key, error, _pettingzoo_keys(key, package))) from None
        self.env = module.parallel_env(**kwargs)
        self.agents = list(self.env.possible_agents)
        self.observation_spaces = [self.env.observation_space(agent) for agent in self.agents]
        self.action_spaces = [self.env.action_space(agent) for agent in self.agents]
        self.last_observations: dict = {}

    def seed(self, seed: int) -> None:
        self.env.reset(seed=seed)  # PettingZoo envs take their seed with a reset, as EPyMARL seeds them

    def reset(self) -> tuple[list, dict]:
        observations, infos = self.env.reset()
        self.last_observations = dict(observations)
        return [observations[agent] for agent in self.agents], infos

    def step(self, actions: list[int]) -> tuple[list, list, bool, bool, dict]:
        live = set(self.env.agents)
        observations, rewards, terminated, truncated, infos = self.env.step(
            {agent: action for agent, action in zip(self.agents, actions) if agent in live})
        self.last_observations.update(observations)
        done = all(terminated.get(agent, True) for agent in self.agents)
        cut = all(terminated.get(agent, True) or truncated.get(agent, True) for agent in self.agents)
        return ([self.last_observations[agent] for agent in self.agents],
                [float(rewards.get(agent, 0.0)) for agent in self.agents], done, cut and not done, infos)

    def action_masks(self, infos: dict) -> list | None:
        """The env's action_mask per agent; an agent the env has retired may only take action 0 (as a
        dead SMAC unit its no-op), which it never sends to the env."""
        live = set(self.env.agents)
        masks = [infos.get(agent, {}).get("action_mask") if agent in live else RETIRED for agent in self.agents]
        return None if all(mask is None for mask in masks) else masks

    def close(self) -> None:
        self.env.close()


# EPyMARL's pretrained_wrapper: the task it plays (its key without the version), the agent (index among the
# task's agents) and how
TAG, ADVERSARY = "pz-mpe-simple-tag", "pz-mpe-simple-adversary"
FIXED_POLICY_WRAPPERS = {"FrozenTag": (TAG, -1, "noop"), "RandomTag": (TAG, -1, "random"),
                         "PretrainedTag": (TAG, -1, "trained"), "PretrainedAdversary": (ADVERSARY, 0, "trained")}
EPYMARL_WEIGHTS = {"PretrainedTag": "prey_params.pt", "PretrainedAdversary": "adv_params.pt"}
BATCH_NORM_EPS = 1e-5  # torch's BatchNorm1d default, which EPyMARL's trained policies were saved with


class FixedPolicyAgent:
    """EPyMARL's pretrained_wrapper around a task: one of its agents (`index`: MPE simple tag's prey, the
    last; simple adversary's adversary, the first) acts by a fixed policy and leaves the team, its
    observation, action space and reward dropped; the others learn. The policy is the no-op (FrozenTag),
    a uniformly random action (RandomTag; drawn from the env's seed, where EPyMARL's is unseeded) or a
    trained network (PretrainedTag, PretrainedAdversary: EPyMARL's DDPG actors, from the weights file it
    ships, given as env_args.pretrained_params; TrainedPolicy)."""

    def __init__(self, task: Any, index: int, choose: Callable[[Any], int]) -> None:
        self.task = task
        self.index = index % len(task.action_spaces)
        self.choose = choose  # the fixed agent's observation -> its action
        self.observation_spaces = self._others(task.observation_spaces)
        self.action_spaces = self._others(task.action_spaces)
        self.fixed_observation = None

    def _others(self, values: list) -> list:
        return [value for agent, value in enumerate(values) if agent != self.index]

    def seed(self, seed: int) -> None:
        self.task.seed(seed)
        if hasattr(self.choose, "seed"):
            self.choose.seed(seed)

    def reset(self) -> tuple[list, dict]:
        observations, info = self.task.reset()
        self.fixed_observation = observations[self.index]
        return self._others(observations), info

    def step(self, actions: list[int]) -> tuple[list, list, bool, bool, dict]:
        actions = list(actions)
        actions.insert(self.index, self.choose(self.fixed_observation))
        observations, rewards, terminated, truncated, info = self.task.step(actions)
        self.fixed_observation = observations[self.index]
        return self._others(observations), self._others(rewards), terminated, truncated, info

    def action_masks(self, info: dict) -> list | None:
        masks = self.task.action_masks(info)
        return None if masks is None else self._others(masks)

    def close(self) -> None:
        self.task.close()


class RandomAction:
    """A uniformly random action of a Discrete space, from its own generator (seeded with the env)."""

    def __init__(self, n_actions: int) -> None:
        self.n_actions = n_actions
        self.rng = np.random.default_rng()

    def seed(self, seed: int) -> None:
        # a stream of its own: MPE seeds its world with a generator of the same seed
        self.rng = np.random.default_rng(np.random.SeedSequence(seed).spawn(1)[0])

    def __call__(self, observation: Any) -> int:
        return int(self.rng.integers(self.n_actions))


class TrainedPolicy:
    """EPyMARL's pretrained MPE actor (its envs/pretrained/ddpg.py): batch-normalised inputs (BatchNorm1d in
    eval mode: its saved running statistics), two ReLU layers and a linear output, acting by argmax;
    evaluated in NumPy (float32) from the weights torch saved (reading the file needs torch)."""

    PARAMETERS = ("in_fn.running_mean", "in_fn.running_var", "in_fn.weight", "in_fn.bias", "fc1.weight", "fc1.bias",
                  "fc2.weight", "fc2.bias", "fc3.weight", "fc3.bias")

    def __init__(self, path: str, entry: int, obs_size: int, wrapper: str) -> None:
        try:
            import torch

            saved = torch.load(path, map_location="cpu", weights_only=True)
            params = {name: value.numpy().astype(np.float32) for name, value in
                      saved["agent_params"][entry]["policy"].items() if value.dtype.is_floating_point}
        except (OSError, KeyError, IndexError, TypeError, AttributeError, RuntimeError, ModuleNotFoundError,
                pickle.UnpicklingError) as error:
            reason = str(error).strip().splitlines()[0] if str(error).strip() else ""
            raise GymmaError(f"env_args.pretrained_params={path!r}: cannot read {wrapper}'s policy from it "
                             f"({type(error).__name__}: {reason}); give EPyMARL's {EPYMARL_WEIGHTS[wrapper]}") from None
        missing = sorted(set(self.PARAMETERS) - set(params))
        if missing:
            raise GymmaError(f"env_args.pretrained_params={path!r}: {wrapper}'s policy in it lacks {', '.join(missing)}; "
                             f"give EPyMARL's {EPYMARL_WEIGHTS[wrapper]}")
        self.params = params
        if params["fc1.weight"].shape[1] != obs_size:
            raise GymmaError(f"env_args.pretrained_params={path!r}: the policy reads {params['fc1.weight'].shape[1]} "
                             f"observation values, the agent it plays sees {obs_size}: {wrapper} plays "
                             f"{'pz-mpe-simple-tag-v3' if wrapper == 'PretrainedTag' else 'pz-mpe-simple-adversary-v3'}")

    def __call__(self, observation: Any) -> int:
        p = self.params
        x = np.asarray(observation, dtype=np.float32)
        x = (x - p["in_fn.running_mean"]) / np.sqrt(p["in_fn.running_var"] + np.float32(BATCH_NORM_EPS)) \
            * p["in_fn.weight"] + p["in_fn.bias"]
        x = np.maximum(p["fc1.weight"] @ x + p["fc1.bias"], 0)
        x = np.maximum(p["fc2.weight"] @ x + p["fc2.bias"], 0)
        return int(np.argmax(p["fc3.weight"] @ x + p["fc3.bias"]))


def _no_op(observation: Any) -> int:
    """FrozenTag's prey: action 0 (MPE's no-op) whatever it sees."""
    return 0


def _with_fixed_policy_agent(task: Any, key: str, wrapper: str, params_path: str | None) -> FixedPolicyAgent:
    """`task` (of env `key`) with EPyMARL's pretrained_wrapper `wrapper` around it (FixedPolicyAgent)."""
    if wrapper not in FIXED_POLICY_WRAPPERS:
        raise GymmaError(f"env_args.pretrained_wrapper={wrapper!r}; EPyMARL's are {', '.join(FIXED_POLICY_WRAPPERS)}")
    task_key, index, kind = FIXED_POLICY_WRAPPERS[wrapper]
    if key.rpartition("-v")[0] != task_key:
        raise GymmaError(f"env_args.pretrained_wrapper={wrapper!r} plays an agent of MPE's {task_key}-v3, not of "
                         f"{key}; leave it null there")
    space = task.action_spaces[index]
    if kind == "noop":
        choose = _no_op
    elif kind == "random":
        choose = RandomAction(_action_count(space))
    elif not params_path:
        raise GymmaError(f"env_args.pretrained_wrapper={wrapper!r} plays its agent with a policy EPyMARL trained: "
                         f"give its weights as env_args.pretrained_params=PATH (EPyMARL ships them in its repository "
                         f"as src/envs/pretrained/{EPYMARL_WEIGHTS[wrapper]}; marlkit does not copy them)")
    else:
        choose = TrainedPolicy(params_path, index, _flat_size(task.observation_spaces[index]), wrapper)
    return FixedPolicyAgent(task, index, choose)


def _pettingzoo_module(key: str) -> tuple[str, str]:
    """("mpe2", "simple_spread_v3") for "pz-mpe-simple-spread-v3": EPyMARL's names for PettingZoo's
    <family>.<env module>, the family's package being where it lives now."""
    family, _, env_name = key[len(PETTINGZOO_PREFIX):].partition("-")
    if not family or not env_name:
        raise GymmaError(f"env_args.key={key!r}: a PettingZoo key reads pz-<family>-<env-name>, e.g. "
                         f"pz-mpe-simple-spread-v3")
    return PETTINGZOO_MOVED.get(family, f"pettingzoo.{family}"), env_name.replace("-", "_")


def _pettingzoo_families() -> list[str]:
    """The env families of the installed PettingZoo, and those that moved to packages of their own."""
    import pettingzoo

    families = {module.name for module in pkgutil.iter_modules(pettingzoo.__path__) if module.ispkg}
    return sorted((families - {"test", "utils", "env_registry"}) | set(PETTINGZOO_MOVED))


def _pettingzoo_keys(key: str, package: str) -> list[str]:
    """The pz- keys of the envs in `package` (none when it is not installed)."""
    try:
        path = importlib.import_module(package).__path__
    except ModuleNotFoundError:
        return []
    family = key[len(PETTINGZOO_PREFIX):].partition("-")[0]
    return [f"{PETTINGZOO_PREFIX}{family}-{module.name.replace('_', '-')}" for module in pkgutil.iter_modules(path)
            if module.name[-1].isdigit()]


def _missing_package_message(key: str, error: ModuleNotFoundError) -> str:
    package = error.name or key.partition(":")[0]  # gymnasium names no module when the key's package is absent
    return f"env_args.key={key!r} needs the package {package!r}, which is not installed (pip install {package})"


def _unknown_key_message(key: str, error: Exception, known: list[str] | None = None) -> str:
    """One line: what is wrong with `key`, with the ids closest to it (the Gymnasium registry's unless
    `known` is given)."""
    known = list(_gymnasium().registry) if known is None else known
    close = difflib.get_close_matches(key.split(":")[-1], known, n=3, cutoff=0.6)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    return f"env_args.key={key!r} names no env ({str(error).splitlines()[0]}){hint}"


def _flat_size(space) -> int:
    return int(_gymnasium().spaces.flatdim(space))


def _action_count(space) -> int:
    if not hasattr(space, "n"):
        raise GymmaError(f"gymma plays agents with Discrete action spaces, not {space}")
    return int(space.n)


class GymmaEnv(MultiAgentEnv):
    """A Gymnasium or PettingZoo multi-agent task with EPyMARL's gymma semantics (module docstring)."""

    def __init__(self, key: str | None = None, time_limit: int = 100, pretrained_wrapper: str | None = None,
                 seed: int | None = None, common_reward: bool = True, reward_scalarisation: str = "sum",
                 bootstrap_time_limit: bool = False, pretrained_params: str | None = None, **kwargs: Any) -> None:
        if not key:
            raise GymmaError("gymma needs env_args.key: a Gymnasium id such as \"lbforaging:Foraging-8x8-2p-3f-v3\", "
                             "a PettingZoo one such as pz-mpe-simple-spread-v3, or a VMAS one such as vmas-balance")
        if reward_scalarisation not in REWARD_SCALARISATIONS:
            raise GymmaError(f"reward_scalarisation={reward_scalarisation!r}; choose one of: "
                             f"{', '.join(REWARD_SCALARISATIONS)}")
        if int(time_limit) < 1:
            raise GymmaError(f"env_args.time_limit={time_limit} must be at least 1")
        task_type = (_PettingZooTask if key.startswith(PETTINGZOO_PREFIX)
                     else _VMASTask if key.startswith(VMAS_PREFIX) else _GymTask)
        self.task = task_type(key, kwargs)
        if pretrained_wrapper:
            self.task = _with_fixed_policy_agent(self.task, key, pretrained_wrapper, pretrained_params)
        self.key = key
        self.n_agents = len(self.task.action_spaces)
        self.episode_limit = int(time_limit)
        self.bootstrap_time_limit = bool(bootstrap_time_limit)
        self.common_reward = bool(common_reward)
        self.reward_scalarisation = reward_scalarisation
        self.agent_actions = [_action_count(space) for space in self.task.action_spaces]  # [agents]
        self.n_actions = max(self.agent_actions)
        self.obs_size = max(_flat_size(space) for space in self.task.observation_spaces)
        self.steps = 0
        self.observations = np.zeros((self.n_agents, self.obs_size), dtype=np.float32)  # [agents, obs]
        self.unmasked = self._unmasked_actions()  # [agents, actions]: each agent's own actions
        # a Box observation is flattened as gymnasium's flatten does it (in the space's dtype), without its dispatch
        self.box_dtypes = [space.dtype if isinstance(space, _gymnasium().spaces.Box) else None
                           for space in self.task.observation_spaces]
        self.avail = self.unmasked.copy()
        if seed is not None:
            self.task.seed(int(seed))

    def _unmasked_actions(self) -> np.ndarray:
        """[agents, actions] 0/1: each agent's own actions, the padding unavailable."""
        avail = np.zeros((self.n_agents, self.n_actions), dtype=np.int64)
        for agent_id, count in enumerate(self.agent_actions):
            avail[agent_id, :count] = 1
        return avail

    def _observe(self, observations: list, info: dict) -> None:
        self.observations[:] = 0.0
        for agent_id, (space, observation) in enumerate(zip(self.task.observation_spaces, observations)):
            dtype = self.box_dtypes[agent_id]
            flat = (_gymnasium().spaces.flatten(space, observation) if dtype is None
                    else np.asarray(observation, dtype=dtype).ravel())
            self.observations[agent_id, :flat.shape[0]] = flat
        np.copyto(self.avail, self.unmasked)
        masks = self.task.action_masks(info)
        for agent_id, mask in enumerate(masks or []):
            if mask is not None:
                mask = np.asarray(mask, dtype=np.int64)[:self.n_actions]
                self.avail[agent_id, :len(mask)] &= mask
                self.avail[agent_id, len(mask):] = 0

    def reset(self) -> tuple[list[np.ndarray], np.ndarray]:
        self.steps = 0
        self._observe(*self.task.reset())
        return self.get_obs(), self.get_state()

    def step(self, actions) -> tuple[float | np.ndarray, bool, dict]:
        actions = self._checked_actions(actions)
        observations, rewards, terminated, truncated, info = self.task.step(actions)
        self.steps += 1
        self._observe(observations, info)
        cut = not terminated and (truncated or self.steps >= self.episode_limit)
        # EPyMARL stores a cut episode's last step as terminal; with bootstrap_time_limit the learner
        # bootstraps there instead (info["episode_limit"]), as PyMARL2 does on SMAC.
        bootstrap = cut and self.bootstrap_time_limit
        return self._reward(rewards), terminated or cut, {"episode_limit": True} if bootstrap else {}

    def _reward(self, rewards: list) -> float | np.ndarray:
        """The team's reward (common_reward), or each agent's [n_agents] (float32)."""
        if not self.common_reward:
            if len(rewards) != self.n_agents:
                raise GymmaError(f"{self.key} gives one team reward, not one per agent: common_reward=False needs "
                                 f"a task with per-agent rewards")
            return np.asarray(rewards, dtype=np.float32)
        total = float(np.sum(rewards))
        return total / len(rewards) if self.reward_scalarisation == "mean" else total

    def get_obs(self) -> np.ndarray:
        """All agents' observations [n_agents, obs] in one array (the runner's layout: no per-agent copies)."""
        return self.observations.copy()

    def get_obs_agent(self, agent_id: int) -> np.ndarray:
        return self.observations[agent_id].copy()

    def get_obs_size(self) -> int:
        return self.obs_size

    def get_state(self) -> np.ndarray:
        return self.observations.reshape(-1).copy()  # [agents * obs]

    def get_state_size(self) -> int:
        return self.n_agents * self.obs_size

    def get_avail_actions(self) -> np.ndarray:
        """All agents' available actions [n_agents, n_actions] in one array."""
        return self.avail.copy()

    def get_avail_agent_actions(self, agent_id: int) -> np.ndarray:
        return self.avail[agent_id].copy()

    def get_total_actions(self) -> int:
        return self.n_actions

    def seed(self) -> int | None:
        return None  # seeded once when built (env_args.seed)

    def close(self) -> None:
        self.task.close()
