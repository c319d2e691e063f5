"""Building blocks shared by runners, controllers and learners.

episode_buffer: EpisodeBatch / ReplayBuffer storage; transforms: preprocessing applied on write;
action_selectors: REGISTRY of exploration policies; epsilon_schedules: annealing schedules.
"""
