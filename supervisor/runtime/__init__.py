"""The agent runtime: MemAgent, its builder, checkpoints, offloading and traces.

Imports point one way: ``host`` -> ``builder`` -> ``agent`` -> ``run`` / ``resume`` ->
``engine`` -> ``calls`` -> ``context``, ``state``, ``results``, ``offload``; the engine and
resumes take a :class:`~supervisor.runtime.context.RuntimeContext`, never the agent.
"""
