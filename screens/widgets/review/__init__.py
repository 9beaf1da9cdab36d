"""Widgets of the review pane."""
