"""The ``supervisor`` command. Only the TUI command imports Textual, inside the function."""
