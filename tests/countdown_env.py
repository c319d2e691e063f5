"""A tiny deterministic env for the runner tests, importable by the parallel runner's workers.

With seed s an episode is meant to last 3 + s % 4 steps; with episode_limit 5 the seeds with
s % 4 == 3 are cut by the time limit (info["episode_limit"] = True unless flag_timeouts is False,
as SMAC with continuing_episode=False). Observations, state and
available actions encode (t, agent, seed), and the reward encodes the joint action, so any
misplaced row or step in a batch shows up in the stored values.
"""
import numpy as np

from envs.multiagentenv import MultiAgentEnv

N_AGENTS = 2
N_ACTIONS = 4
EPISODE_LIMIT = 5


def intended_length(seed: int) -> int:
    return 3 + seed % 4


class CountdownEnv(MultiAgentEnv):

    def __init__(self, seed: int = 0, fail_on_reset: bool = False, flag_timeouts: bool = True):
        self.n_agents = N_AGENTS
        self.n_actions = N_ACTIONS
        self.episode_limit = EPISODE_LIMIT
        self._seed = seed
        self.fail_on_reset = fail_on_reset
        self.flag_timeouts = flag_timeouts  # False: like SMAC with continuing_episode=False
        self.t = 0
        self.episodes = 0

    def reset(self):
        if self.fail_on_reset:
            raise ValueError("countdown env asked to fail")
        self.t = 0
        return self.get_obs(), self.get_state()

    def step(self, actions):
        actions = self._checked_actions(actions)
        reward = float(10 * actions[0] + actions[1])
        self.t += 1
        won = self.t == intended_length(self._seed)
        timed_out = not won and self.t == self.episode_limit
        if won or timed_out:
            self.episodes += 1
        info = {"battle_won": won}
        if timed_out and self.flag_timeouts:
            info["episode_limit"] = True
        return reward, won or timed_out, info

    def get_obs_agent(self, agent_id: int) -> np.ndarray:
        return np.array([self.t, agent_id, self._seed], dtype=np.float32)

    def get_obs_size(self) -> int:
        return 3

    def get_state(self) -> np.ndarray:
        return np.array([self.t, self._seed], dtype=np.float32)

    def get_state_size(self) -> int:
        return 2

    def get_avail_agent_actions(self, agent_id: int) -> np.ndarray:
        """Two actions available, shifting with time, agent and seed."""
        avail = np.zeros(self.n_actions, dtype=np.int64)
        first = (self.t + agent_id + self._seed) % self.n_actions
        avail[[first, (first + 1) % self.n_actions]] = 1
        return avail

    def get_stats(self) -> dict:
        return {"episodes": self.episodes}

    def seed(self):
        return self._seed
