"""ACP agents under supervision: ``supervisor acp -- AGENT...``.

An agent speaking the Agent Client Protocol asks its client ``session/request_permission``
before a tool call; here that question becomes a ledger proposal, decided like any other (a
person in the TUI, CLI or web, or a policy rule), and the agent is answered with one of its own
option ids. :mod:`~supervisor.acp.relay` sits between an editor and the agent,
:mod:`~supervisor.acp.headless` is the client itself (scripts, tests). Importing this package
loads nothing; its modules import the ``acp`` SDK, so only the command imports them.
"""
