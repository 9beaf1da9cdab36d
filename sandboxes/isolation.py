"""Checks that the local sandbox's isolation works here, each with how to fix it.

``BubblewrapSandbox`` runs :func:`require_isolation` before every run (fail closed);
``supervisor doctor`` prints every :class:`Check`.
"""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from sandboxes.cgroup import pids_parent
from sandboxes.errors import SandboxUnavailable

#: Host uid/gid the sandbox runs as when the supervisor itself runs as root.
SANDBOX_UID = 65534
SANDBOX_GID = 65534

FIX_BWRAP = (
    "Install bubblewrap: `apt-get install bubblewrap` (Debian/Ubuntu) or `dnf install "
    "bubblewrap` (Fedora); in this repository `bash .ci/system-deps.sh` does it."
)
FIX_USERNS = (
    "Enable unprivileged user namespaces: `sysctl -w kernel.unprivileged_userns_clone=1` "
    "(Debian), `sysctl -w user.max_user_namespaces=15000`, and on Ubuntu 23.10+ "
    "`sysctl -w kernel.apparmor_restrict_unprivileged_userns=0` (or an AppArmor profile for "
    "bwrap). In a container, allow namespace creation (e.g. Docker "
    "`--security-opt seccomp=unconfined --security-opt apparmor=unconfined`)."
)


@dataclass(frozen=True)
class Check:
    """One doctor line.

    Attributes:
        name: What was checked.
        ok: It works.
        detail: What was found.
        fix: How to fix it when not ok.
        required: The local sandbox refuses to run without it.
    """

    name: str
    ok: bool
    detail: str
    fix: str = ""
    required: bool = True


def find_bwrap() -> str | None:
    """The ``bwrap`` executable on the current ``PATH``, or ``None``."""
    return shutil.which("bwrap", path=os.environ.get("PATH", ""))


def drop_to() -> tuple[int, int] | None:
    """The (uid, gid) to switch to before starting bwrap: nobody when running as root.

    RLIMIT_NPROC is not enforced for processes whose real uid is host root, and inside a user
    namespace created by root the sandbox uid still maps to host root; so a root supervisor
    starts the sandbox as the unprivileged host user ``nobody``.
    """
    return (SANDBOX_UID, SANDBOX_GID) if os.geteuid() == 0 else None


def _probe(bwrap: str, unshare: list[str], script: str) -> subprocess.CompletedProcess[str]:
    argv = [bwrap, *unshare, "--die-with-parent", "--ro-bind", "/usr", "/usr",
            "--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib",
            "--symlink", "usr/lib64", "/lib64", "--proc", "/proc", "--dev", "/dev",
            "/bin/sh", "-c", script]  # fmt: skip
    ids = drop_to()
    return subprocess.run(
        argv, capture_output=True, text=True, timeout=20, stdin=subprocess.DEVNULL, cwd="/",
        user=ids[0] if ids else None, group=ids[1] if ids else None,
        extra_groups=[] if ids else None,
    )  # fmt: skip


def namespace_checks(bwrap: str) -> list[Check]:
    """Probe user, network and pid namespaces with real bubblewrap runs."""
    checks: list[Check] = []
    try:
        user = _probe(bwrap, ["--unshare-user", "--uid", "65534", "--gid", "65534"], "id -u")
        user_ok = user.returncode == 0 and user.stdout.strip() == "65534"
        detail = "works" if user_ok else (user.stderr.strip() or f"exit {user.returncode}")
        checks.append(Check("user namespace", user_ok, detail, FIX_USERNS))
        net = _probe(bwrap, ["--unshare-user", "--unshare-net"], "cat /proc/net/dev")
        lines = [ln.split(":")[0].strip() for ln in net.stdout.splitlines() if ":" in ln]
        net_ok = net.returncode == 0 and lines == ["lo"]
        detail = "only loopback inside" if net_ok else (net.stderr.strip() or f"found {lines}")
        checks.append(Check("network namespace", net_ok, detail, FIX_USERNS))
        pid = _probe(bwrap, ["--unshare-user", "--unshare-pid"], "echo $$")
        pid_ok = pid.returncode == 0 and pid.stdout.strip().isdigit() and int(pid.stdout) < 10
        detail = "private pid space" if pid_ok else (pid.stderr.strip() or pid.stdout.strip())
        checks.append(Check("pid namespace", pid_ok, detail, FIX_USERNS))
    except (OSError, subprocess.SubprocessError) as exc:
        checks.append(Check("namespaces", False, f"bwrap could not start: {exc}", FIX_USERNS))
    return checks


def rlimit_check() -> Check:
    """The resource module works and the process cap applies to an unprivileged uid."""
    try:
        for limit in ("RLIMIT_CPU", "RLIMIT_AS", "RLIMIT_FSIZE", "RLIMIT_NOFILE", "RLIMIT_NPROC"):
            resource.getrlimit(getattr(resource, limit))
    except (AttributeError, ValueError, OSError) as exc:
        return Check("rlimits", False, str(exc), "Run on Linux with a standard libc.")
    who = "as host user nobody (65534)" if drop_to() else f"as uid {os.geteuid()}"
    return Check("rlimits", True, f"CPU, AS, FSIZE, NOFILE, NPROC; sandbox runs {who}")


def cgroup_check() -> Check:
    """Whether a per-run cgroup ``pids`` limit can be created (optional)."""
    parent = pids_parent()
    if parent is not None:
        return Check("cgroup pids", True, f"per-run pids.max under {parent}", required=False)
    return Check(
        "cgroup pids", False, "no writable pids controller; RLIMIT_NPROC alone caps processes",
        "Optional: delegate a cgroup v2 subtree with the pids controller to this user "
        "(systemd: `systemd-run --user --scope -p Delegate=yes ...`).",
        required=False,
    )  # fmt: skip


def chromium_check() -> Check:
    """Whether Chromium is present for the browser worker (not needed by the sandbox)."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None and Path("/usr/bin/chromium").exists():
        found = "/usr/bin/chromium"
    if found:
        return Check("chromium", True, found, required=False)
    return Check("chromium", False, "not found (browser worker only)",
                 "apt-get install chromium", required=False)  # fmt: skip


def isolation_checks() -> list[Check]:
    """Every check the local sandbox needs, bubblewrap first."""
    bwrap = find_bwrap()
    if bwrap is None:
        return [Check("bubblewrap", False, "bwrap not found on PATH", FIX_BWRAP)]
    checks = [Check("bubblewrap", True, bwrap)]
    checks.extend(namespace_checks(bwrap))
    checks.append(rlimit_check())
    return checks


def require_isolation() -> str:
    """Fail closed: return the bwrap path only if every required check passes.

    Returns:
        Path of ``bwrap``.

    Raises:
        SandboxUnavailable: A required check failed; the message names it and the fix.
    """
    checks = isolation_checks()
    failed = [check for check in checks if check.required and not check.ok]
    if failed:
        first = failed[0]
        raise SandboxUnavailable(
            f"The local sandbox cannot isolate code here ({first.name}: {first.detail}), so it "
            "refuses to run; there is no unconfined fallback.",
            hint=f"{first.fix} Then check with `supervisor doctor`.",
            failed=[check.name for check in failed],
        )
    bwrap = checks[0].detail
    return bwrap
