"""Who the calling process is, as the kernel says: the identity approval policies match.

The OS user comes from the process's real and effective uid through the password database
(``pwd``), never from ``LOGNAME``/``USER``/``USERNAME`` (any process can set those, and
``getpass.getuser()`` trusts them) and never from a free-text approver id, which is only a label.
The host is the kernel's host name. A process whose real and effective uid differ holds both
users, and a policy refuses it if either would be refused.

Inside a user namespace any unprivileged user can make the kernel report any uid (``unshare
--user --map-user=UID``), so an identity is only ``verified`` when the process's uid map is the
initial namespace's identity map; policy rules never accept an unverified identity. A process
that also controls its mount namespace can fake ``/proc/self/uid_map``: see docs/policy.md for
where this check ends.
"""

from __future__ import annotations

import os
import pwd
import socket
from dataclasses import dataclass
from functools import lru_cache


@lru_cache(maxsize=64)
def _user_name(uid: int) -> str:
    """The password database's name for ``uid``; the number itself when it has no entry."""
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


_INITIAL_UID_MAP = [b"0", b"0", b"4294967295"]


def in_initial_user_namespace() -> bool:
    """True when this process's uids are the host's own (no user namespace maps them).

    A kernel without user namespaces has no ``uid_map`` (nothing can be mapped); a process
    that cannot read its own ``/proc`` is treated as mapped.
    """
    try:
        with open("/proc/self/uid_map", "rb") as uid_map:
            return uid_map.read().split() == _INITIAL_UID_MAP
    except FileNotFoundError:
        return os.path.isdir("/proc/self")
    except (OSError, ValueError):
        return False


_VERIFIED: dict[tuple[int, int], bool] = {}


def _verified(uid: int, euid: int) -> bool:
    """:func:`in_initial_user_namespace`, remembered per (uid, euid).

    Sound because entering a user namespace either keeps the uid (an unprivileged process can
    only map its own uid, so an unchanged uid is the true one) or changes it (a new key, checked
    again); only root can remap itself behind an unchanged uid, and root is trusted anyway.
    """
    verdict = _VERIFIED.get((uid, euid))
    if verdict is None:
        verdict = _VERIFIED[(uid, euid)] = in_initial_user_namespace()
    return verdict


@dataclass(frozen=True)
class EnvironmentIdentity:
    """An OS user on a host, taken from the process itself.

    Attributes:
        user: The user of the real uid (who started the process).
        host: The kernel's host name.
        effective_user: The user of the effective uid (the same as ``user`` unless setuid).
        verified: False when a user namespace maps the uids (they may be chosen at will).
    """

    user: str
    host: str
    effective_user: str
    verified: bool = True

    @classmethod
    def current(cls) -> EnvironmentIdentity:
        """The identity of the calling process, read from the kernel now."""
        return cls(
            user=_user_name(os.getuid()),
            host=socket.gethostname(),
            effective_user=_user_name(os.geteuid()),
            verified=_verified(os.getuid(), os.geteuid()),
        )

    @property
    def users(self) -> tuple[str, ...]:
        """Every OS user this process acts as (one, unless real and effective uid differ)."""
        return tuple(dict.fromkeys((self.user, self.effective_user)))

    def names_of(self, user: str) -> frozenset[str]:
        """The names a policy may use for ``user`` here: ``user`` and ``user@host``."""
        return frozenset({user, f"{user}@{self.host}"})

    def names(self) -> frozenset[str]:
        """Every name of every user this process acts as."""
        return frozenset().union(*(self.names_of(user) for user in self.users))

    def __str__(self) -> str:
        label = f"{self.user}@{self.host}"
        if self.effective_user != self.user:
            label += f" (effective user {self.effective_user})"
        if not self.verified:
            label += " (uid mapped by a user namespace: unverified)"
        return label
