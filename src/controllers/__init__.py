"""Multi-agent controllers (MACs): build agent inputs from a batch, run the shared agent network,
and pick actions."""
from .basic_controller import BasicMAC
from .central_controller import CentralBasicMAC
from .conv_controller import ConvMAC
from .dop_controller import DOPMAC
from .n_controller import NMAC
from .ppo_controller import PPOMAC

REGISTRY = {
    "basic_mac": BasicMAC,
    "n_mac": NMAC,
    "conv_mac": ConvMAC,
    "basic_central_mac": CentralBasicMAC,
    "ppo_mac": PPOMAC,  # VMIX: policy and value (rnn_ppo agent)
    # LICA, RIIT: PyMARL2's lica_mac is its basic controller handing the gumbel selector the masked policy
    # logits, which BasicMAC does for any selector that samples from logits.
    "lica_mac": BasicMAC,
    # EPyMARL's _ns configs: its controller of non-shared agents runs one network per agent in a loop; here the
    # rnn_ns agent holds them all as one batched stack, which the basic controller runs.
    "non_shared_mac": BasicMAC,
    # EPyMARL's MADDPG controller: the basic one; its actions come from the soft_policies selector (a draw from
    # softmax(logits), which EPyMARL's Gumbel-max sample is too), the learner reads the agent's raw logits.
    "maddpg_mac": BasicMAC,
    "dop_mac": DOPMAC,  # DOP: policies with the selector's epsilon floor
}
