"""`BrowserTask`: start a gated browser run from the SDK, as a separate worker process.

    handle = BrowserTask("Fill in the form", allowed_domains=["127.0.0.1:8000"],
                         base_url="http://127.0.0.1:9000/v1", api_key="sk-...",
                         ledger_url="sqlite:///ledger.db").start()
    ...  # approve the proposals it files, from the TUI or the SDK
    result = handle.wait(timeout=300)

Nothing here imports browser-use; only the worker process does.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from sandboxes.browser.config import (
    PARENT_ENV,
    SENSITIVE_DATA_ENV,
    BrowserRunResult,
    BrowserWorkerConfig,
    SensitiveData,
)
from sandboxes.browser.policy import BrowserPolicy

STOP_GRACE_SECONDS = 5.0


class BrowserTaskHandle:
    """A running browser worker.

    Attributes:
        process_id: The worker's id in the ledger's process table (and in execution targets).
        pid: The OS process id (it leads its own process group, Chromium included).
    """

    def __init__(
        self,
        process: subprocess.Popen[bytes],
        config: BrowserWorkerConfig,
        rundir: Path | None = None,
    ) -> None:
        self._process = process
        self._config = config
        self._rundir = rundir
        self._result_cache: BrowserRunResult | None = None
        self.process_id = config.worker_id
        self.pid = process.pid

    @property
    def running(self) -> bool:
        """True while the worker process has not exited."""
        return self._process.poll() is None

    def wait(self, timeout: float | None = None) -> BrowserRunResult:
        """Wait for the worker to finish.

        Raises:
            subprocess.TimeoutExpired: It is still running after ``timeout`` seconds.
        """
        exit_code = self._process.wait(timeout=timeout)
        return self._result(exit_code)

    def stop(self, grace: float = STOP_GRACE_SECONDS) -> BrowserRunResult:
        """Stop the worker and return its result.

        SIGTERM goes to the worker alone (it withdraws pending proposals, closes Chromium and
        deletes its profile); after ``grace`` seconds, or once it exited, its whole process
        group gets SIGKILL so no Chromium is left behind.
        """
        if self._process.poll() is None:
            # The worker alone first: it withdraws pending proposals and closes Chromium itself.
            with contextlib.suppress(ProcessLookupError):
                os.kill(self._process.pid, signal.SIGTERM)
            deadline = time.monotonic() + grace
            while self._process.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self._process.pid, signal.SIGKILL)
        return self._result(self._process.wait())

    def _result(self, exit_code: int) -> BrowserRunResult:
        if self._result_cache is None:
            assert self._config.result_path is not None
            self._result_cache = BrowserRunResult.read(
                Path(self._config.result_path), worker_id=self.process_id, exit_code=exit_code
            )
            if self._rundir is not None:
                shutil.rmtree(self._rundir, ignore_errors=True)
        return self._result_cache


class BrowserTask:
    """A browser task to run in a gated worker process.

    Args:
        task: What the browser agent should do.
        allowed_domains: Where it may go (see `sandboxes.browser.policy`); merged into
            ``policy`` when both are given.
        policy: Allow/ask/deny rules; defaults ask for every action that is not read-only.
        model: Model name at the OpenAI-compatible endpoint.
        base_url: The endpoint; defaults to ``$OPENAI_BASE_URL``.
        api_key: Its key; defaults to ``$OPENAI_API_KEY``; passed by environment only.
        llm_config: Alternative to the three above: ``{"model", "base_url", "api_key"}``.
        ledger_url: The ledger URL; defaults to ``$SUPERVISOR_DB`` or the embedded file.
        provider: Alternatively a ``SQLModelProvider`` whose URL is used.
        sensitive_data: browser-use's ``sensitive_data`` (placeholder -> value, or domain ->
            {placeholder: value}): the model sees only the placeholders. Passed by environment
            only (never in the config file), and every value (raw or in its usual encodings,
            percent-encoded in a loaded URL included) is redacted from the worker's trace
            events and result.
        worker_options: Other `BrowserWorkerConfig` fields (``max_steps``, ``approval_timeout``,
            ``owner``, ``thread_id``, ``chromium_path``, ``worker_id``, ...).
    """

    def __init__(
        self,
        task: str,
        allowed_domains: Sequence[str] = (),
        *,
        policy: BrowserPolicy | None = None,
        model: str | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        llm_config: Mapping[str, Any] | None = None,
        ledger_url: str | None = None,
        provider: Any = None,
        sensitive_data: Mapping[str, str | Mapping[str, str]] | None = None,
        **worker_options: Any,
    ) -> None:
        llm = dict(llm_config or {})
        self._sensitive_data: SensitiveData = {
            key: dict(value) if isinstance(value, Mapping) else value
            for key, value in (sensitive_data or {}).items()
        }
        base_policy = policy or BrowserPolicy()
        domains = tuple(dict.fromkeys((*base_policy.allowed_domains, *allowed_domains)))
        if ledger_url is None and provider is not None:
            ledger_url = str(provider.url)
        self._api_key = api_key or llm.get("api_key")
        self.config = BrowserWorkerConfig(
            task=task,
            policy=base_policy.model_copy(update={"allowed_domains": domains}),
            model=model or llm.get("model") or "gpt-4o-mini",
            base_url=base_url or llm.get("base_url"),
            ledger_url=ledger_url,
            **worker_options,
        )

    def start(self, *, env: Mapping[str, str] | None = None) -> BrowserTaskHandle:
        """Spawn the worker process (its own session, so stop() reaches Chromium too).

        Args:
            env: Extra environment for the worker.

        Returns:
            A handle with ``process_id``, ``pid``, ``wait()`` and ``stop()``.
        """
        rundir = Path(tempfile.mkdtemp(prefix="supervisor-browser-task-"))
        config = self.config.model_copy(
            update={"result_path": self.config.result_path or str(rundir / "result.json")}
        )
        config_path = rundir / "config.json"
        config_path.write_text(config.model_dump_json(), encoding="utf-8")
        child_env = {**os.environ, **(env or {})}
        if self._api_key:
            child_env["OPENAI_API_KEY"] = self._api_key
        child_env.pop(SENSITIVE_DATA_ENV, None)
        child_env[PARENT_ENV] = str(os.getpid())  # the worker stops once this process is gone
        if self._sensitive_data:
            child_env[SENSITIVE_DATA_ENV] = json.dumps(self._sensitive_data)
        process = subprocess.Popen(
            [sys.executable, "-m", "sandboxes.browser.worker", "--config", str(config_path)],
            env=child_env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            start_new_session=True,
        )
        return BrowserTaskHandle(process, config, rundir)

    def run(
        self, timeout: float | None = None, *, env: Mapping[str, str] | None = None
    ) -> BrowserRunResult:
        """Start the worker and wait for it (for scripts and tests); stops it on timeout.

        Raises:
            subprocess.TimeoutExpired: It did not finish within ``timeout`` (it was stopped).
        """
        handle = self.start(env=env)
        try:
            return handle.wait(timeout=timeout)
        except BaseException:
            handle.stop()
            raise
