"""Shared helpers: multi-step RL targets, logging and timing."""
