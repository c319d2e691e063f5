"""The StarCraft II client: where the game is installed, pysc2's protocol, and the engine that plays the game."""
