"""The supervisor's Textual app: screens and pane widgets. Talks to supervisor services only."""
