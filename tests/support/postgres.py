"""A throwaway PostgreSQL cluster for tests.

`PostgresCluster` runs `initdb` + `pg_ctl` on a fresh temporary directory, listening only on
127.0.0.1 on a free port with trust authentication, so tests exercise a real server without
touching the machine's own cluster (never `pg_ctlcluster`). PostgreSQL refuses to run as root,
so when the tests run as root (CI does) the server runs as the `postgres` OS user.

With ``SUPERVISOR_TEST_PG_URL`` set (see `PostgresCluster.from_env`), an existing server is
used instead and only databases are created and dropped on it.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import pwd
import re
import shlex
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import psycopg
from psycopg import sql
from sqlalchemy.engine import URL, make_url

ENV_URL = "SUPERVISOR_TEST_PG_URL"
"""A server URL (any SQLAlchemy/libpq postgresql URL) to use instead of starting a cluster."""

INSTALL_HINT = "run `bash .ci/system-deps.sh` to install them"
DRIVER = "postgresql+psycopg"
SUPERUSER = "postgres"

# Settings that trade durability for speed; a test cluster is thrown away anyway.
FAST_SETTINGS: Mapping[str, str] = {
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
}


class PostgresNotInstalled(RuntimeError):
    """The PostgreSQL server binaries (initdb, pg_ctl) are not on this machine."""


class PostgresStartError(RuntimeError):
    """The throwaway cluster could not be initialised or started."""


@dataclass(frozen=True)
class PgBinaries:
    """Paths of the server programs a throwaway cluster needs."""

    initdb: Path
    pg_ctl: Path


def _version_key(bin_dir: Path) -> tuple[int, ...]:
    """Sort key for /usr/lib/postgresql/<ver>/bin: numeric version, newest last."""
    return tuple(int(part) for part in re.findall(r"\d+", bin_dir.parent.name))


def find_binaries() -> PgBinaries:
    """Locate initdb and pg_ctl: PATH first, then Debian's newest /usr/lib/postgresql/*/bin."""
    initdb, pg_ctl = shutil.which("initdb"), shutil.which("pg_ctl")
    if initdb and pg_ctl:
        return PgBinaries(Path(initdb), Path(pg_ctl))
    candidates = sorted(Path("/usr/lib/postgresql").glob("*/bin"), key=_version_key, reverse=True)
    for bin_dir in candidates:
        if os.access(bin_dir / "initdb", os.X_OK) and os.access(bin_dir / "pg_ctl", os.X_OK):
            return PgBinaries(bin_dir / "initdb", bin_dir / "pg_ctl")
    raise PostgresNotInstalled(
        "PostgreSQL server binaries (initdb, pg_ctl) not found on PATH or in "
        f"/usr/lib/postgresql/*/bin; {INSTALL_HINT}"
    )


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free a moment ago (the kernel picks it for a bound socket)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


def listening_connections(url: str) -> int:
    """Connections to ``url``'s database whose last statement was a ``LISTEN``."""
    with psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://")) as reader:
        row = reader.execute(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE datname = current_database() AND query LIKE 'LISTEN %'"
        ).fetchone()
    assert row is not None
    return int(row[0])


def advisory_lock_waiters(engine: Any) -> int:
    """How many sessions of ``engine``'s server wait for an advisory lock now (the ledger's
    chain lock is one)."""
    import sqlalchemy as sa

    with engine.connect() as connection:
        return int(
            connection.execute(
                sa.text(
                    "SELECT count(*) FROM pg_stat_activity"
                    " WHERE wait_event_type = 'Lock' AND wait_event = 'advisory'"
                )
            ).scalar_one()
        )


