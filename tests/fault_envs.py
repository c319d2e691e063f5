"""Faulty variants of the countdown env (tests/countdown_env.py) for the fault tests; importable by
the parallel runner's worker processes."""
import os
import time

import numpy as np

from countdown_env import CountdownEnv


class FaultyCountdownEnv(CountdownEnv):
    """CountdownEnv that misbehaves at episode step `fault_step` (counted from 1) when its seed is in
    `fault_seeds` (all seeds when None):
    fault "hang" sleeps forever, "exit" ends the process, "nan_reward"/"inf_obs" return a
    non-finite value. A restarted worker gets a new seed, so faults limited to some seeds happen once."""

    def __init__(self, seed: int = 0, fault: str = "hang", fault_step: int = 1, fault_seeds: list | None = None):
        super().__init__(seed=seed)
        self.fault = fault
        self.fault_step = fault_step
        self.faulty = fault_seeds is None or seed in fault_seeds
        self.inf_obs = False

    def step(self, actions):
        reward, terminated, info = super().step(actions)
        if self.faulty and self.t == self.fault_step:
            if self.fault == "hang":
                time.sleep(3600)
            elif self.fault == "exit":
                os._exit(3)
            elif self.fault == "nan_reward":
                reward = float("nan")
            elif self.fault == "inf_obs":
                self.inf_obs = True
        return reward, terminated, info

    def reset(self):
        self.inf_obs = False
        return super().reset()

    def get_obs_agent(self, agent_id: int) -> np.ndarray:
        obs = super().get_obs_agent(agent_id)
        if self.inf_obs:
            obs[0] = np.inf
        return obs
