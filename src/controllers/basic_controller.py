"""PyMARL2's basic multi-agent controller: one agent network shared by all agents."""
import os
from types import SimpleNamespace

import torch as th

from components.action_selectors import REGISTRY as action_REGISTRY
from components.episode_buffer import EpisodeBatch
from modules.agents import REGISTRY as agent_REGISTRY

OUTPUT_TYPES = ("q", "pi_logits")


def _vshape_size(vshape: int | tuple) -> int:
    return vshape if isinstance(vshape, int) else int(th.Size(vshape).numel())


class BasicMAC:
    """Parameters are shared between agents; each agent's input is its observation, optionally
    its previous action (one-hot, zeros at t=0) and its id (one-hot), so the shared network can
    still behave differently per agent. Holds the recurrent memory of the episodes being run.
    """

    def __init__(self, scheme: dict, groups: dict, args: SimpleNamespace):
        self.n_agents = args.n_agents
        self.args = args
        self.agent_output_type = getattr(args, "agent_output_type", "q")
        if self.agent_output_type not in OUTPUT_TYPES:
            raise ValueError(f"unknown agent_output_type '{self.agent_output_type}'; "
                             f"known: {', '.join(OUTPUT_TYPES)}")
        self.agent = self._build_agent(self._get_input_shape(scheme))
        if args.action_selector not in action_REGISTRY:
            raise ValueError(f"unknown action_selector '{args.action_selector}'; "
                             f"known: {', '.join(sorted(action_REGISTRY))}")
        self.action_selector = action_REGISTRY[args.action_selector](args)
        self.hidden_states = None  # [bs, n_agents, hidden] once init_hidden is called

    def select_actions(self, ep_batch: EpisodeBatch, t_ep: int, t_env: int,
                       bs: slice | list = slice(None), test_mode: bool = False) -> th.Tensor:
        """Actions [len(bs), n_agents] for the episodes `bs` at step t_ep. The network runs on the
        whole batch so every episode's memory advances in step."""
        avail_actions = ep_batch["avail_actions"][:, t_ep]  # [bs, n_agents, n_actions]
        agent_outputs = self.forward(ep_batch, t_ep, test_mode=test_mode)
        return self.action_selector.select_action(agent_outputs[bs], avail_actions[bs], t_env,
                                                  test_mode=test_mode)

    def forward(self, ep_batch: EpisodeBatch, t: int, test_mode: bool = False) -> th.Tensor:
        """Agent outputs [bs, n_agents, n_actions] at step t; advances hidden_states.

        With agent_output_type "pi_logits" the outputs are turned into policies by a softmax in
        which unavailable actions get logit -1e5 (unless args.mask_before_softmax is False)."""
        agent_outs = self._run_agent(ep_batch, t, test_mode)  # [bs, n_agents, n_actions]
        if self.agent_output_type == "pi_logits":
            if getattr(self.args, "mask_before_softmax", True):
                avail_actions = ep_batch["avail_actions"][:, t]  # [bs, n_agents, n_actions]
                agent_outs = agent_outs.masked_fill(avail_actions == 0, -1e5)
            agent_outs = th.softmax(agent_outs, dim=-1)
        return agent_outs

    def _run_agent(self, ep_batch: EpisodeBatch, t: int, test_mode: bool) -> th.Tensor:
        self.agent.train(not test_mode)
        agent_inputs = self._build_inputs(ep_batch, t)  # [bs, n_agents, input]
        agent_outs, self.hidden_states = self.agent(agent_inputs, self.hidden_states)
        return agent_outs.view(ep_batch.batch_size, self.n_agents, -1)  # [bs, n_agents, n_actions]

    def init_hidden(self, batch_size: int) -> None:
        """Resets the memory to zeros for `batch_size` new episodes."""
        hidden = self.agent.init_hidden()  # [1, hidden]
        # [bs, n_agents, hidden]; a broadcast view, the agent reshapes it before the GRU
        self.hidden_states = hidden.unsqueeze(0).expand(batch_size, self.n_agents, -1)

    def parameters(self):
        return self.agent.parameters()

    def load_state(self, other_mac: "BasicMAC") -> None:
        """Copies the other controller's network weights (used to refresh target networks)."""
        self.agent.load_state_dict(other_mac.agent.state_dict())

    def cuda(self) -> None:
        self.agent.cuda()

    def save_models(self, path: str) -> None:
        th.save(self.agent.state_dict(), os.path.join(path, "agent.th"))

    def load_models(self, path: str) -> None:
        state = th.load(os.path.join(path, "agent.th"), map_location="cpu")
        self.agent.load_state_dict(state)

    def _build_agent(self, input_shape: int):
        if self.args.agent not in agent_REGISTRY:
            raise ValueError(f"unknown agent '{self.args.agent}'; known: {', '.join(sorted(agent_REGISTRY))}")
        return agent_REGISTRY[self.args.agent](input_shape, self.args)

    def _build_inputs(self, batch: EpisodeBatch, t: int) -> th.Tensor:
        """Concatenates, per agent: obs_t, one-hot action at t-1, one-hot agent id."""
        bs = batch.batch_size
        inputs = [batch["obs"][:, t]]  # [bs, n_agents, obs]
        if self.args.obs_last_action:
            last_actions = batch["actions_onehot"][:, t - 1] if t > 0 else \
                th.zeros_like(batch["actions_onehot"][:, t])  # [bs, n_agents, n_actions]
            inputs.append(last_actions)
        if self.args.obs_agent_id:
            agent_ids = th.eye(self.n_agents, device=batch.device)  # [n_agents, n_agents]
            inputs.append(agent_ids.unsqueeze(0).expand(bs, -1, -1))  # [bs, n_agents, n_agents]
        return th.cat([x.reshape(bs, self.n_agents, -1) for x in inputs], dim=-1)  # [bs, n_agents, input]

    def _get_input_shape(self, scheme: dict) -> int:
        input_shape = _vshape_size(scheme["obs"]["vshape"])
        if self.args.obs_last_action:
            if "actions_onehot" not in scheme:
                raise ValueError("obs_last_action needs 'actions_onehot' in the scheme; pass the "
                                 "buffer's scheme (built with the actions OneHot preprocess)")
            input_shape += _vshape_size(scheme["actions_onehot"]["vshape"])
        if self.args.obs_agent_id:
            input_shape += self.n_agents
        return input_shape
