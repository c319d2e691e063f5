"""Agent networks; all agents share one network, told apart by the agent-id input."""
from .n_rnn_agent import NRNNAgent
from .rnn_agent import RNNAgent

REGISTRY = {
    "rnn": RNNAgent,
    "n_rnn": NRNNAgent,
}
