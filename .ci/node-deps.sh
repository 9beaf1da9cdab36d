#!/usr/bin/env bash
# Install the npm packages the end-to-end tests drive (real clients: Claude Code, the MCP
# Inspector). Each folder under tests/node/ with a package.json and package-lock.json gets
# `npm ci` there; a folder whose node_modules is already current is left alone.
#
# Usage: bash .ci/node-deps.sh [--check]
#   --check    only report folders whose packages are missing; exit 1 if any
#
# The product never installs or runs these at run time: only the tests use them.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf 'node-deps: %s\n' "$*"; }

command -v npm >/dev/null 2>&1 || {
    log "npm not found: install Node.js 20+ (Debian: apt-get install nodejs npm)"
    exit 1
}

missing=()
for manifest in tests/node/*/package.json; do
    [ -e "$manifest" ] || continue
    dir=$(dirname "$manifest")
    # npm ci writes node_modules/.package-lock.json; a copy of the lock there means current.
    if [ -f "$dir/node_modules/.package-lock.json" ] &&
        [ "$dir/node_modules/.package-lock.json" -nt "$dir/package-lock.json" ]; then
        continue
    fi
    missing+=("$dir")
done

if [ "${#missing[@]}" -eq 0 ]; then
    log "all present"
    exit 0
fi
if [ "${1:-}" = "--check" ]; then
    log "missing: ${missing[*]}"
    exit 1
fi
for dir in "${missing[@]}"; do
    log "npm ci in $dir"
    (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
done
