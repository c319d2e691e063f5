"""PyMARL2's basic_central_mac: the controller of weighted QMIX's unrestricted central Q (OW/CW-QMIX).

The same inputs as the basic controller (observation, last action, agent id); the agent named by
central_agent (central_rnn) gives central_action_embed values per action, read as
[..., n_agents, n_actions, central_action_embed]. It never acts (the learner only unrolls it over
stored episodes); its agent is saved as central_agent.th.
"""
import torch as th

from modules.agents import REGISTRY as agent_REGISTRY

from .basic_controller import BasicMAC


class CentralBasicMAC(BasicMAC):
    AGENT_FILE = "central_agent.th"

    def _build_agent(self, input_shape: int):
        name = self.args.central_agent
        if name not in agent_REGISTRY:
            raise ValueError(f"unknown central_agent '{name}'; known: {', '.join(sorted(agent_REGISTRY))}")
        return agent_REGISTRY[name](input_shape, self.args)

    def _outputs(self, agent_outs: th.Tensor, avail_actions: th.Tensor) -> th.Tensor:
        """[..., n_actions * embed] -> [..., n_actions, embed]."""
        return agent_outs.reshape(*agent_outs.shape[:-1], self.n_actions, self.args.central_action_embed)
