"""Claude Code behind the ledger: a command hook that proposes each tool call and answers.

``supervisor hook claude-code`` reads one Claude Code hook event on stdin: ``PreToolUse`` (and
``PermissionRequest``) calls are proposed through the approval ledger and answered allow or
deny once the stored policy or a person decides; ``PostToolUse`` records the tool's result as
the outcome of the claimed call. ``supervisor hook install claude-code`` writes the hooks entry
into Claude Code's settings. Modules: ``events`` (the stdin JSON), ``answers`` (the stdout
JSON), ``transcript`` (the assistant turn of a call), ``gate`` (the ledger side), ``settings``
(install and uninstall). See docs/integrations/claude-code.md.
"""
