"""PyMARL2's basic multi-agent controller: one agent network shared by all agents.

Two ways to run the agent network over a batch:
  forward(batch, t)        one step, carrying the memory in hidden_states (the runner acts with it)
  forward_sequence(batch)  every stored step at once from fresh memory; forward_sequence_pair runs
                           it for this controller and the target controller together (the learner
                           trains with that)
Both give the same outputs; the agent inputs of each step are [obs_t, one-hot a_{t-1}, one-hot id].
"""
import os
from types import SimpleNamespace

import torch as th

from components.action_selectors import REGISTRY as action_REGISTRY
from components.episode_buffer import EpisodeBatch
from modules.agents import REGISTRY as agent_REGISTRY
from utils.running_stats import RunningNormaliser
from utils.th_utils import autocast_dtype

OUTPUT_TYPES = ("q", "pi_logits")
# The learners that keep normalise_obs's statistics up to date (every other one would act on fixed ones).
OBS_NORMALISING_LEARNERS = ("trust_region_learner",)


def _vshape_size(vshape: int | tuple) -> int:
    return vshape if isinstance(vshape, int) else int(th.Size(vshape).numel())


class BasicMAC:
    """Parameters are shared between agents; each agent's input is its observation, optionally
    its previous action (one-hot, zeros at t=0) and its id (one-hot), so the shared network can
    still behave differently per agent. Holds the recurrent memory of the episodes being run.

    The previous action is one-hot encoded here from batch["actions"] (stored as a small integer
    type), so the replay buffer need not keep a one-hot copy of every action.
    """

    AGENT_FILE = "agent.th"  # the agent network's file in a checkpoint folder

    def __init__(self, scheme: dict, groups: dict, args: SimpleNamespace):
        self.n_agents = args.n_agents
        self.n_actions = args.n_actions
        self.args = args
        self.agent_output_type = getattr(args, "agent_output_type", "q")
        if self.agent_output_type not in OUTPUT_TYPES:
            raise ValueError(f"unknown agent_output_type '{self.agent_output_type}'; "
                             f"known: {', '.join(OUTPUT_TYPES)}")
        self.input_shape = self._get_input_shape(scheme)  # per agent and step (build_sequence_inputs)
        self.agent = self._build_agent(self.input_shape)
        if args.action_selector not in action_REGISTRY:
            raise ValueError(f"unknown action_selector '{args.action_selector}'; "
                             f"known: {', '.join(sorted(action_REGISTRY))}")
        self.action_selector = action_REGISTRY[args.action_selector](args)
        self.selector_takes_logits = getattr(self.action_selector, "TAKES_LOGITS", False)
        if self.selector_takes_logits and self.agent_output_type != "pi_logits":
            raise ValueError(f"the {args.action_selector} action selector samples policies: it needs "
                             f"agent_output_type 'pi_logits', got '{self.agent_output_type}'")
        self.hidden_states = None  # [bs, n_agents, hidden] once init_hidden is called
        self._agent_ids_cache = None  # [n_agents, n_agents] (_agent_ids)
        self.obs_normaliser = self._build_obs_normaliser(scheme)

    def _build_obs_normaliser(self, scheme: dict) -> RunningNormaliser | None:
        """With normalise_obs (benellis3/mappo's is_observation_normalized) the observations are normalised by
        running statistics, while acting and in training alike; the learner updates them and saves them."""
        if not getattr(self.args, "normalise_obs", False):
            return None
        learner = getattr(self.args, "learner", "nq_learner")
        if learner not in OBS_NORMALISING_LEARNERS:
            raise ValueError(f"normalise_obs=True needs a learner that updates the observation statistics "
                             f"({', '.join(OBS_NORMALISING_LEARNERS)}), not {learner}")
        return RunningNormaliser(_vshape_size(scheme["obs"]["vshape"]))

    def normalise_obs(self, obs: th.Tensor) -> th.Tensor:
        """Observations [..., obs] as the agent sees them: normalised with normalise_obs, else unchanged."""
        return obs if self.obs_normaliser is None else self.obs_normaliser(obs)

    def select_actions(self, ep_batch: EpisodeBatch, t_ep: int, t_env: int,
                       bs: slice | list = slice(None), test_mode: bool = False) -> th.Tensor:
        """Actions [len(bs), n_agents] for the episodes `bs` at step t_ep. The network runs on the
        whole batch so every episode's memory advances in step."""
        avail_actions = ep_batch["avail_actions"][:, t_ep]  # [bs, n_agents, n_actions]
        agent_outputs = self.acting_outputs(ep_batch, t_ep, test_mode=test_mode)
        if not (isinstance(bs, slice) and bs == slice(None)):  # some episodes have ended
            agent_outputs, avail_actions = agent_outputs[bs], avail_actions[bs]
        return self.action_selector.select_action(agent_outputs, avail_actions, t_env, test_mode=test_mode)

    def acting_outputs(self, ep_batch: EpisodeBatch, t: int, test_mode: bool = False) -> th.Tensor:
        """What the action selector sees at step t: the forward outputs [bs, n_agents, n_actions], or for
        a selector that samples from logits (gumbel) the masked policy logits."""
        if self.selector_takes_logits:
            return self.masked_logits(self._agent_step(ep_batch, t, test_mode), ep_batch["avail_actions"][:, t])
        return self.forward(ep_batch, t, test_mode=test_mode)

    def forward(self, ep_batch: EpisodeBatch, t: int, test_mode: bool = False) -> th.Tensor:
        """Agent outputs [bs, n_agents, n_actions] at step t; advances hidden_states.

        With agent_output_type "pi_logits" the outputs are turned into policies by a softmax in
        which unavailable actions get logit -1e5 (unless args.mask_before_softmax is False)."""
        return self._outputs(self._agent_step(ep_batch, t, test_mode), ep_batch["avail_actions"][:, t])

    def _agent_step(self, ep_batch: EpisodeBatch, t: int, test_mode: bool) -> th.Tensor:
        """The agent network's raw outputs [bs, n_agents, n_actions] at step t; advances hidden_states."""
        if self.agent.training == test_mode:  # switched only when it changes (train() walks every module)
            self.agent.train(not test_mode)
        agent_inputs = self._build_inputs(ep_batch, t)  # [bs, n_agents, input]
        agent_outs, self.hidden_states = self.agent(agent_inputs, self.hidden_states)  # [bs, n_agents, n_actions]
        return agent_outs

    def forward_sequence(self, ep_batch: EpisodeBatch) -> th.Tensor:
        """Agent outputs [bs, T, n_agents, n_actions] for all T stored steps, from fresh (zero)
        memory, in one fused pass; the same values as init_hidden and forward at t = 0 .. T-1.
        hidden_states is left alone."""
        return self.forward_inputs(self.build_sequence_inputs(ep_batch), ep_batch["avail_actions"])

    def forward_inputs(self, inputs: th.Tensor, avail_actions: th.Tensor) -> th.Tensor:
        """forward_sequence of inputs already built (build_sequence_inputs: [bs, T, n_agents, input]), for a
        learner that passes over one batch several times: [bs, T, n_agents, n_actions]."""
        agent_outs = self.agent.forward_sequence(inputs)  # [bs, T, n_agents, n_actions]
        return self._outputs(agent_outs, avail_actions)

    def forward_sequence_pair(self, other: "BasicMAC", ep_batch: EpisodeBatch, with_memory: bool = False) -> tuple:
        """forward_sequence of this controller (with gradients) and of `other` (the learner's target
        controller: same agent sizes; without gradients): the same values as two calls, with the
        inputs built once and both agents' GRUs stepping through time in one loop (cheaper on a CPU).
        With `with_memory` the two agents' memories after each step [bs, T, n_agents, hidden] follow."""
        inputs = self.build_sequence_inputs(ep_batch)  # [bs, T, n_agents, input], shared
        agent_outs, other_outs, *memories = self.agent.forward_sequence_pair(
            other.agent, inputs, with_memory=with_memory)  # [bs, T, n_agents, n_actions] each
        avail_actions = ep_batch["avail_actions"]
        with th.no_grad():
            other_outs = other._outputs(other_outs, avail_actions)
        return (self._outputs(agent_outs, avail_actions), other_outs, *memories)

    def _outputs(self, agent_outs: th.Tensor, avail_actions: th.Tensor) -> th.Tensor:
        """Policies from raw agent outputs (pi_logits), else the outputs unchanged; any leading dims."""
        if self.agent_output_type != "pi_logits":
            return agent_outs
        return th.softmax(self.masked_logits(agent_outs, avail_actions), dim=-1)

    def masked_logits(self, logits: th.Tensor, avail_actions: th.Tensor) -> th.Tensor:
        """Policy logits with -1e5 on unavailable actions (unless args.mask_before_softmax is False)."""
        if getattr(self.args, "mask_before_softmax", True):
            return logits.masked_fill(avail_actions == 0, -1e5)
        return logits

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
        if self.obs_normaliser is not None:
            self.obs_normaliser.cuda()

    def save_models(self, path: str) -> None:
        th.save(self.agent.state_dict(), os.path.join(path, self.AGENT_FILE))

    def load_models(self, path: str) -> None:
        state = th.load(os.path.join(path, self.AGENT_FILE), map_location="cpu")
        self.agent.load_state_dict(state)

    def _build_agent(self, input_shape: int):
        if self.args.agent not in agent_REGISTRY:
            raise ValueError(f"unknown agent '{self.args.agent}'; known: {', '.join(sorted(agent_REGISTRY))}")
        return agent_REGISTRY[self.args.agent](input_shape, self.args)

    def _build_inputs(self, batch: EpisodeBatch, t: int) -> th.Tensor:
        """The agent inputs of step t: [bs, n_agents, input], what build_sequence_inputs gives at t, built
        for the one step (acting calls this every env step)."""
        bs = batch.batch_size
        obs = self.normalise_obs(batch["obs"][:, t].reshape(bs, self.n_agents, -1))  # [bs, n_agents, obs]
        parts = [obs]
        if self.args.obs_last_action:
            parts.append(self._last_actions_onehot(batch, t, t + 1, obs.dtype)[0])  # [bs, n_agents, n_actions]
        if self.args.obs_agent_id:
            parts.append(self._agent_ids(obs.dtype, obs.device).expand(bs, -1, -1))  # [bs, n_agents, n_agents]
        return th.cat(parts, dim=-1)

    def _agent_ids(self, dtype: th.dtype, device: th.device) -> th.Tensor:
        """The one-hot agent ids [n_agents, n_agents], built once per dtype and device (acting reads them
        every step)."""
        ids = self._agent_ids_cache
        if ids is None or ids.dtype != dtype or ids.device != device:
            ids = self._agent_ids_cache = th.eye(self.n_agents, dtype=dtype, device=device)
        return ids

    def build_sequence_inputs(self, batch: EpisodeBatch) -> th.Tensor:
        """The agent inputs of every stored step: [bs, T, n_agents, input]. Under autocast they are
        built in its dtype, which the first layer would cast them to anyway (half the memory)."""
        return self._inputs_of_steps(batch, 0, batch.max_seq_length, autocast_dtype(batch.device))

    def _inputs_of_steps(self, batch: EpisodeBatch, start: int, stop: int,
                         dtype: th.dtype | None = None) -> th.Tensor:
        """Concatenates, per agent and step in [start, stop): obs_t, one-hot a_{t-1}, one-hot agent id,
        in `dtype` (None = the observations'): [bs, steps, n_agents, input], laid out time-major in
        memory (a transposed view), so that the agent's sequence pass reads its steps in place."""
        bs, steps = batch.batch_size, stop - start
        obs = batch["obs"][:, start:stop].transpose(0, 1)  # [steps, bs, n_agents, *obs_shape]
        dtype = dtype or obs.dtype
        parts = [self.normalise_obs(obs.reshape(steps, bs, self.n_agents, -1))]  # [steps, bs, n_agents, obs]
        if self.args.obs_last_action:
            parts.append(self._last_actions_onehot(batch, start, stop, dtype))
        if self.args.obs_agent_id:
            parts.append(self._agent_ids(dtype, obs.device).expand(steps, bs, -1, -1))  # [steps, bs, n, n]
        inputs = obs.new_empty(steps, bs, self.n_agents, sum(part.shape[-1] for part in parts), dtype=dtype)
        th.cat(parts, dim=-1, out=inputs)  # casts the observations as it copies them
        return inputs.transpose(0, 1)  # [bs, steps, n_agents, input]

    def _last_actions_onehot(self, batch: EpisodeBatch, start: int, stop: int, dtype: th.dtype) -> th.Tensor:
        """One-hot previous actions, time-major [stop - start, bs, n_agents, n_actions]; zeros at t = 0."""
        onehot = th.zeros(stop - start, batch.batch_size, self.n_agents, self.n_actions, dtype=dtype,
                          device=batch["obs"].device)  # [steps, bs, n_agents, n_actions]
        first = max(start, 1)  # the first step in range that has a previous action
        if first < stop:
            previous = batch["actions"][:, first - 1:stop - 1].long()  # [bs, stop - first, n_agents, 1]
            onehot[first - start:].scatter_(-1, previous.transpose(0, 1), 1)
        return onehot

    def _get_input_shape(self, scheme: dict) -> int:
        input_shape = _vshape_size(scheme["obs"]["vshape"])
        if self.args.obs_last_action:
            if "actions" not in scheme:
                raise ValueError("obs_last_action needs 'actions' in the scheme: the controller one-hot "
                                 "encodes each agent's previous action from it")
            input_shape += self.n_actions
        if self.args.obs_agent_id:
            input_shape += self.n_agents
        return input_shape
