"""The composition root: ``make_app`` builds the services and the app for the CLI and tests."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, ClassVar, Protocol

from textual.app import App, SystemCommand
from textual.binding import Binding, BindingType
from textual.notifications import SeverityLevel
from textual.screen import Screen

from screens.literal import escaped_lines
from screens.main_screen import MainScreen
from supervisor.assets import asset_path
from supervisor.ledger.service import ApprovalLedger
from supervisor.services.approvals import ApprovalsService
from supervisor.services.connection import LedgerConnection
from supervisor.services.grants import GrantsService
from supervisor.services.identity import ApproverIdentity
from supervisor.services.process_control import ProcessControl
from supervisor.services.processes import ProcessesService
from supervisor.services.reconciliation import ReconciliationService
from supervisor.services.results import ResultsService
from supervisor.services.settings import SupervisorSettings
from supervisor.services.traces import TracesService
from supervisor.services.webhooks import WebhookDispatcher, WebhookSender
from supervisor.store.provider import SQLModelProvider

if TYPE_CHECKING:
    from supervisor.rules.replay import ReplayReport

#: (action, title, help) of the main screen's commands, listed in the command palette.
MAIN_COMMANDS: tuple[tuple[str, str, str], ...] = (
    ("approve", "Approve proposal", "Approve the selected pending proposal"),
    ("batch_approve", "Batch approve identical", "Approve every pending twin (tool + args hash)"),
    ("approve_similar", "Approve and allow similar", "Approve and grant similar calls for a while"),
    ("grants_view", "Grants", "List, and revoke, what allow-similar grants allow"),
    ("reject", "Reject proposal", "Reject the selected proposal with a reason"),
    ("cancel_proposal", "Cancel proposal", "Withdraw the selected proposal"),
    ("edit", "Edit arguments", "Supersede the selected proposal with edited arguments"),
    ("extend", "Extend expiry", "Push back the selected proposal's expiry"),
    ("open_blob", "Open offloaded result", "View the selected event's full result"),
    ("toggle_hash", "Toggle full args hash", "Show the args hash in full"),
    ("focus_filter", "Filter the inbox", "Focus the inbox filter"),
    ("focus_trace", "Focus the live trace", "Move to the trace"),
    ("start_run", "Start a supervised run", "supervisor run MODULE:FACTORY --input TEXT"),
    ("follow_log", "Follow a run's output", "Tail the selected process's log"),
    ("stop_process", "Stop a run", "SIGTERM the selected process, SIGKILL after a grace"),
    ("reconcile_view", "Reconcile stopped calls", "Record whether calls cut off mid-run ran"),
)


class PollingService(Protocol):
    """A service that follows the ledger in its own thread while the app runs."""

    def start(self) -> None: ...

    def stop(self) -> None: ...


class SupervisorApp(App[None]):
    """The supervisor. Build it with :func:`make_app`; it only composes screens.

    Args:
        first_screen: The screen shown when the app starts.
        services: Started right after the first screen is pushed, stopped when the app ends.
        later: Started once the first frame is on screen (what that frame does not wait for:
            their threads would compete with it), stopped when the app ends.
        cleanups: Called last when the app ends, after its screens are gone (closes what
            :func:`make_app` opened: the ledger, the review index).
    """

    TITLE = "Agent Supervisor"
    CSS_PATH = asset_path("styles", "supervisor.tcss")
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "Quit", id="quit"),
        Binding("question_mark,f1", "help", "Help", id="help"),
    ]

    def __init__(
        self,
        first_screen: Screen[None],
        *,
        services: Sequence[PollingService] = (),
        later: Sequence[PollingService] = (),
        cleanups: Sequence[Callable[[], None]] = (),
    ) -> None:
        super().__init__()
        self.first_screen = first_screen
        self.services = tuple(services)
        self.later = tuple(later)
        self._started: list[PollingService] = []
        self.cleanups = tuple(cleanups)
        self.after_first_frame: Callable[[], None] | None = None
        """Called once the first frame is on screen (``supervisor demo`` starts its agents)."""

    def on_mount(self) -> None:
        self.push_screen(self.first_screen)
        self._start(self.services)

    def on_ready(self) -> None:
        self._start(self.later)
        if self.after_first_frame is not None:
            self.after_first_frame()

    def _start(self, services: Sequence[PollingService]) -> None:
        for service in services:
            service.start()
            self._started.append(service)

    def on_unmount(self) -> None:
        for service in self._started:
            service.stop()
        for close in self.cleanups:
            close()

    def write_terminal(self, text: str) -> None:
        """Write raw ``text`` (notification escape sequences) to the terminal, the way Textual
        writes its own bell and clipboard sequences; nothing when running headless."""
        if not self.is_headless and self._driver is not None:
            self._driver.write(text)

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = True,
    ) -> None:
        """Show a toast; its text is always literal and escaped, whatever ``markup`` says.

        Toasts carry ledger text (tool names, agent ids, approvers, error messages), and
        Textual parses a toast as markup by default: ``[/]`` would kill the app. Every
        ``notify()`` of every screen ends here, so no call site can forget.
        """
        super().notify(
            escaped_lines(message),
            title=escaped_lines(title),
            severity=severity,
            timeout=timeout,
            markup=False,
        )

    def action_help(self) -> None:
        """Every key of the screen on top (not of the help itself, nor twice)."""
        from screens.help_screen import HelpScreen

        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(self.screen))

    def get_system_commands(self, screen: Screen[object]) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        if isinstance(screen, MainScreen):
            for action, title, help_text in MAIN_COMMANDS:
                if screen.check_action(action, ()):

                    def run(name: str = action) -> None:
                        self.call_next(screen.run_action, name)

                    yield SystemCommand(title, help_text, run)


def make_app(
    settings: SupervisorSettings | None = None,
    *,
    ledger: ApprovalLedger | None = None,
    identity: ApproverIdentity | None = None,
    review_source: str | None = None,
    process_control: ProcessControl | None = None,
) -> SupervisorApp:
    """Build the supervisor app and its services.

    Args:
        settings: Instance settings; ``settings.db_url`` picks the ledger when ``ledger`` is
            not given (``None`` means the default ledger).
        ledger: An open ledger to use (tests pass one over a temporary SQLite file).
        identity: Who decides; defaults to OS user@host plus a fresh instance id, via=tui.
        review_source: Open the read-only offline review of this ledger path/URL or JSONL
            trace instead of the live screens.
        process_control: Starts and stops supervised runs (default: on the same ledger).

    Returns:
        The app, not yet running.
    """
    settings = settings or SupervisorSettings()
    if review_source is not None:
        # The offline review's screen and index are imported only for it: the live supervisor
        # starts without them.
        from screens.review_screen import ReviewScreen
        from supervisor.services.review.service import ReviewService

        review = ReviewService(review_source)
        return SupervisorApp(ReviewScreen(review=review), cleanups=[review.close])
    provider: SQLModelProvider | None = None
    if ledger is None:
        provider = SQLModelProvider(settings.db_url)
        ledger = provider.ledger
    connection = LedgerConnection()
    identity = identity or ApproverIdentity.current("tui")
    approvals = ApprovalsService(ledger, identity, settings, connection=connection)
    # Runs recovery at start and on every refresh: a call whose executor died mid-call shows
    # as needs_reconciliation without anyone asking.
    reconciliation = ReconciliationService(ledger, identity, connection=connection)
    traces = TracesService(ledger, settings, connection=connection)
    grants = GrantsService(approvals)
    processes = ProcessesService(
        ledger, settings, pending=approvals.pending, trace=traces.events, connection=connection
    )
    control = process_control or ProcessControl(
        ledger, provider.url if provider is not None else settings.db_url
    )
    webhooks = WebhookDispatcher(WebhookSender(ledger)) if settings.webhooks else None
    main = MainScreen(
        approvals=approvals,
        traces=traces,
        processes=processes,
        results=ResultsService(ledger),
        process_control=control,
        settings=settings,
        connection=connection,
        reconciliation=reconciliation,
        grants=grants,
        webhooks=webhooks,
    )
    return SupervisorApp(
        main,
        services=[approvals],  # the inbox: what the first screen is for
        later=[
            grants,
            traces,
            processes,
            reconciliation,
            *([webhooks] if webhooks is not None else []),
        ],
        cleanups=[control.close, *([provider.close] if provider is not None else [])],
    )


def make_replay_app(report: ReplayReport, source: str) -> SupervisorApp:
    """The read-only replay screen of one candidate policy (``policy replay FILE --tui``)."""
    from screens.replay_screen import ReplayScreen

    return SupervisorApp(ReplayScreen(report, source))
