"""Telling the operator that a run is blocked on them: once per proposal, then once before expiry.

A proposal is *blocked* when it reaches the pending inbox: no rule and no grant decided it (a
call a rule or grant decides is recorded decided, so it never reaches the inbox and is never
announced). :class:`BlockedNotices` turns inbox changes into notices, one per proposal per
supervisor instance, and one reminder when a proposal that has lived longer than the reminder
window is about to expire ("expires in 5 min"). Proposals already pending when the instance
started are in its inbox, not announced.

:class:`Notifier` sends a notice through the channels the operator chose:

* ``bell``: the terminal bell;
* ``osc``: the desktop-notification escape sequences terminals understand, OSC 9 (iTerm2,
  WezTerm, Windows Terminal, kitty, foot, ghostty) and OSC 777 (urxvt, VTE terminals, ghostty);
  terminals without them ignore them;
* ``desktop``: ``notify-send`` (libnotify over D-Bus) when it is on ``PATH``.

Choose with ``supervisor --notify bell,osc,desktop`` (the default), ``--notify none``, or
``SUPERVISOR_NOTIFY``. Tool names, agent names and reasons come from agents and models: every
channel gets them with control, bidi and invisible characters escaped, field separators of the
escape sequences escaped, and, for ``notify-send`` (whose body some servers read as markup),
markup characters escaped too; the program is run without a shell.
"""

from __future__ import annotations

import html
import logging
import os
import shutil
import subprocess
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from supervisor.errors import SupervisorError
from supervisor.ledger.models import Proposal
from supervisor.services.rendering import visible_escapes

__all__ = [
    "CHANNELS",
    "BlockedNotices",
    "InvalidNotifyChannels",
    "Notice",
    "Notifier",
    "osc_sequences",
    "parse_channels",
]

logger = logging.getLogger(__name__)

CHANNELS = ("bell", "osc", "desktop")
_APP = "Agent Supervisor"


class InvalidNotifyChannels(SupervisorError, ValueError):
    """``--notify`` / ``SUPERVISOR_NOTIFY`` names a channel that does not exist."""

    code = "invalid_notify_channels"


def parse_channels(text: str | None) -> frozenset[str]:
    """The channels in a comma-separated list; ``None`` or empty: all; ``none``: no channel.

    Raises:
        InvalidNotifyChannels: a name is not one of :data:`CHANNELS`.
    """
    if text is None or not text.strip():
        return frozenset(CHANNELS)
    names = {name.strip().lower() for name in text.split(",") if name.strip()}
    if names == {"none"}:
        return frozenset()
    unknown = sorted(names - set(CHANNELS))
    if unknown:
        raise InvalidNotifyChannels(
            f"Unknown notification channel {', '.join(map(repr, unknown))}.",
            hint=f"Use a comma-separated list of {', '.join(CHANNELS)}, or none.",
            unknown=unknown,
        )
    return frozenset(names)


@dataclass(frozen=True, slots=True)
class Notice:
    """One notification: what the operator reads first, then the detail."""

    proposal_id: str
    title: str
    body: str
    kind: str = "blocked"  # or "expiring"


#: More notices than this falling due together are sent as one.
BURST = 3


def coalesced(notices: Sequence[Notice]) -> list[Notice]:
    """What to send for notices that fall due together: each one, up to :data:`BURST`; past
    that one notice naming the first and how many more, so a burst of proposals (a team's
    agents after a deploy, many expiring at once) rings the bell and raises a desktop
    notification once, not once per proposal."""
    if len(notices) <= BURST:
        return list(notices)
    first, more = notices[0], len(notices) - 1
    what = "need approval" if first.kind == "blocked" else "expire soon"
    summary = Notice(
        first.proposal_id,
        f"{len(notices)} proposals {what}",
        f"{first.title}. {first.body} (+{more} more)",
        kind=first.kind,
    )
    return [summary]


def _minutes(seconds: float) -> str:
    if seconds < 90:
        return f"{max(int(seconds), 0)} s"
    return f"{round(seconds / 60)} min"


