"""PyMARL2's ValueNorm (IPPO's ``use_value_norm``): the critic learns normalised returns.

Running first and second moments of the value targets, updated once per train call as exponential
moving averages with weight beta, debiased as Adam debiases its moments:

    m <- beta m + (1 - beta) mean(x),   s <- beta s + (1 - beta) mean(x^2),   d <- beta d + (1 - beta)
    mean = m / max(d, epsilon),   var = max(s / max(d, epsilon) - mean^2, 0.01)

normalize(x) = (x - mean) / sqrt(var) and denormalize is its inverse. The moments are buffers, so
they are saved and loaded with the learner's checkpoint (PyMARL2 saves none: a reloaded IPPO critic
meets fresh statistics).
"""
import torch as th
import torch.nn as nn

BETA = 0.99999
EPSILON = 1e-5
MIN_VARIANCE = 1e-2


class ValueNorm(nn.Module):
    def __init__(self, beta: float = BETA, epsilon: float = EPSILON):
        super().__init__()
        self.beta = beta
        self.epsilon = epsilon
        self.register_buffer("running_mean", th.zeros(1))
        self.register_buffer("running_mean_sq", th.zeros(1))
        self.register_buffer("debiasing_term", th.zeros(()))

    def mean_var(self) -> tuple[th.Tensor, th.Tensor]:
        debias = self.debiasing_term.clamp(min=self.epsilon)
        mean = self.running_mean / debias
        return mean, (self.running_mean_sq / debias - mean ** 2).clamp(min=MIN_VARIANCE)

    @th.no_grad()
    def update(self, values: th.Tensor) -> None:
        """Fold the batch of values (any shape: every entry counts once) into the running moments."""
        values = values.float()
        self.running_mean.mul_(self.beta).add_((1 - self.beta) * values.mean())
        self.running_mean_sq.mul_(self.beta).add_((1 - self.beta) * values.pow(2).mean())
        self.debiasing_term.mul_(self.beta).add_(1 - self.beta)

    def normalize(self, values: th.Tensor) -> th.Tensor:
        mean, var = self.mean_var()
        return (values - mean) / var.sqrt()

    def denormalize(self, values: th.Tensor) -> th.Tensor:
        mean, var = self.mean_var()
        return values * var.sqrt() + mean
