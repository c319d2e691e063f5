"""Action selectors: turn per-agent Q-values or policies into actions. REGISTRY maps config names to classes."""
from types import SimpleNamespace

import torch as th
import torch.nn.functional as F

from .epsilon_schedules import DecayThenFlatSchedule


def categorical_sample(weights: th.Tensor) -> th.Tensor:
    """One draw per row of the categorical distribution with these non-negative weights [..., n] (long
    [...]): the same numbers, and the same random state after, as torch's Categorical(probs=weights).sample()
    (PyMARL2's draw). That normalises the weights and calls multinomial for one sample, which torch computes
    as argmax(p / q) with q ~ Exp(1) drawn for every entry; this does the same without building the
    distribution object and multinomial's argument checks, which cost more than the draw on every step
    (tests/test_action_selectors.py holds it to torch's draw). ValueError for a row with no positive weight."""
    total = weights.sum(-1, keepdim=True)  # [..., 1]
    if not bool((total > 0).all()):
        raise ValueError("categorical_sample: a row has no positive weight (an agent with no available action?)")
    probs = weights / total  # [..., n]
    return (probs / _exponential_noise(probs.shape, probs.dtype, probs.device)).argmax(dim=-1)  # [...]


def _exponential_noise(shape: th.Size, dtype: th.dtype, device: th.device) -> th.Tensor:
    """Exp(1) draws [shape]: categorical_sample's noise, one per weight."""
    return th.empty(shape, dtype=dtype, device=device).exponential_(1)


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

        # Unavailable actions can never win the argmax.
        greedy_actions = agent_qs.masked_fill(avail_actions == 0, -float("inf")).argmax(dim=2)  # [bs, n_agents]
        uniform = th.rand_like(agent_qs[:, :, 0])  # [bs, n_agents], laid out as PyMARL2's draw (its strides)
        if self.epsilon <= 0:
            # No agent explores (uniform >= 0), as in greedy test episodes. PyMARL2 still draws the
            # random actions there; their noise is drawn alone, so that the random stream (and every
            # later draw) is PyMARL2's, without the arithmetic of actions that are never taken.
            _exponential_noise(avail_actions.shape, th.float32, avail_actions.device)
            return greedy_actions
        # the 0/1 mask normalised: uniform over the available actions (PyMARL2's Categorical draw)
        random_actions = categorical_sample(avail_actions.float())  # [bs, n_agents]
        return th.where(uniform < self.epsilon, random_actions, greedy_actions)


class PolicySelector:
    """What the policy selectors share: a linear epsilon schedule, greedy test episodes unless
    test_greedy is False, and save_probs (return the probabilities acted on as well)."""

    def __init__(self, args: SimpleNamespace):
        self.schedule = DecayThenFlatSchedule(args.epsilon_start, args.epsilon_finish,
                                              args.epsilon_anneal_time, decay="linear")
        self.epsilon = self.schedule.eval(0)
        self.test_greedy = getattr(args, "test_greedy", True)
        self.save_probs = getattr(args, "save_probs", False)


class MultinomialActionSelector(PolicySelector):
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
            actions = categorical_sample(policies)  # [bs, n_agents]
        return (actions, policies) if self.save_probs else actions


GUMBEL_EPS = 1e-20  # PyMARL2's: keeps log(U) finite for a uniform draw U of 0
UNAVAILABLE_LOGIT = -1e10  # far below any logit plus Gumbel noise (which lies within [-3.9, 16.7])


def gumbel_softmax(logits: th.Tensor, temperature: float = 1.0, hard: bool = False) -> th.Tensor:
    """A Gumbel-softmax sample of the categorical distribution softmax(logits) over the last dim:
    softmax((logits + g) / temperature) with g = -log(-log(U)) Gumbel noise, U uniform.

    With `hard` the sample is the one-hot of its argmax (an exact draw of the categorical, the
    Gumbel-max trick), with the straight-through estimator: the forward value is the one-hot and the
    gradient is the soft sample's."""
    noise = -th.log(-th.log(th.rand_like(logits) + GUMBEL_EPS))
    soft = th.softmax((logits + noise) / temperature, dim=-1)
    if not hard:
        return soft
    one_hot = F.one_hot(soft.argmax(dim=-1), soft.shape[-1]).to(soft.dtype)
    return one_hot + soft - soft.detach()


class GumbelSoftmaxActionSelector(PolicySelector):
    """PyMARL2's ``gumbel`` selector (LICA, RIIT): takes policy logits (TAKES_LOGITS; the controller
    passes them with unavailable actions masked) and samples each agent's action by the Gumbel-max
    trick, i.e. from softmax(logits) over the available actions; in test mode with test_greedy (the
    default) the most probable available action.

    epsilon follows the linear schedule of epsilon_start, epsilon_finish, epsilon_anneal_time as in
    PyMARL2, which logs it but never explores with it (its YAMLs set 0). With save_probs
    select_action also returns softmax(logits) over the available actions (PyMARL2 returns the logits).
    """

    TAKES_LOGITS = True

    def select_action(self, agent_logits: th.Tensor, avail_actions: th.Tensor, t_env: int,
                      test_mode: bool = False) -> th.Tensor | tuple[th.Tensor, th.Tensor]:
        """agent_logits, avail_actions: [bs, n_agents, n_actions] → actions LongTensor [bs, n_agents]
        (and with save_probs the probabilities [bs, n_agents, n_actions])."""
        self.epsilon = self.schedule.eval(t_env)
        logits = agent_logits.masked_fill(avail_actions == 0, UNAVAILABLE_LOGIT)
        if test_mode and self.test_greedy:
            actions = logits.argmax(dim=-1)  # [bs, n_agents]
        else:
            actions = gumbel_softmax(logits, hard=True).argmax(dim=-1)  # [bs, n_agents]
        return (actions, th.softmax(logits, dim=-1)) if self.save_probs else actions


class SoftPoliciesActionSelector:
    """EPyMARL's ``soft_policies`` selector (its actor-critic algorithms): each agent's action is drawn
    from its policy (agent_output_type "pi_logits", unavailable actions already at probability 0), in
    training and test episodes alike, with no exploration floor (test_greedy is not read, as in EPyMARL)."""

    def __init__(self, args: SimpleNamespace):
        self.save_probs = getattr(args, "save_probs", False)

    def select_action(self, agent_policies: th.Tensor, avail_actions: th.Tensor, t_env: int,
                      test_mode: bool = False) -> th.Tensor | tuple[th.Tensor, th.Tensor]:
        """agent_policies [bs, n_agents, n_actions] -> actions LongTensor [bs, n_agents]."""
        actions = categorical_sample(agent_policies)  # [bs, n_agents]
        return (actions, agent_policies) if self.save_probs else actions


REGISTRY = {"epsilon_greedy": EpsilonGreedyActionSelector, "multinomial": MultinomialActionSelector,
            "gumbel": GumbelSoftmaxActionSelector, "soft_policies": SoftPoliciesActionSelector}
