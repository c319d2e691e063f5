"""Exploration-rate schedules indexed by environment steps (t_env)."""
import math


class DecayThenFlatSchedule:
    """Decays from `start` to `finish` over `time_length` steps, then stays at `finish`.

    decay="linear": start - (start - finish) * T / time_length, floored at finish.
    decay="exp":    exp(-T / scale), with scale chosen so the value reaches `finish` at
                    T = time_length; clipped to [finish, start] (the curve itself starts at 1).
    """

    DECAYS = ("linear", "exp")

    def __init__(self, start: float, finish: float, time_length: float, decay: str = "linear"):
        if decay not in self.DECAYS:
            raise ValueError(f"unknown decay '{decay}'; known decays: {', '.join(self.DECAYS)}")
        if time_length <= 0:
            raise ValueError(f"schedule time_length must be > 0 steps, got {time_length}")
        self.start = start
        self.finish = finish
        self.time_length = time_length
        self.decay = decay
        self.delta = (start - finish) / time_length
        # With finish <= 0 the exp curve can never reach it; PyMARL2 then uses scale 1. With finish >= 1
        # it is reached at once (exp(-T / inf) = 1, clipped to [finish, start]; PyMARL2's numpy gives the same).
        if finish >= 1:
            self.exp_scaling = math.inf
        else:
            self.exp_scaling = -time_length / math.log(finish) if finish > 0 else 1.0

    def eval(self, T: float) -> float:
        if self.decay == "linear":
            return max(self.finish, self.start - self.delta * T)
        return min(self.start, max(self.finish, math.exp(-T / self.exp_scaling)))
