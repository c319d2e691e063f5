"""Running mean and variance of a stream of tensors (EPyMARL's standardise_rewards / standardise_returns)."""
import torch as th


class RunningMeanStd:
    """Mean and (population) variance over everything seen so far, per entry of the last dimension,
    merged batch by batch with the parallel-variance formula (Chan et al.). It starts at mean 0, variance 1
    with a weight of `epsilon` samples, as EPyMARL's does, so that the first batch is not divided by 0."""

    def __init__(self, shape: tuple, epsilon: float = 1e-4):
        self.mean = th.zeros(shape)
        self.var = th.ones(shape)
        self.count = epsilon

    def update(self, values: th.Tensor) -> None:
        """Merge `values` [..., shape]: each leading index is one sample. The batch's own variance is
        the unbiased one (torch's default), as in EPyMARL."""
        samples = values.reshape(-1, values.shape[-1])  # [n, shape]
        batch_mean, batch_var, batch_count = samples.mean(0), samples.var(0), samples.shape[0]
        delta = batch_mean - self.mean
        total = self.count + batch_count
        self.mean = self.mean + delta * batch_count / total
        self.var = (self.var * self.count + batch_var * batch_count
                    + delta.square() * self.count * batch_count / total) / total
        self.count = total

    def to(self, device) -> "RunningMeanStd":
        self.mean, self.var = self.mean.to(device), self.var.to(device)
        return self

    def state_dict(self) -> dict:
        return {"mean": self.mean.cpu(), "var": self.var.cpu(), "count": self.count}

    def load_state_dict(self, state: dict) -> None:
        device = self.mean.device
        self.mean, self.var, self.count = state["mean"].to(device), state["var"].to(device), state["count"]
