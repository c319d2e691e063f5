"""Agent networks; all agents share one network, told apart by the agent-id input."""
from .att_rnn_agent import ATTRNNAgent
from .central_rnn_agent import CentralRNNAgent
from .conv_agent import ConvAgent
from .n_rnn_agent import NRNNAgent
from .rnn_agent import RNNAgent
from .rnn_ns_agent import RNNNSAgent
from .rnn_ppo_agent import RNNPPOAgent

REGISTRY = {
    "rnn": RNNAgent,
    "n_rnn": NRNNAgent,
    "att_rnn": ATTRNNAgent,
    "central_rnn": CentralRNNAgent,
    "conv_agent": ConvAgent,
    "rnn_ppo": RNNPPOAgent,  # VMIX (ppo_mac): policy logits and a state value
    "rnn_ns": RNNNSAgent,  # EPyMARL's _ns configs: every agent its own network
}
