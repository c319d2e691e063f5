"""What EPyMARL's learners share around its reward and return standardisation (utils/running_stats.py):
the statistics' set-up from the config, their device, their place in the learner's saved state, and the
batch's valid steps with every agent's (standardised) reward."""
from types import SimpleNamespace

import torch as th

from components.episode_buffer import EpisodeBatch
from utils.running_stats import Standardisation

from .q_learner import Transitions, batch_transitions


class StandardisedLearner:
    """Mixin, listed before the learner's base class: call _init_standardisation in __init__."""

    def _init_standardisation(self, args: SimpleNamespace, return_shape: tuple) -> None:
        """standardise_rewards / standardise_returns statistics: of the team's reward, or each agent's
        (common_reward=False), and of returns of `return_shape`."""
        reward_shape = (1,) if args.common_reward else (args.n_agents,)
        self.standardisation = Standardisation(args.standardise_rewards, args.standardise_returns, reward_shape,
                                               return_shape)

    def _prepare(self, batch: EpisodeBatch, t_env: int) -> tuple[Transitions, th.Tensor, th.Tensor] | None:
        """The batch's transitions, every agent's (standardised) reward and the valid-step mask [bs, T-1, n];
        None (logged) when the batch has no valid step."""
        data = batch_transitions(batch)
        n_agents = self.args.n_agents
        mask = data.mask.expand(-1, -1, n_agents)  # [bs, T-1, n]
        if mask.sum() == 0:
            self.logger.console_logger.error(f"{self.args.learner}: no valid step in the batch at t_env {t_env}")
            return None
        # [bs, T-1, 1] (a team reward goes to every agent), or [bs, T-1, n] with common_reward=False
        rewards = self.standardisation.rewards(data.rewards).expand(-1, -1, n_agents)  # [bs, T-1, n]
        return data, rewards, mask

    def cuda(self) -> None:
        super().cuda()
        self.standardisation.to("cuda")

    def state_dict(self) -> dict:
        """The base learner's state and the running reward / return statistics."""
        return {**super().state_dict(), **self.standardisation.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        """Restore state_dict's; a checkpoint trained with other standardise_rewards / standardise_returns
        settings is refused (ValueError)."""
        super().load_state_dict(state)
        self.standardisation.load_state_dict(state)
