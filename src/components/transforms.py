"""Preprocessing transforms applied by EpisodeBatch.update when a field is written.

A preprocess entry maps a scheme key to (new_key, [transforms]); for example
``{"actions": ("actions_onehot", [OneHot(n_actions)])}`` keeps a one-hot copy of the actions.
"""
from abc import ABC, abstractmethod

import torch as th


class Transform(ABC):
    @abstractmethod
    def transform(self, tensor: th.Tensor) -> th.Tensor:
        """Map stored values to the derived field's values."""

    @abstractmethod
    def infer_output_info(self, vshape_in: tuple, dtype_in: th.dtype) -> tuple[tuple, th.dtype]:
        """Return (vshape, dtype) of the derived field, so the batch can allocate it up front."""


class OneHot(Transform):
    """Integer indices [..., 1] → float one-hot vectors [..., out_dim]."""

    def __init__(self, out_dim: int):
        if not isinstance(out_dim, int) or out_dim < 1:
            raise ValueError(f"OneHot out_dim must be a positive int, got {out_dim!r}")
        self.out_dim = out_dim

    def transform(self, tensor: th.Tensor) -> th.Tensor:
        onehot = tensor.new_zeros(*tensor.shape[:-1], self.out_dim)  # [..., out_dim]
        onehot.scatter_(-1, tensor.long(), 1)
        return onehot.float()

    def infer_output_info(self, vshape_in: tuple, dtype_in: th.dtype) -> tuple[tuple, th.dtype]:
        return (self.out_dim,), th.float32
