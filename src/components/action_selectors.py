"""Action selectors: turn per-agent Q-values or policies into actions. REGISTRY maps config names to classes."""
from types import SimpleNamespace

import torch as th
from torch.distributions import Categorical

from .epsilon_schedules import DecayThenFlatSchedule


class EpsilonGreedyActionSelector:
    """Each agent independently takes a uniformly random *available* action with probability
    epsilon, otherwise the available action with the highest Q-value.

    Epsilon follows a linear DecayThenFlatSchedule(epsilon_start, epsilon_finish,
    epsilon_anneal_time) of t_env. In test mode epsilon is args.test_noise (0.0 unless set),
    i.e. evaluation is greedy.
    """

    def __init__(self, args: SimpleNamespace):
        self.args = args
        self.schedule = DecayThenFlatSchedule(args.epsilon_start, args.epsilon_finish,
                                              args.epsilon_anneal_time, decay="linear")
        self.epsilon = self.schedule.eval(0)

    def select_action(self, agent_qs: th.Tensor, avail_actions: th.Tensor, t_env: int,
                      test_mode: bool = False) -> th.Tensor:
        """agent_qs, avail_actions: [bs, n_agents, n_actions] → actions LongTensor [bs, n_agents]."""
        self.epsilon = self.schedule.eval(t_env)
        if test_mode:
            self.epsilon = getattr(self.args, "test_noise", 0.0)

        unavailable = avail_actions == 0  # [bs, n_agents, n_actions]
        # Unavailable actions can never win the argmax.
        masked_qs = agent_qs.masked_fill(unavailable, -float("inf"))

        pick_random = th.rand_like(agent_qs[:, :, 0]) < self.epsilon  # [bs, n_agents]
        # Categorical normalises the 0/1 mask: uniform over the available actions. Its argument
        # check is skipped (it costs as much as the draw) and nothing else checks the mask: a row
        # with no available action gives NaN probabilities, on which the draw (multinomial) raises.
        random_actions = Categorical(avail_actions.float(), validate_args=False).sample()  # [bs, n_agents]
        greedy_actions = masked_qs.argmax(dim=2)  # [bs, n_agents]
        return th.where(pick_random, random_actions, greedy_actions)


class MultinomialActionSelector:
    """PyMARL2's ``multinomial`` selector for policy agents (agent_output_type "pi_logits"): samples
    each agent's action from its policy restricted to the available actions, mixed with a uniform
    draw over them:

        p = (1 - epsilon) * pi / sum_available(pi) + epsilon / n_available   (0 on unavailable actions)

    epsilon follows the linear schedule of epsilon_start, epsilon_finish, epsilon_anneal_time (an
    exploration floor: each available action keeps at least epsilon / n_available). In test mode with
    test_greedy (the default) each agent takes its most probable available action; with test_greedy
    False test episodes sample as training ones do.

    With save_probs (IPPO) select_action also returns the probabilities it sampled from (those of
    the renormalised policy in greedy test mode), which the runner stores as the behaviour policy.
    """

    def __init__(self, args: SimpleNamespace):
        self.schedule = DecayThenFlatSchedule(args.epsilon_start, args.epsilon_finish,
                                              args.epsilon_anneal_time, decay="linear")
        self.epsilon = self.schedule.eval(0)
        self.test_greedy = getattr(args, "test_greedy", True)
        self.save_probs = getattr(args, "save_probs", False)

    def select_action(self, agent_policies: th.Tensor, avail_actions: th.Tensor, t_env: int,
                      test_mode: bool = False) -> th.Tensor | tuple[th.Tensor, th.Tensor]:
        """agent_policies, avail_actions: [bs, n_agents, n_actions] → actions LongTensor [bs, n_agents]
        (and with save_probs the probabilities [bs, n_agents, n_actions])."""
        available = avail_actions.to(agent_policies.dtype)  # [bs, n_agents, n_actions]
        policies = agent_policies * available
        policies = policies / (policies.sum(-1, keepdim=True) + 1e-8)
        if test_mode and self.test_greedy:
            actions = policies.argmax(dim=-1)  # [bs, n_agents]
        else:
            self.epsilon = self.schedule.eval(t_env)
            uniform = available / (available.sum(-1, keepdim=True) + 1e-8)  # [bs, n_agents, n_actions]
            policies = (1 - self.epsilon) * policies + self.epsilon * uniform  # 0 on unavailable actions
            actions = Categorical(probs=policies, validate_args=False).sample()  # [bs, n_agents]
        return (actions, policies) if self.save_probs else actions


REGISTRY = {"epsilon_greedy": EpsilonGreedyActionSelector, "multinomial": MultinomialActionSelector}
