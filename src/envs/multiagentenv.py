"""Base class for cooperative multi-agent environments, with SMAC's MultiAgentEnv interface.

Runners only talk to environments through this interface: per-step they read the global state,
every agent's observation and available-action mask, then call step() with one action per agent.
"""
from typing import Any

import numpy as np


class MultiAgentEnv:
    """Interface every environment in envs.REGISTRY implements.

    Subclasses set ``n_agents``, ``n_actions`` and ``episode_limit`` in their constructor and
    implement the per-agent getters; the all-agent getters and get_env_info() are derived here.
    """

    n_agents: int
    n_actions: int
    episode_limit: int

    def _missing(self, method: str) -> NotImplementedError:
        return NotImplementedError(f"{type(self).__name__} does not implement {method}()")

    # ---- episode control -------------------------------------------------------------------
    def reset(self) -> Any:
        """Start a new episode; returns (observations, state)."""
        raise self._missing("reset")

    def step(self, actions) -> tuple[float, bool, dict]:
        """Apply one action per agent; returns (reward, terminated, info).

        info["episode_limit"] is True only when the episode was cut by the time limit, so the
        learner must bootstrap instead of treating the last transition as terminal.
        """
        raise self._missing("step")

    # ---- observations and state --------------------------------------------------------------
    def get_obs_agent(self, agent_id: int) -> np.ndarray:
        raise self._missing("get_obs_agent")

    def get_obs(self) -> list[np.ndarray]:
        """All agents' observations, agent 0 first."""
        return [self.get_obs_agent(agent_id) for agent_id in range(self.n_agents)]

    def get_obs_size(self) -> int:
        raise self._missing("get_obs_size")

    def get_state(self) -> np.ndarray:
        raise self._missing("get_state")

    def get_state_size(self) -> int:
        raise self._missing("get_state_size")

    # ---- actions -----------------------------------------------------------------------------
    def get_avail_agent_actions(self, agent_id: int) -> np.ndarray:
        """0/1 mask of length n_actions: 1 where agent_id may take that action now."""
        raise self._missing("get_avail_agent_actions")

    def get_avail_actions(self) -> list[np.ndarray]:
        """All agents' available-action masks, agent 0 first."""
        return [self.get_avail_agent_actions(agent_id) for agent_id in range(self.n_agents)]

    def _checked_actions(self, actions) -> list[int]:
        """One int per agent from a list, numpy array or torch tensor (any device).

        Raises ValueError for a wrong count or an action the agent's mask does not allow, the
        same contract SMAC enforces.
        """
        actions = [int(action) for action in actions]
        if len(actions) != self.n_agents:
            raise ValueError(f"step() got {len(actions)} actions; expected one per agent ({self.n_agents})")
        for agent_id, action in enumerate(actions):
            avail = self.get_avail_agent_actions(agent_id)
            if not 0 <= action < len(avail) or not avail[action]:
                raise ValueError(f"agent {agent_id} cannot take action {action} now; "
                                 f"available: {np.flatnonzero(avail).tolist()}")
        return actions

    def get_total_actions(self) -> int:
        """The number of actions an agent could ever take (the action-mask length)."""
        return self.n_actions

    # ---- bookkeeping -------------------------------------------------------------------------
    def get_env_info(self) -> dict[str, int]:
        """Sizes the runner and the learner build their buffers and networks from."""
        return {
            "state_shape": self.get_state_size(),
            "obs_shape": self.get_obs_size(),
            "n_actions": self.get_total_actions(),
            "n_agents": self.n_agents,
            "episode_limit": self.episode_limit,
        }

    def get_stats(self) -> dict:
        return {}

    def seed(self) -> int | None:
        raise self._missing("seed")

    def render(self) -> Any:
        raise self._missing("render")

    def save_replay(self) -> str | None:
        """Write a replay of the recent episodes; returns its path (None when none was written)."""
        raise self._missing("save_replay")

    def close(self) -> None:
        """Release external resources; environments that hold none need not override this."""
