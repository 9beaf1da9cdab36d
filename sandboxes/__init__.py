"""Execution boundaries: code sandboxes and the Browser Use worker. Never imports the UI."""
