"""The browser worker: a separate process running one gated browser-use Agent on Chromium.

    python -m sandboxes.browser.worker --config run.json
    python -m sandboxes.browser.worker --task "..." --allowed-domain 127.0.0.1:8000 \\
        [--model M] [--base-url URL] [--ledger-url URL] [--worker-id ID] [--max-steps N]

The worker records itself in the ledger's process table (kind ``browser_worker``) and beats its
heartbeat while it runs. Chromium runs headless with a fresh temporary profile (deleted at the
end), the allowed domains, and browser-use's telemetry, cloud sync, version check and extension
downloads turned off. The model is the configured OpenAI-compatible endpoint; its key comes
from ``OPENAI_API_KEY`` only. Every action passes the approval gate (`sandboxes.browser.gate`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import TypeAdapter

from sandboxes.browser.config import (
    CHROMIUM_ARGS,
    DENIED_EXIT_CODE,
    PARENT_ENV,
    QUIET_ENV,
    SENSITIVE_DATA_ENV,
    BrowserRunResult,
    BrowserWorkerConfig,
    SensitiveData,
    find_chromium,
    sensitive_values,
)
from sandboxes.browser.policy import BrowserPolicy
from sandboxes.browser.sensitive import hide_encoded_values
from supervisor.ledger.lease_time import renew_every
from supervisor.ledger.models import ProcessRecord, ProcessStep
from supervisor.ledger.service import ApprovalLedger
from supervisor.redact import KnownSecrets

if TYPE_CHECKING:
    from sandboxes.browser.gate import ApprovalGate
    from supervisor.store.provider import SQLModelProvider

PROCESS_KIND = "browser_worker"
HEARTBEAT_SECONDS = 2.0

_log = logging.getLogger("sandboxes.browser.worker")


def quiet_environment(workdir: Path) -> None:
    """Turn off browser-use's telemetry, cloud sync, version check and extension downloads.

    Must run before ``browser_use`` is imported. Its config directory and every temporary
    file (agent files, downloads, Chromium's scratch space) go under ``workdir``, which the
    worker deletes at the end, so nothing is left in the user's home or in /tmp.
    """
    scratch = workdir / "tmp"
    scratch.mkdir(parents=True, exist_ok=True)
    os.environ.update(QUIET_ENV)
    os.environ["BROWSER_USE_CONFIG_DIR"] = str(workdir / "browser-use-config")
    os.environ["TMPDIR"] = str(scratch)
    tempfile.tempdir = str(scratch)


class _Heartbeat:
    """Refreshes the worker's process record from a daemon thread until stopped."""

    def __init__(self, ledger: ApprovalLedger, process_id: str) -> None:
        self._ledger = ledger
        self._process_id = process_id
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="browser-heartbeat", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _beat(self) -> None:
        while not self._stop.wait(renew_every(self._ledger.lease_seconds, HEARTBEAT_SECONDS)):
            try:
                self._ledger.heartbeat(self._process_id)
            except Exception:  # a missed beat is not fatal; the next one retries
                _log.debug("heartbeat failed", exc_info=True)


def _build_agent(config: BrowserWorkerConfig, gate: ApprovalGate, workdir: Path) -> Any:
    from browser_use import Agent, BrowserProfile, BrowserSession, ChatOpenAI

    from sandboxes.browser.gate import GatedTools

    llm = ChatOpenAI(
        model=config.model,
        base_url=config.base_url or os.environ.get("OPENAI_BASE_URL"),
        api_key=os.environ.get("OPENAI_API_KEY") or "sk-unset",
        max_retries=1,
    )
    profile = BrowserProfile(
        executable_path=find_chromium(config.chromium_path),
        headless=config.headless,
        user_data_dir=str(workdir / "browser-use-user-data-dir-profile"),
        chromium_sandbox=False,
        enable_default_extensions=False,
        allowed_domains=config.policy.browser_use_domains(),
        args=list(CHROMIUM_ARGS),
        highlight_elements=False,
        keep_alive=False,
        downloads_path=str(workdir / "downloads"),
        auto_download_pdfs=False,
        captcha_solver=False,
    )
    return Agent(
        task=config.task,
        llm=llm,
        browser_session=BrowserSession(browser_profile=profile),
        tools=GatedTools(gate),
        use_vision=False,
        use_judge=False,
        directly_open_url=False,
        enable_planning=False,
        calculate_cost=False,
        generate_gif=False,
        max_failures=3,
        llm_timeout=120,
        step_timeout=int(gate.longest_wait) + 120,  # a step may wait out an extended approval
        file_system_path=str(workdir / "files"),
        enable_signal_handler=False,
        sensitive_data=dict(config.sensitive_data) or None,
    )


async def run_agent(
    config: BrowserWorkerConfig, gate: ApprovalGate, workdir: Path
) -> BrowserRunResult:
    """Run the gated agent to completion (or ``max_steps``) and summarise its history."""
    agent = _build_agent(config, gate, workdir)
    hide_encoded_values(agent, config.sensitive_data)  # percent-encoded in a URL, say
    gate.on_denied = agent.stop  # checked before every step and model call

    async def step_started(running: Any) -> None:
        """Say which step of how many the worker is on, and at which URL."""
        url = ""
        with contextlib.suppress(Exception):
            url = await running.browser_session.get_current_page_url()
        step = ProcessStep(
            kind="browser_step", detail=url, since=datetime.now(UTC),
            done=int(running.state.n_steps), total=config.max_steps,
        )  # fmt: skip
        with contextlib.suppress(Exception):  # a missed progress write is not fatal
            await asyncio.to_thread(gate.ledger.heartbeat, config.worker_id, step=step)

    try:
        history = await agent.run(max_steps=config.max_steps, on_step_start=step_started)
    finally:
        with contextlib.suppress(Exception):
            await agent.close()
        session = getattr(agent, "browser_session", None)
        if session is not None:
            with contextlib.suppress(Exception):
                await session.kill()
    return BrowserRunResult(
        worker_id=config.worker_id,
        exit_code=0,
        outcome="completed",
        success=history.is_successful(),
        final_result=history.final_result(),
        steps=history.number_of_steps(),
        errors=tuple(error for error in history.errors() if error),
    )


def _record(config: BrowserWorkerConfig, ledger: ApprovalLedger) -> None:
    now = datetime.now(UTC)
    ledger.upsert_process(
        ProcessRecord(
            process_id=config.worker_id,
            kind=PROCESS_KIND,
            pid=os.getpid(),
            host=socket.gethostname(),
            command=f"browser-use worker: {config.task[:120]}",
            status="running",
            started_at=now,
            heartbeat_at=now,
        )
    )


def run_worker(config: BrowserWorkerConfig) -> BrowserRunResult:
    """Run one browser worker in this process: record it, run the agent, clean up.

    SIGTERM stops the agent (pending proposals are withdrawn) and still cleans up. So does the
    gate when the browser loaded a page off the allowlist: the run ends with outcome
    ``denied``, process status ``stopped`` and exit code `DENIED_EXIT_CODE`.

    Returns:
        The run's summary (also written to ``config.result_path`` when set).
    """
    config = take_sensitive_data(config)
    workdir = Path(tempfile.mkdtemp(prefix="supervisor-browser-"))
    quiet_environment(workdir)
    provider = open_worker_provider(config)
    secrets = provider.trace_secrets
    ledger = provider.ledger
    _record(config, ledger)
    from sandboxes.browser.gate import ApprovalGate

    gate = ApprovalGate(
        ledger,
        config.policy,
        worker_id=config.worker_id,
        owner=config.owner,
        thread_id=config.thread_id,
        approval_timeout=config.approval_timeout,
    )
    heartbeat = _Heartbeat(ledger, config.worker_id)
    heartbeat.start()
    status, exit_code = "failed", 1
    result = BrowserRunResult(worker_id=config.worker_id, exit_code=1, errors=("did not finish",))
    try:
        result = _run_until_signalled(config, gate, workdir)
        status, exit_code = "exited", 0
    except asyncio.CancelledError:
        status, exit_code = "stopped", 143
        result = BrowserRunResult(
            worker_id=config.worker_id, exit_code=143, outcome="stopped", errors=("stopped",)
        )
    except Exception as exc:
        # The traceback can quote task text or page data: known secret values are replaced.
        trace = "".join(traceback.format_exception(exc))
        _log.error("browser worker failed:\n%s", secrets.redact_text(trace))
        result = BrowserRunResult(
            worker_id=config.worker_id, exit_code=1, errors=(f"{type(exc).__name__}: {exc}",)
        )
    finally:
        if gate.denial is not None:
            status, exit_code = "stopped", DENIED_EXIT_CODE
            result = result.model_copy(
                update={
                    "outcome": "denied",
                    "denial": gate.denial,
                    "errors": (
                        *(error for error in result.errors if error != "stopped"),
                        f"denied: {gate.denial.reason}",
                    ),
                }
            )
        gate.withdraw_pending()
        heartbeat.stop()
        with contextlib.suppress(Exception):
            ledger.heartbeat(config.worker_id, status=status, exit_code=exit_code)
        shutil.rmtree(workdir, ignore_errors=True)
        result = _redacted(result, secrets)
        if config.result_path:
            Path(config.result_path).write_text(
                result.model_copy(update={"exit_code": exit_code}).model_dump_json(),
                encoding="utf-8",
            )
        provider.close()
    return result.model_copy(update={"exit_code": exit_code})


def take_sensitive_data(config: BrowserWorkerConfig) -> BrowserWorkerConfig:
    """``config`` with the ``sensitive_data`` its task passed in :data:`SENSITIVE_DATA_ENV`.

    The variable is removed from this process's environment first, so Chromium and anything
    else the worker starts never inherit it.

    Raises:
        ValueError: The variable is not a JSON object of the browser-use form.
    """
    raw = os.environ.pop(SENSITIVE_DATA_ENV, None)
    if not raw:
        return config
    data = TypeAdapter(SensitiveData).validate_json(raw)
    return config.model_copy(update={"sensitive_data": data})


def open_worker_provider(config: BrowserWorkerConfig) -> SQLModelProvider:
    """The worker's ledger provider, knowing the task's secrets (``sensitive_data`` values and
    the model's API key): every trace event the worker writes has them replaced."""
    from supervisor.store.provider import SQLModelProvider

    provider = SQLModelProvider(config.ledger_url)
    provider.trace_secrets.add(
        *sensitive_values(config.sensitive_data), os.environ.get("OPENAI_API_KEY")
    )
    return provider


def _redacted(result: BrowserRunResult, secrets: KnownSecrets) -> BrowserRunResult:
    """``result`` with known secret values replaced in its text."""
    final = result.final_result
    return result.model_copy(
        update={
            "final_result": secrets.redact_text(final) if final else final,
            "errors": tuple(secrets.redact_text(error) for error in result.errors),
        }
    )


def _stop_with_parent(parent: int) -> None:
    """SIGTERM this worker once ``parent`` (the process that started it) is gone: nobody is
    left to stop it, and its pending proposals would wait for decisions that cannot run."""
    while os.getppid() == parent:
        time.sleep(0.5)
    os.kill(os.getpid(), signal.SIGTERM)


def _run_until_signalled(
    config: BrowserWorkerConfig, gate: ApprovalGate, workdir: Path
) -> BrowserRunResult:
    async def main() -> BrowserRunResult:
        task = asyncio.current_task()
        loop = asyncio.get_running_loop()
        if task is not None and threading.current_thread() is threading.main_thread():
            loop.add_signal_handler(signal.SIGTERM, task.cancel)
            loop.add_signal_handler(signal.SIGINT, task.cancel)
            parent = os.environ.get(PARENT_ENV, "")
            if parent.isdigit():  # started by a BrowserTask (gone already: stop at once)
                threading.Thread(
                    target=_stop_with_parent, args=(int(parent),), name="worker-parent",
                    daemon=True,
                ).start()  # fmt: skip
        return await run_agent(config, gate, workdir)

    return asyncio.run(main())


def _parse(argv: Sequence[str] | None) -> BrowserWorkerConfig:
    parser = argparse.ArgumentParser(
        prog="python -m sandboxes.browser.worker", description=__doc__.splitlines()[0]
    )
    parser.add_argument(
        "--config", type=Path, help="JSON BrowserWorkerConfig (other flags ignored)"
    )
    parser.add_argument("--task")
    parser.add_argument("--allowed-domain", action="append", default=[])
    parser.add_argument("--model", default="gpt-4o-mini")
    parser.add_argument("--base-url")
    parser.add_argument("--ledger-url")
    parser.add_argument("--worker-id")
    parser.add_argument("--chromium")
    parser.add_argument("--max-steps", type=int, default=20)
    parser.add_argument("--approval-timeout", type=float, default=600.0)
    parser.add_argument("--result")
    args = parser.parse_args(argv)
    if args.config is not None:
        return BrowserWorkerConfig.model_validate_json(args.config.read_text(encoding="utf-8"))
    if not args.task:
        parser.error("--task (or --config) is required")
    fields: dict[str, Any] = {
        "task": args.task,
        "policy": BrowserPolicy(allowed_domains=tuple(args.allowed_domain)),
        "model": args.model,
        "base_url": args.base_url,
        "ledger_url": args.ledger_url,
        "chromium_path": args.chromium,
        "max_steps": args.max_steps,
        "approval_timeout": args.approval_timeout,
        "result_path": args.result,
    }
    if args.worker_id:
        fields["worker_id"] = args.worker_id
    return BrowserWorkerConfig(**fields)


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point; prints the run's JSON summary and returns its exit code."""
    logging.basicConfig(
        stream=sys.stderr,
        level=os.environ.get("SUPERVISOR_BROWSER_LOG", "WARNING").upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    config = _parse(argv)
    result = run_worker(config)
    print(result.model_dump_json(), flush=True)
    return result.exit_code


if __name__ == "__main__":
    raise SystemExit(main())