def statements_sent(monkeypatch: Any) -> list[str]:
    """From now on (until ``monkeypatch`` is undone), the SQL of every statement this process
    sends: through psycopg's cursors (Core) or on libpq (``supervisor.store.direct_pg``'s
    round trips, as sent: a one-row write in its checked form)."""
    from supervisor.store.direct_pg import RoundTrip

    sent: list[str] = []
    real_execute, real_add = psycopg.Cursor.execute, RoundTrip.add

    def execute(cursor: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        sent.append(str(query))
        return real_execute(cursor, query, *args, **kwargs)

    def add(trip: Any, statement: Any, params: Any, *, sql: str | None = None) -> None:
        sent.append(sql or statement.sql)
        real_add(trip, statement, params, sql=sql)

    monkeypatch.setattr(psycopg.Cursor, "execute", execute)
    monkeypatch.setattr(RoundTrip, "add", add)
    return sent


def unique_database_name(hint: str = "test") -> str:
    """A valid, unique database name that starts with a readable form of ``hint``."""
    readable = re.sub(r"[^a-z0-9]+", "_", hint.lower()).strip("_")[:40] or "test"
    return f"t_{readable}_{uuid.uuid4().hex[:10]}"


def _traversable_by(path: Path, uid: int) -> bool:
    """Whether every directory down to ``path`` can be entered by ``uid`` (mode bits only)."""
    for part in (path, *path.parents):
        st = part.stat()
        if st.st_uid != uid and not st.st_mode & 0o001:
            return False
    return True


class PostgresCluster:
    """A PostgreSQL server for one test session: a throwaway cluster, or an existing server.

    Use as a context manager, or call `start` and `stop` (stop is idempotent and is also
    registered with `atexit`, so no postmaster outlives the Python process).
    """

    def __init__(
        self,
        *,
        server_url: str | None = None,
        fast: bool = True,
        settings: Mapping[str, str] | None = None,
        os_user: str = SUPERUSER,
        base_dir: str | os.PathLike[str] | None = None,
        start_timeout: float = 60.0,
    ) -> None:
        """Configure, but do not start, a cluster.

        server_url: use this running server instead of starting one.
        fast: turn off fsync, synchronous_commit and full_page_writes (faster, not durable).
        settings: extra `postgres -c name=value` settings.
        os_user: the OS user that runs the server when we are root.
        base_dir: where the temporary directory goes (default: the system temp dir).
        """
        self._server: URL | None = make_url(server_url) if server_url else None
        self._settings: dict[str, str] = {**(FAST_SETTINGS if fast else {}), **(settings or {})}
        self._os_user = os_user
        self._base_dir = Path(base_dir) if base_dir is not None else None
        self._start_timeout = start_timeout
        self._dir: Path | None = None
        self._port: int | None = None
        self._owner_pid: int | None = None
        self._run_as: pwd.struct_passwd | None = None
        self._bins: PgBinaries | None = None
        self.start_seconds: float | None = None
        """How long the last `start` took (initdb + server start), for reporting."""

    @classmethod
    def from_env(cls, **kwargs: Any) -> PostgresCluster:
        """A cluster that uses ``$SUPERVISOR_TEST_PG_URL`` when set, else starts its own."""
        return cls(server_url=os.environ.get(ENV_URL) or None, **kwargs)

    # -- lifecycle --------------------------------------------------------------------------

    @property
    def external(self) -> bool:
        """True when an existing server is used rather than a throwaway cluster."""
        return self._server is not None

    @property
    def running(self) -> bool:
        """True between a successful `start` and `stop`."""
        return self._server is not None or self._port is not None

    @property
    def data_dir(self) -> Path | None:
        """The throwaway cluster's data directory (None when external or not started)."""
        return self._dir / "data" if self._dir is not None else None

    def start(self) -> PostgresCluster:
        """Create and start the throwaway cluster (no-op for an external server)."""
        if self.running:
            return self
        began = time.monotonic()
        self._bins = find_binaries()
        self._run_as = self._server_user()
        self._owner_pid = os.getpid()
        atexit.register(self.stop)
        try:
            self._dir = self._make_dir()
            self._initdb()
            self._port = self._start_server()
        except BaseException:
            self.stop()
            raise
        self.start_seconds = time.monotonic() - began
        return self

    def stop(self) -> None:
        """Stop the server immediately and delete its directory; safe to call repeatedly."""
        if self._owner_pid is not None and self._owner_pid != os.getpid():
            return  # a forked child must not tear down its parent's cluster
        atexit.unregister(self.stop)
        directory, self._dir, self._port = self._dir, None, None
        if directory is None:
            return
        data = directory / "data"
        if (data / "postmaster.pid").exists() and self._bins is not None:
            cmd = [str(self._bins.pg_ctl), "-D", str(data), "-m", "immediate", "-w", "stop"]
            try:
                self._run(cmd, cwd=directory, timeout=40)
            except (subprocess.SubprocessError, OSError):
                self._kill_postmaster(data)
        shutil.rmtree(directory, ignore_errors=True)

    def stop_server(self, mode: str = "fast") -> None:
        """Stop the throwaway server but keep its data, as a restart or an outage would.

        ``mode`` is pg_ctl's shutdown mode: ``fast`` terminates client connections the way a
        server restart does, ``immediate`` as a crash would.
        """
        if self._bins is None or self._dir is None or self._port is None:
            raise RuntimeError("only a started throwaway cluster can be stopped and restarted")
        cmd = [str(self._bins.pg_ctl), "-D", str(self._dir / "data"), "-m", mode, "-w", "stop"]
        self._run(cmd, timeout=60)

    def start_server(self) -> None:
        """Start a server stopped by `stop_server` again, on the same port."""
        if self._dir is None or self._port is None:
            raise RuntimeError("only a started throwaway cluster can be restarted")
        self._start_server(port=self._port)

    def __enter__(self) -> PostgresCluster:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- databases --------------------------------------------------------------------------

    def url(self, dbname: str = "postgres") -> str:
        """SQLAlchemy URL of ``dbname``: postgresql+psycopg://postgres@127.0.0.1:PORT/dbname."""
        return self._sa_url(dbname).render_as_string(hide_password=False)

    def create_database(self, name: str) -> str:
        """Create database ``name`` and return its SQLAlchemy URL."""
        self._execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        return self.url(name)

    def drop_database(self, name: str) -> None:
        """Drop database ``name`` if it exists, disconnecting any sessions still using it."""
        self._execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )

    def connect(self, dbname: str | None = None) -> psycopg.Connection[Any]:
        """An autocommit psycopg connection (default: the server's maintenance database)."""
        url = self._sa_url(dbname or self._maintenance_db())
        params: dict[str, Any] = {
            "host": url.host,
            "port": url.port,
            "user": url.username,
            "password": url.password,
            "dbname": url.database,
            **{key: value for key, value in url.query.items() if isinstance(value, str)},
        }
        return psycopg.connect(autocommit=True, connect_timeout=10, **params)

    # -- internals --------------------------------------------------------------------------

    def _sa_url(self, dbname: str) -> URL:
        if self._server is not None:
            return self._server.set(drivername=DRIVER, database=dbname)
        if self._port is None:
            raise RuntimeError("PostgresCluster is not started")
        return URL.create(
            DRIVER, username=SUPERUSER, host="127.0.0.1", port=self._port, database=dbname
        )

    def _maintenance_db(self) -> str:
        return (self._server.database if self._server is not None else None) or "postgres"

    def _execute(self, statement: sql.Composed) -> None:
        with self.connect() as conn:
            conn.execute(statement)

    def _server_user(self) -> pwd.struct_passwd | None:
        """The user to run the server as: None (ourselves) unless we are root."""
        if os.geteuid() != 0:
            return None
        try:
            return pwd.getpwnam(self._os_user)
        except KeyError:
            raise PostgresStartError(
                f"running as root, and PostgreSQL refuses to run as root, but there is no "
                f"{self._os_user!r} OS user to run it as; {INSTALL_HINT}"
            ) from None

    def _make_dir(self) -> Path:
        """A fresh temp dir owned by the server's user, reachable by that user."""
        base = self._base_dir or Path(tempfile.gettempdir())
        if self._run_as is not None and not _traversable_by(base.resolve(), self._run_as.pw_uid):
            base = Path("/tmp")
        directory = Path(tempfile.mkdtemp(prefix="supervisor-pg-", dir=base))
        if self._run_as is not None:
            os.chown(directory, self._run_as.pw_uid, self._run_as.pw_gid)
        return directory

    def _run(
        self, cmd: list[str], *, timeout: float, cwd: Path | None = None
    ) -> subprocess.CompletedProcess[str]:
        """Run ``cmd`` as the server's user with a clean PG* environment; raise on failure."""
        if self._run_as is not None:
            user = self._run_as.pw_name
            if runuser := shutil.which("runuser"):
                cmd = [runuser, "-u", user, "--", *cmd]
            else:
                cmd = ["su", user, "-s", "/bin/sh", "-c", shlex.join(cmd)]
        env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
        env["LC_ALL"] = "C"
        return subprocess.run(
            cmd,
            cwd=cwd or self._dir,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=True,
        )

    def _initdb(self) -> None:
        assert self._bins is not None and self._dir is not None
        cmd = [str(self._bins.initdb), "-D", str(self._dir / "data"), "--auth=trust"]
        cmd += [f"--username={SUPERUSER}", "--encoding=UTF8", "--locale=C", "--no-sync"]
        try:
            self._run(cmd, timeout=120)
        except subprocess.CalledProcessError as exc:
            raise PostgresStartError(f"initdb failed: {exc.stderr or exc.stdout}") from exc

    def _start_server(self, port: int | None = None) -> int:
        """Start the postmaster on ``port`` or a free one (retrying if another process takes
        a free one first)."""
        assert self._bins is not None and self._dir is not None
        sock_dir = self._dir / "sock"
        sock_dir.mkdir(exist_ok=True)
        if self._run_as is not None:
            os.chown(sock_dir, self._run_as.pw_uid, self._run_as.pw_gid)
        log = self._dir / "server.log"
        last_error = ""
        for _attempt in range(1 if port is not None else 3):
            chosen = port if port is not None else free_port()
            settings = {
                "listen_addresses": "127.0.0.1",
                "port": str(chosen),
                "unix_socket_directories": str(sock_dir),
                **self._settings,
            }
            options = " ".join(f"-c {shlex.quote(f'{k}={v}')}" for k, v in settings.items())
            cmd = [str(self._bins.pg_ctl), "-D", str(self._dir / "data"), "-l", str(log)]
            cmd += ["-w", "-t", str(int(self._start_timeout)), "-o", options, "start"]
            try:
                self._run(cmd, timeout=self._start_timeout + 10)
                return chosen
            except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
                server_log = log.read_text(errors="replace") if log.exists() else ""
                last_error = f"{exc}\n{server_log[-2000:]}"
                self._kill_postmaster(self._dir / "data")
                if "could not bind" not in server_log and "already in use" not in server_log:
                    break
        raise PostgresStartError(f"pg_ctl start failed: {last_error}")

    @staticmethod
    def _kill_postmaster(data: Path) -> None:
        """Last resort: SIGKILL the postmaster named in postmaster.pid, if it is still ours."""
        with contextlib.suppress(OSError, ValueError, IndexError):
            pid = int((data / "postmaster.pid").read_text().splitlines()[0])
            # Guard against a stale pid file naming an unrelated, reused pid.
            if Path(f"/proc/{pid}/comm").read_text().strip() in {"postgres", "postmaster"}:
                os.kill(pid, signal.SIGKILL)
