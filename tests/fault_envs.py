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


class StandInGameEnv(CountdownEnv):
    """CountdownEnv played next to a stand-in StarCraft II: its first reset builds an SC2Engine whose
    game is a real process (sc2_fakes.StandInGame, recording into `record_dir`), as StarCraft2Env's
    first reset does; close() closes the engine.

    fault "reset": reset raises once the game runs; "hang": reset hangs once the game runs; "launch":
    the game's join fails, so the engine fails while being built (the env never holds it); "" plays
    normally.
    """

    def __init__(self, seed: int = 0, record_dir: str = "", fault: str = ""):
        super().__init__(seed=seed)
        self.record_dir = record_dir
        self.fault = fault
        self.engine = None

    def reset(self):
        if self.engine is None:
            from envs.starcraft.sc2client.sc2_engine import SC2Engine  # pysc2 only where it is used
            from sc2_fakes import StandInGame

            fail_on = "join_game" if self.fault == "launch" else None
            self.engine = SC2Engine("3m", self._seed, launcher=StandInGame(self.record_dir, fail_on=fail_on))
        self.engine.reset()
        if self.fault == "reset":
            raise RuntimeError("stand-in env failed in reset")
        if self.fault == "hang":
            time.sleep(3600)
        return super().reset()

    def close(self):
        if self.engine is not None:
            self.engine.close()


class SlowResetEnv(CountdownEnv):
    """CountdownEnv whose resets number `slow_resets` (counted from 1) take `delay_s` seconds, as a
    first reset that launches StarCraft II does."""

    def __init__(self, seed: int = 0, delay_s: float = 0.0, slow_resets: tuple = (1,)):
        super().__init__(seed=seed)
        self.delay_s = delay_s
        self.slow_resets = tuple(slow_resets)
        self.resets = 0

    def reset(self):
        self.resets += 1
        if self.resets in self.slow_resets:
            time.sleep(self.delay_s)
        return super().reset()


class CloseFailsEnv(CountdownEnv):
    """CountdownEnv whose close() raises (and that fails in reset when fail_on_reset)."""

    def close(self):
        raise OSError("closing the countdown env failed")
