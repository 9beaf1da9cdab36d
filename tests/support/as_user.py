"""Run the ``supervisor`` CLI as another OS user: ``python as_user.py USER --db URL ARGS...``.

Started as root, the process loads the CLI and opens the ledger once (so nothing needs to be
imported later), then drops to USER for good: supplementary groups, gid, then uid, real and
effective. The command therefore runs with a genuinely different OS identity. It cannot simply
be started with ``subprocess.run(..., user=USER)``: the interpreter may live where USER cannot
read (a pyenv under /root). ``LOGNAME``/``USER``/``USERNAME`` are set to ``root`` on purpose: the
ledger must ignore them.
"""

from __future__ import annotations

import os
import pwd
import sys


def main() -> None:
    user, *argv = sys.argv[1:]
    import cel  # noqa: F401 - the rules' CEL loads on the first rule compiled, after the drop

    import supervisor.cli.main as cli_main
    import supervisor.cli.policy
    import supervisor.cli.proposals
    import supervisor.services.identity
    import supervisor.services.rendering  # noqa: F401 - loaded before the privileges go
    from supervisor.store.provider import SQLModelProvider

    url = argv[argv.index("--db") + 1]
    with SQLModelProvider(url) as provider:
        provider.ledger.head()
    entry = pwd.getpwnam(user)
    os.setgroups([])
    os.setgid(entry.pw_gid)
    os.setuid(entry.pw_uid)
    if os.getuid() != entry.pw_uid or os.geteuid() != entry.pw_uid:
        raise SystemExit(f"could not become {user}")
    os.environ.update(HOME=entry.pw_dir, LOGNAME="root", USER="root", USERNAME="root")
    sys.argv = ["supervisor", *argv]
    cli_main.main()


if __name__ == "__main__":
    main()
