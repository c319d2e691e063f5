"""EPyMARL's PAC critics (Pareto Actor-Critic; critic_type ``pac_critic_ns``, and ``pac_critic`` with shared
weights): agent i's critic gives Q_i(s, u_{-i}, .) over its own actions, from the state (with
obs_individual_obs every agent's observation, with obs_last_action the previous joint action), with shared
weights and obs_agent_id its id (EPyMARL's shared pac_ac.py never takes one), and the other agents' actions
as one-hots [(n_agents - 1) * n_actions], in agent order. EPyMARL's use_subsampling (a sample of the others'
joint actions in place of all of them) is not offered.

PAC's targets and advantages take, for agent i's own action, the maximum over every joint action of the
other agents (``max_over_others``): the critic is evaluated at all n_actions^(n_agents - 1) of them, as
EPyMARL's compute_all does, so the cost grows exponentially with the number of agents (refused above
MAX_OTHER_JOINT_ACTIONS)."""
import itertools
from types import SimpleNamespace

import torch as th

from components.episode_buffer import EpisodeBatch
from utils.th_utils import one_hot

from .state_value import CentralVCritic

MAX_OTHER_JOINT_ACTIONS = 4096  # the enumeration of the other agents' joint actions beyond which PAC is refused


def other_agents_actions(actions: th.Tensor) -> th.Tensor:
    """Every agent's one-hot action [..., n, n_actions] -> for each agent i the others' in agent order
    [..., n, (n - 1) * n_actions]."""
    n = actions.shape[-2]
    others = [th.cat([actions[..., j, :] for j in range(n) if j != i], dim=-1) for i in range(n)]
    return th.stack(others, dim=-2)


def all_joint_actions(n_others: int, n_actions: int, device: th.device | str | None = None) -> th.Tensor:
    """Every joint action of `n_others` agents as joined one-hots, the last agent's varying fastest (as
    itertools.product, EPyMARL's order): [n_actions ** n_others, n_others * n_actions]."""
    eye = th.eye(n_actions, device=device)
    return th.stack([th.cat(combo) for combo in itertools.product(*[eye] * n_others)]) if n_others else \
        th.zeros(1, 0, device=device)


class PACCritic(CentralVCritic):
    """Q_i(s, u_{-i}, .) per agent: one network for all agents (pac_critic), or per agent (PACCriticNS)."""

    def __init__(self, scheme: dict, args: SimpleNamespace, per_agent: bool = False):
        n, n_actions = args.n_agents, args.n_actions
        if n_actions ** (n - 1) > MAX_OTHER_JOINT_ACTIONS:
            raise ValueError(f"PAC's critic enumerates the other agents' joint actions: {n_actions}^{n - 1} of "
                             f"them here, more than {MAX_OTHER_JOINT_ACTIONS}; use it with fewer agents or actions")
        super().__init__(scheme, args, per_agent, extra_inputs=(n - 1) * n_actions, out_dim=n_actions,
                         with_id=args.obs_agent_id)
        self.register_buffer("joint_actions", all_joint_actions(n - 1, n_actions), persistent=False)

    def forward(self, inputs: th.Tensor, others: th.Tensor) -> th.Tensor:
        """inputs [..., n, input] (build_inputs), the others' actions [..., n, (n-1)*n_actions] -> Q_i of each own
        action [..., n, n_actions]."""
        return super().forward(th.cat([inputs, others], dim=-1))

    def max_over_others(self, inputs: th.Tensor) -> th.Tensor:
        """inputs [bs, T, n, input] -> max over the others' joint actions of Q_i(s, u_{-i}, u_i) for each own
        action u_i: [bs, T, n, n_actions].

        The first layer is split: the inputs' part of it is computed once per step, not once per joint action
        (E = n_actions^(n - 1) times), and the joint actions' part once for all steps."""
        width = inputs.shape[-1]
        own = self.first_layer_part(inputs, slice(0, width), with_bias=True)  # [bs, T, n, hidden]
        # [E, (n-1)*A] -> [E, n, (n-1)*A]: every agent's critic sees every joint action of the others
        others = self.joint_actions[:, None].expand(-1, self.n_agents, -1)
        others = self.first_layer_part(others, slice(width, None), with_bias=False)  # [E, n, hidden]
        first_layer = own.unsqueeze(2) + others  # [bs, T, E, n, hidden]
        return self.head(first_layer).max(dim=2)[0]  # [bs, T, E, n, n_actions] -> [bs, T, n, n_actions]


class PACCriticNS(PACCritic):
    """pac_critic_ns: every agent its own critic (no id)."""

    def __init__(self, scheme: dict, args: SimpleNamespace):
        super().__init__(scheme, args, per_agent=True)


def taken_others(batch: EpisodeBatch, n_actions: int) -> th.Tensor:
    """The other agents' actions taken at every stored step, for each agent: [bs, T, n, (n-1)*n_actions]."""
    return other_agents_actions(one_hot(batch["actions"], n_actions))
