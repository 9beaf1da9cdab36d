"""`supervisor demo` opens the TUI only when it can and should, and says why not otherwise."""

from __future__ import annotations


def test_the_demo_says_why_it_does_not_open_the_tui() -> None:
    from supervisor.cli.main import demo_in_tui

    assert demo_in_tui(no_tui=False, auto_approve=False, terminal=True) == (True, None)
    assert demo_in_tui(no_tui=True, auto_approve=True, terminal=True) == (False, None)
    tui, why = demo_in_tui(no_tui=False, auto_approve=True, terminal=True)
    assert not tui and why is not None and "--auto-approve" in why
    tui, why = demo_in_tui(no_tui=False, auto_approve=False, terminal=False)
    assert not tui and why is not None and "Not a terminal" in why
