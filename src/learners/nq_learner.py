"""PyMARL2's NQLearner (``learner: nq_learner``): QLearner with TD(lambda) targets, for QMIX, VDN and IQL.

It differs from QLearner (q_learner.py, which holds the shared training step) in two places: the
targets are lambda-returns over whole episodes instead of one-step targets, and ``mixer: qmix`` is
PyMARL2's rewritten QMIX mixer (nmix: two-layer hypernetworks, qmix_pos_func) rather than PyMARL's
original one. With ``mixer: null`` it trains independent learners on per-agent lambda-returns
(PyMARL2's nq_learner requires a mixer).

Life of a batch in ``train`` with the fused unroll (T = batch.max_seq_length, the last step only
bootstraps; e.g. SMAC corridor with qmix.yaml: bs 128, n_agents 6, n_actions 30, obs 156, state 282,
input 192, hidden 64, rows = bs*n_agents = 768):
  batch fields             -> rewards/terminated/mask [bs, T-1, 1], actions [bs, T-1, n_agents, 1] (as long)
  agent inputs, once       -> [obs_t, one-hot a_{t-1} (zeros at t=0), one-hot id] [bs, T, n_agents, input],
                              stored time-major (in bfloat16 when training in it) and shared by the online
                              and the target controller (mac.build_sequence_inputs)
  the controllers' fused pass (mac.forward_sequence_pair: the online one with gradients, the target one
  without):
    fc1 + ReLU, all steps  -> [T, bs, n_agents, hidden] per network, viewed as x [T, rows, hidden]
    GRUs (gru_sequence_pair) -> memory after each step [T, rows, hidden] in float32, chunk by chunk
                              (16 steps here): the chunk's input projections [16, rows, 3*hidden] in
                              one matmul per network, then per step W_hh h [2, rows, 3*hidden] for both
                              networks in one batched matmul and the gates; the online network's
                              backward factors [16, rows, 5*hidden] are kept
    (LayerNorm,) fc2       -> mac_out, target_mac_out [bs, T, n_agents, n_actions] (views of time-major)
  chosen actions           -> chosen_action_qvals [bs, T-1, n_agents]
  double-Q evaluation      -> online greedy action among the available ones [bs, T, n_agents, 1],
                              valued by the target nets: target_max_qvals [bs, T, n_agents]
  mixer (if any)           -> Q_tot [bs, T-1, 1] and target Q_tot [bs, T, 1]; the hypernetworks'
                              state layers as one matmul [bs*T, 282] @ [282, 192], the mixing in float32
  lambda returns           -> targets [bs, T-1, k] (k = 1 with a mixer, n_agents without), one
                              [T-1, T] discount-matrix product
  masked squared error     -> scalar loss; backward (the GRU's: per step one small matmul, per chunk
                              the weight gradients in three big ones), gradient clipping, optimiser step

train_unroll "stepwise" runs mac.forward once per step instead, as the runner does while acting:
the straightforward reference the fused pass is tested against (same values up to float rounding).
train_precision "float32" (the default) is PyMARL2's arithmetic throughout. "bfloat16" (opt-in)
runs the networks under bfloat16 autocast: their matmuls in bfloat16, so the Q-values going into
the loss carry bfloat16's rounding (~1e-3 relative); the GRU's memory and gates, the QMIX mixing,
the targets and the loss are computed in float32. Speed (bench/bench_train_step.py: 128 corridor
episodes of 100 steps, 2-core AMD EPYC with avx512_bf16; seconds per train step at 2 / 1 torch
threads): step-wise float32 0.24 / 0.38-0.40, fused float32 0.22 / 0.37-0.39 (float32 is bound by
matmul arithmetic, ~28 GFLOP a step), fused bfloat16 0.12-0.13 / 0.18-0.19.
"""
import torch as th

from components.episode_buffer import EpisodeBatch
from utils.rl_utils import build_q_lambda_targets, build_td_lambda_targets

from .q_learner import QLearner, Transitions


class NQLearner(QLearner):
    """Trains ``mac`` (and the mixer named by ``args.mixer``; None = independent Q-learning) on
    TD(lambda) (or, with q_lambda, Peng's Q(lambda)) targets."""

    MIXER_ALIASES = {}

    def _targets(self, batch: EpisodeBatch, mac_out: th.Tensor, target_mac_out: th.Tensor,
                 data: Transitions) -> th.Tensor:
        """Lambda-returns [bs, T-1, k] on the (double-Q) greedy target values of every stored step."""
        target_max_qvals = self._greedy_target_qvals(batch, mac_out, target_mac_out, start=0)  # [bs, T, n_agents]
        target_max_qvals = self._mix_target(target_max_qvals, batch["state"])  # [bs, T, k]
        return self._lambda_returns(batch, target_mac_out, target_max_qvals, data)

    def _lambda_returns(self, batch: EpisodeBatch, target_mac_out: th.Tensor, target_max_qvals: th.Tensor,
                        data: Transitions) -> th.Tensor:
        """TD(lambda) returns on target_max_qvals [bs, T, k], or with q_lambda Peng's Q(lambda) with the
        target networks' (mixed) values of the actions taken: [bs, T-1, k]."""
        if getattr(self.args, "q_lambda", False):
            taken_qvals = th.gather(target_mac_out, 3, batch["actions"].long()).squeeze(3)  # [bs, T, n_agents]
            taken_qvals = self._mix_target(taken_qvals, batch["state"])  # [bs, T, k]
            return build_q_lambda_targets(data.rewards, data.terminated, data.mask, target_max_qvals, taken_qvals,
                                          self.args.gamma, self.args.td_lambda)
        return build_td_lambda_targets(data.rewards, data.terminated, data.mask, target_max_qvals,
                                       self.args.n_agents, self.args.gamma, self.args.td_lambda)
