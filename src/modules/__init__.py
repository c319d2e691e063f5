"""Neural network modules: agents (per-agent utility networks) and mixers, each with a REGISTRY."""
