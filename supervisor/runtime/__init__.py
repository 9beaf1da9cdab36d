"""The agent runtime: MemAgent, its builder, checkpoints, offloading and traces."""
