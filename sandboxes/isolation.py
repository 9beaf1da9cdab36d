"""Checks that the local sandbox's isolation works here, each with how to fix it.

Each check is a real bubblewrap run: namespaces, nested user namespaces disabled, the seccomp
filter installed (:mod:`sandboxes.seccomp`), rlimits.

``BubblewrapSandbox`` runs :func:`require_isolation` before every run (fail closed);
``supervisor doctor`` prints every :class:`Check`.
"""

from __future__ import annotations

import os
import re
import resource
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from sandboxes import seccomp
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
#: The oldest bubblewrap with ``--disable-userns`` (Debian 12 ships it).
MIN_BWRAP_VERSION = (0, 8, 0)
FIX_BWRAP_VERSION = (
    "Install bubblewrap 0.8.0 or newer (Debian 12, Ubuntu 23.04, Fedora 38 and later ship it); "
    "a setuid bwrap cannot disable nested user namespaces, so use the unprivileged one."
)
FIX_SECCOMP = (
    "bwrap must accept `--seccomp FD` and the kernel must support seccomp filters "
    "(CONFIG_SECCOMP_FILTER); in a container, do not run it with a seccomp profile that "
    "forbids installing filters."
)
#: Flags every run uses to stop sandboxed code from creating user namespaces of its own.
NO_NESTED_USERNS = ("--disable-userns", "--assert-userns-disabled")


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


def bwrap_version(bwrap: str) -> tuple[int, ...] | None:
    """The version ``bwrap --version`` reports, or ``None`` when it cannot be read."""
    try:
        done = subprocess.run([bwrap, "--version"], capture_output=True, text=True, timeout=10,
                              stdin=subprocess.DEVNULL)  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    found = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", done.stdout)
    return tuple(int(part or 0) for part in found.groups()) if found else None


def _probe(
    bwrap: str, unshare: Sequence[str], script: str, pass_fds: tuple[int, ...] = ()
) -> subprocess.CompletedProcess[str]:
    argv = [bwrap, *unshare, "--die-with-parent", "--ro-bind", "/usr", "/usr",
            "--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib",
            "--symlink", "usr/lib64", "/lib64", "--proc", "/proc", "--dev", "/dev",
            "/bin/sh", "-c", script]  # fmt: skip
    ids = drop_to()
    return subprocess.run(
        argv, capture_output=True, text=True, timeout=20, stdin=subprocess.DEVNULL, cwd="/",
        user=ids[0] if ids else None, group=ids[1] if ids else None,
        extra_groups=[] if ids else None, pass_fds=pass_fds,
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


def nested_userns_check(bwrap: str) -> Check:
    """Sandboxed code cannot create a user namespace (``unshare -U`` fails inside)."""
    try:
        probe = _probe(bwrap, ["--unshare-user", "--uid", "65534", "--gid", "65534",
                               *NO_NESTED_USERNS], "! unshare -U true 2>/dev/null")  # fmt: skip
    except (OSError, subprocess.SubprocessError) as exc:
        return Check("nested userns", False, f"disabled: no (bwrap could not start: {exc})",
                     FIX_BWRAP_VERSION)  # fmt: skip
    if probe.returncode == 0:
        return Check("nested userns", True, "disabled: yes (bwrap --disable-userns)")
    reason = probe.stderr.strip() or "unshare -U worked inside the sandbox"
    return Check("nested userns", False, f"disabled: no ({reason})"[:300], FIX_BWRAP_VERSION)


def seccomp_check(bwrap: str) -> Check:
    """The sandbox's seccomp filter installs: the probe reads ``Seccomp: 2`` (filter mode)."""
    try:
        with seccomp.filter_fd() as fd:
            probe = _probe(bwrap, ["--unshare-user", *NO_NESTED_USERNS, "--seccomp", str(fd)],
                           "grep '^Seccomp:' /proc/self/status", pass_fds=(fd,))  # fmt: skip
    except SandboxUnavailable as exc:
        return Check("seccomp filter", False, f"not active: {exc.message}", exc.hint or "")
    except (OSError, subprocess.SubprocessError) as exc:
        return Check("seccomp filter", False, f"not active: {exc}", FIX_SECCOMP)
    if probe.returncode == 0 and probe.stdout.split() == ["Seccomp:", "2"]:
        return Check("seccomp filter", True, seccomp.summary())
    reason = probe.stderr.strip() or probe.stdout.strip() or f"exit {probe.returncode}"
    return Check("seccomp filter", False, f"not active: {reason}"[:300], FIX_SECCOMP)


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


def isolation_checks(bwrap: str | None = None) -> list[Check]:
    """Every check the local sandbox needs, bubblewrap first (``bwrap`` default: on PATH)."""
    bwrap = bwrap or find_bwrap()
    if bwrap is None:
        return [Check("bubblewrap", False, "bwrap not found on PATH", FIX_BWRAP)]
    version = bwrap_version(bwrap)
    if version is None:
        return [Check("bubblewrap", False, f"{bwrap}: `bwrap --version` printed no version",
                      FIX_BWRAP_VERSION)]  # fmt: skip
    shown = ".".join(map(str, version))
    if version < MIN_BWRAP_VERSION:
        return [Check("bubblewrap", False, f"{bwrap} is bubblewrap {shown}, older than 0.8.0",
                      FIX_BWRAP_VERSION)]  # fmt: skip
    checks = [Check("bubblewrap", True, f"{bwrap} (bubblewrap {shown})")]
    checks.extend(namespace_checks(bwrap))
    checks.append(nested_userns_check(bwrap))
    checks.append(seccomp_check(bwrap))
    checks.append(rlimit_check())
    return checks


def require_isolation() -> str:
    """Fail closed: return the bwrap path only if every required check passes.

    Returns:
        Path of ``bwrap``.

    Raises:
        SandboxUnavailable: A required check failed; the message names it and the fix.
    """
    bwrap = find_bwrap()
    checks = isolation_checks(bwrap)
    failed = [check for check in checks if check.required and not check.ok]
    if failed:
        first = failed[0]
        raise SandboxUnavailable(
            f"The local sandbox cannot isolate code here ({first.name}: {first.detail}), so it "
            "refuses to run; there is no unconfined fallback.",
            hint=f"{first.fix} Then check with `supervisor doctor`.",
            failed=[check.name for check in failed],
        )
    assert bwrap is not None  # without it the bubblewrap check failed above
    return bwrap