class BlockedNotices:
    """Which notices to send: one per blocked proposal, one reminder before its expiry.

    Args:
        remind_before_seconds: Remind when a pending proposal expires sooner than this; a
            proposal whose whole lifetime is shorter is only announced (its notice already
            says when it expires).
    """

    def __init__(self, remind_before_seconds: float = 300.0) -> None:
        self.remind_before_seconds = remind_before_seconds
        self._announced: set[str] = set()
        self._reminded: set[str] = set()

    def seen(self, proposals: Iterable[Proposal]) -> None:
        """Mark proposals as known without announcing them (the inbox at start)."""
        for proposal in proposals:
            self._announced.add(proposal.proposal_id)
            if self._short_lived(proposal):
                self._reminded.add(proposal.proposal_id)

    def blocked(self, proposals: Iterable[Proposal], now: datetime) -> list[Notice]:
        """Notices for the pending proposals not announced before (at most once each)."""
        notices = []
        for proposal in proposals:
            if proposal.proposal_id in self._announced or proposal.status.value != "pending":
                continue
            self._announced.add(proposal.proposal_id)
            if self._short_lived(proposal):
                self._reminded.add(proposal.proposal_id)
            left = (proposal.expires_at - now).total_seconds()
            notices.append(
                Notice(
                    proposal.proposal_id,
                    f"Approval needed: {proposal.tool_name}",
                    f"{proposal.owner or 'An agent'} is waiting for you (expires in "
                    f"{_minutes(left)}). Proposal {proposal.proposal_id[:8]}.",
                )
            )
        return notices

    def expiring(self, pending: Iterable[Proposal], now: datetime) -> list[Notice]:
        """One reminder per pending proposal about to expire."""
        notices = []
        for proposal in pending:
            left = (proposal.expires_at - now).total_seconds()
            if not 0 < left <= self.remind_before_seconds:
                continue
            if proposal.proposal_id in self._reminded:
                continue
            self._reminded.add(proposal.proposal_id)
            notices.append(
                Notice(
                    proposal.proposal_id,
                    f"Expires in {_minutes(left)}: {proposal.tool_name}",
                    f"{proposal.owner or 'An agent'} is still waiting for you. Proposal "
                    f"{proposal.proposal_id[:8]}.",
                    kind="expiring",
                )
            )
        return notices

    def _short_lived(self, proposal: Proposal) -> bool:
        lifetime = (proposal.expires_at - proposal.created_at).total_seconds()
        return lifetime <= self.remind_before_seconds


def _osc_field(text: str) -> str:
    """``text`` safe inside an OSC string: hidden characters escaped, and ``;`` (OSC 777's
    field separator) escaped as ``\\u003b``."""
    return visible_escapes(text).replace(";", "\\u003b")


def osc_sequences(notice: Notice, *, tmux: bool = False) -> str:
    """OSC 9 and OSC 777 desktop notifications for ``notice`` (BEL-terminated).

    With ``tmux``, each is wrapped for tmux's passthrough (``ESC P tmux; ... ESC \\``, its
    escapes doubled), which tmux forwards to the outer terminal when ``allow-passthrough`` is on.
    """
    title, body = _osc_field(notice.title), _osc_field(notice.body)
    # OSC 9 text starting with a digit and ";" is a progress report in some terminals: the
    # app name comes first.
    sequences = [f"\x1b]9;{_APP}: {title}: {body}\x07", f"\x1b]777;notify;{title};{body}\x07"]
    if tmux:
        sequences = [f"\x1bPtmux;{seq.replace(chr(27), chr(27) * 2)}\x1b\\" for seq in sequences]
    return "".join(sequences)


class Notifier:
    """Sends notices through the chosen channels.

    Args:
        channels: Channel names (see :data:`CHANNELS`).
        write_terminal: Writes raw text to the operator's terminal (``None``: no terminal, so
            no bell and no escape sequences).
        notify_send: Path of ``notify-send``; by default looked up on ``PATH`` once.
        tmux: Wrap escape sequences for tmux's passthrough; by default when ``TMUX`` is set.
    """

    def __init__(
        self,
        channels: Iterable[str],
        write_terminal: Callable[[str], None] | None,
        notify_send: str | None = None,
        tmux: bool | None = None,
    ) -> None:
        self.channels = frozenset(channels)
        self.tmux = bool(os.environ.get("TMUX")) if tmux is None else tmux
        self.write_terminal = write_terminal
        self.notify_send = notify_send or shutil.which("notify-send")
        self.sent = 0

    def send(self, notice: Notice) -> None:
        """Send ``notice`` once through every chosen channel that is available."""
        self.sent += 1
        terminal = ""
        if "bell" in self.channels:
            terminal += "\x07"
        if "osc" in self.channels:
            terminal += osc_sequences(notice, tmux=self.tmux)
        if terminal and self.write_terminal is not None:
            self.write_terminal(terminal)
        if "desktop" in self.channels and self.notify_send:
            threading.Thread(target=self._desktop, args=(notice,), daemon=True).start()

    def _desktop(self, notice: Notice) -> None:
        urgency = "critical" if notice.kind == "expiring" else "normal"
        title = visible_escapes(notice.title)
        body = html.escape(visible_escapes(notice.body), quote=False)
        command = [str(self.notify_send), f"--app-name={_APP}", f"--urgency={urgency}",
                   "--", title, body]  # fmt: skip
        try:
            subprocess.run(command, check=False, timeout=10, capture_output=True,
                           stdin=subprocess.DEVNULL)  # fmt: skip
        except (OSError, subprocess.SubprocessError) as error:
            logger.warning("notify-send failed: %s", type(error).__name__)
