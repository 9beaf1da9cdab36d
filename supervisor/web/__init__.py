"""``supervisor serve``: decide from a browser or phone.

Named operators log in with a token; each pending proposal has a decision page showing its full
canonical arguments escaped as in the TUI, and a decision goes through the same approvals
service and ledger path as the TUI's, recorded with the operator's name and ``via="web"``.
``/tui`` serves the whole TUI through textual-serve to logged-in operators.
"""
