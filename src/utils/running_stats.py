"""Running mean and variance of a stream of tensors (EPyMARL's standardise_rewards / standardise_returns, and
benellis3/mappo's input normalisation: RunningNormaliser)."""
import torch as th
import torch.nn as nn

NORMALISER_EPSILON = 1e-6  # benellis3/mappo's: x is divided by sqrt(var + 1e-6)


def merged_moments(mean: th.Tensor, var: th.Tensor, count: float, values: th.Tensor) -> tuple:
    """(mean, var, count) after merging `values` [..., size] (each leading index one sample) into the running
    mean and (population) variance of `count` samples, with the parallel-variance formula (Chan et al.);
    the batch's own variance is the unbiased one (torch's default), as in EPyMARL and benellis3/mappo."""
    samples = values.reshape(-1, values.shape[-1])  # [n, size]
    batch_mean, batch_var, batch_count = samples.mean(0), samples.var(0), samples.shape[0]
    delta = batch_mean - mean
    total = count + batch_count
    merged_var = (var * count + batch_var * batch_count + delta.square() * count * batch_count / total) / total
    return mean + delta * batch_count / total, merged_var, total


class RunningMeanStd:
    """Mean and (population) variance over everything seen so far, per entry of the last dimension,
    merged batch by batch with the parallel-variance formula (Chan et al.). It starts at mean 0, variance 1
    with a weight of `epsilon` samples, as EPyMARL's does, so that the first batch is not divided by 0."""

    def __init__(self, shape: tuple, epsilon: float = 1e-4):
        self.mean = th.zeros(shape)
        self.var = th.ones(shape)
        self.count = epsilon

    def update(self, values: th.Tensor) -> None:
        """Merge `values` [..., shape]: each leading index is one sample (merged_moments)."""
        self.mean, self.var, self.count = merged_moments(self.mean, self.var, self.count, values)

    def to(self, device) -> "RunningMeanStd":
        self.mean, self.var = self.mean.to(device), self.var.to(device)
        return self

    def state_dict(self) -> dict:
        return {"mean": self.mean.cpu(), "var": self.var.cpu(), "count": self.count}

    def load_state_dict(self, state: dict) -> None:
        device = self.mean.device
        self.mean, self.var, self.count = state["mean"].to(device), state["var"].to(device), state["count"]


class RunningNormaliser(nn.Module):
    """benellis3/mappo's running normalisation of the agents' observations and of the state
    (src/components/running_mean_std.py; applied in its controllers/basic_controller.py and
    learners/trust_region_learner.py): x -> (x - mean) / sqrt(var + 1e-6) per entry of the last dimension,
    with RunningMeanStd's statistics (mean 0, variance 1 and a weight of 1e-4 samples at the start). They are
    buffers, so that they are saved in the module's state_dict and follow it to the GPU."""

    def __init__(self, size: int, epsilon: float = 1e-4):
        super().__init__()
        self.register_buffer("mean", th.zeros(size))
        self.register_buffer("var", th.ones(size))
        self.register_buffer("count", th.tensor(epsilon, dtype=th.float64))

    @th.no_grad()
    def update(self, values: th.Tensor) -> None:
        """Merge the samples `values` [n, size] (merged_moments). Fewer than two leave the statistics as they
        are: their unbiased variance is undefined."""
        if values.shape[0] < 2:
            return
        mean, var, count = merged_moments(self.mean, self.var, self.count.item(), values.float())
        self.mean.copy_(mean)
        self.var.copy_(var)
        self.count.fill_(count)

    def forward(self, values: th.Tensor) -> th.Tensor:
        """values [..., size] normalised by the running statistics."""
        return (values - self.mean) / th.sqrt(self.var + NORMALISER_EPSILON)


class Standardisation:
    """EPyMARL's two optional standardisations, as its learners apply them:

    - standardise_rewards: rewards are divided, after subtracting their running mean, by their running
      standard deviation (statistics updated with each batch first, padded steps included, as EPyMARL);
    - standardise_returns: the target networks' values are de-standardised (``values``) before they join
      the rewards into returns, and the returns are standardised by their own running statistics
      (``returns``), so that the trained network sees returns of mean 0 and variance 1.

    Their statistics are the learner's state (``state_dict``): a resumed run continues them."""

    NAMES = (("reward_stats", "standardise_rewards"), ("return_stats", "standardise_returns"))

    def __init__(self, standardise_rewards: bool, standardise_returns: bool, reward_shape: tuple,
                 return_shape: tuple):
        self.reward_stats = RunningMeanStd(reward_shape) if standardise_rewards else None
        self.return_stats = RunningMeanStd(return_shape) if standardise_returns else None

    @staticmethod
    def _standardised(stats: RunningMeanStd | None, values: th.Tensor) -> th.Tensor:
        if stats is None:
            return values
        stats.update(values)
        return (values - stats.mean) / th.sqrt(stats.var)

    def rewards(self, rewards: th.Tensor) -> th.Tensor:
        """Rewards [..., reward_shape] standardised (statistics updated with them first), or unchanged."""
        return self._standardised(self.reward_stats, rewards)

    def returns(self, returns: th.Tensor) -> th.Tensor:
        """Returns [..., return_shape] standardised (statistics updated with them first), or unchanged."""
        return self._standardised(self.return_stats, returns)

    def values(self, values: th.Tensor) -> th.Tensor:
        """Values a network learned on standardised returns, on the returns' own scale (or unchanged)."""
        if self.return_stats is None:
            return values
        return values * th.sqrt(self.return_stats.var) + self.return_stats.mean

    def to(self, device) -> "Standardisation":
        for name, _ in self.NAMES:
            if getattr(self, name) is not None:
                getattr(self, name).to(device)
        return self

    def state_dict(self) -> dict:
        """{"reward_stats": ..., "return_stats": ...}, each only when it is kept."""
        return {name: getattr(self, name).state_dict() for name, _ in self.NAMES if getattr(self, name) is not None}

    def load_state_dict(self, state: dict) -> None:
        """Restore state_dict's (other keys of `state` are ignored); statistics saved under other
        standardise_rewards / standardise_returns settings are refused (ValueError), as they would be
        missing or left unused."""
        for name, setting in self.NAMES:
            stats = getattr(self, name)
            if (stats is None) != (name not in state):
                raise ValueError(f"the checkpoint was trained with {setting}={name in state}: resume it with the "
                                 f"same setting")
            if stats is not None:
                stats.load_state_dict(state[name])
