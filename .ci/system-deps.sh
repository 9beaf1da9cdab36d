#!/usr/bin/env bash
# Install the Debian packages the test suite needs on a fresh machine.
#
# Usage: bash .ci/system-deps.sh [--check]
#   (no args)  install whatever is missing; a no-op (well under a second) when all is present
#   --check    only report what is missing; exit 1 if anything is
#
# Packages (and the command that proves each is usable):
#   postgresql       initdb + pg_ctl (Debian puts them in /usr/lib/postgresql/<ver>/bin);
#                    the tests run a throwaway cluster, never the system one
#   bubblewrap       bwrap        - local code sandbox
#   chromium         chromium     - browser worker
#   chromium-driver  chromedriver - browser worker
#   tmux             tmux         - driving the TUI in end-to-end tests
#   nodejs, npm      node, npm    - the real npm clients the e2e tests drive (.ci/node-deps.sh)
#   libseccomp2      libseccomp.so.2 - the tests check the sandbox's seccomp syscall numbers
#                    against its tables (the sandbox itself does not load it)
#
# Runs as root (CI does); as another user it uses sudo when available.
set -euo pipefail

export DEBIAN_FRONTEND=noninteractive

log() { printf 'system-deps: %s\n' "$*"; }
die() {
    printf 'system-deps: ERROR: %s\n' "$*" >&2
    exit 1
}

have_pg_server() {
    local bin
    if command -v initdb >/dev/null 2>&1 && command -v pg_ctl >/dev/null 2>&1; then
        return 0
    fi
    for bin in /usr/lib/postgresql/*/bin; do
        if [ -x "$bin/initdb" ] && [ -x "$bin/pg_ctl" ]; then
            return 0
        fi
    done
    return 1
}

# is_present PACKAGE: true when the package's command is usable.
is_present() {
    case "$1" in
        postgresql) have_pg_server ;;
        bubblewrap) command -v bwrap >/dev/null 2>&1 ;;
        chromium) command -v chromium >/dev/null 2>&1 ;;
        chromium-driver) command -v chromedriver >/dev/null 2>&1 ;;
        tmux) command -v tmux >/dev/null 2>&1 ;;
        nodejs) command -v node >/dev/null 2>&1 ;;
        npm) command -v npm >/dev/null 2>&1 ;;
        *) dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed' ;;
    esac
}

PACKAGES=(postgresql bubblewrap chromium chromium-driver tmux libseccomp2 nodejs npm)

missing=()
for pkg in "${PACKAGES[@]}"; do
    if ! is_present "$pkg"; then
        missing+=("$pkg")
    fi
done

if [ "${#missing[@]}" -eq 0 ]; then
    log "all present: ${PACKAGES[*]}"
    exit 0
fi

if [ "${1:-}" = "--check" ]; then
    log "missing: ${missing[*]}"
    exit 1
fi

command -v apt-get >/dev/null 2>&1 || die "apt-get not found; install by hand: ${missing[*]}"

SUDO=()
if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null 2>&1 || die "not root and no sudo; as root run: bash $0"
    SUDO=(sudo -E)
fi

log "installing: ${missing[*]}"
start=$(date +%s)

# An unreachable extra source makes `apt-get update` exit non-zero even though the Debian
# lists were refreshed, so only warn here: the install below is what must succeed.
if ! "${SUDO[@]}" apt-get update -qq; then
    log "warning: apt-get update reported errors (continuing with the lists it has)"
fi

if ! "${SUDO[@]}" apt-get install -y -qq --no-install-recommends \
    -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold \
    "${missing[@]}"; then
    die "apt-get install failed for: ${missing[*]}"
fi

still=()
for pkg in "${missing[@]}"; do
    if ! is_present "$pkg"; then
        still+=("$pkg")
    fi
done
[ "${#still[@]}" -eq 0 ] || die "installed but still not usable: ${still[*]}"

log "installed ${missing[*]} in $(($(date +%s) - start))s"
