#!/usr/bin/env bash
# Serve every notebook of this repository in the marimo editor (headless).
#
#   ./start_marimo.sh                          # http://127.0.0.1:2700, token "test1234"
#   MARIMO_TOKEN=$(openssl rand -hex 16) MARIMO_PORT=8080 ./start_marimo.sh
#
# Environment: MARIMO_PORT (default 2700), MARIMO_HOST (default 127.0.0.1), MARIMO_TOKEN (default
# test1234). Extra arguments are passed to `marimo edit`.
#
# Security: the editor runs arbitrary Python as this user. Keep it on 127.0.0.1 and reach it through an
# SSH tunnel (ssh -L 2700:127.0.0.1:2700 host). Binding 0.0.0.0 exposes it to the whole network, and the
# token alone is not enough there (plain HTTP, no rate limit): put it behind a reverse proxy with TLS and
# real authentication, and never use the default token. This script refuses a non-loopback host with the
# default token. The token is handed over in a 0600 temporary file, so it never appears in `ps`.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
port="${MARIMO_PORT:-2700}"
host="${MARIMO_HOST:-127.0.0.1}"
token="${MARIMO_TOKEN-test1234}"  # set but empty stays empty (refused below); unset gets the default
if [[ -n "${MARIMO_TOKEN+set}" ]]; then token_source="from MARIMO_TOKEN"; else token_source="the default test1234"; fi

if [[ -x "$repo/.venv/bin/marimo" ]]; then
    marimo="$repo/.venv/bin/marimo"
elif command -v marimo >/dev/null 2>&1; then
    marimo="$(command -v marimo)"
else
    echo "start_marimo.sh: marimo not found (no $repo/.venv/bin/marimo and none on PATH)" >&2
    exit 1
fi

if [[ -z "$token" ]]; then
    echo "start_marimo.sh: MARIMO_TOKEN is empty" >&2
    exit 2
fi

case "$host" in
    127.* | localhost | ::1 | "[::1]") ;;
    *)
        if [[ "$token" == "test1234" ]]; then
            echo "start_marimo.sh: refusing to bind $host with the default token; set MARIMO_TOKEN" >&2
            exit 2
        fi
        echo "start_marimo.sh: WARNING: $host exposes the editor (arbitrary code) to the network;" \
            "use an SSH tunnel or a TLS reverse proxy" >&2
        ;;
esac

token_file="$(umask 077 && mktemp "${TMPDIR:-/tmp}/marimo-token.XXXXXX")"
child=""
cleanup() {
    if [[ -n "$child" ]] && kill -0 "$child" 2>/dev/null; then
        kill -TERM "$child" 2>/dev/null || true
        wait "$child" 2>/dev/null || true
    fi
    rm -f "$token_file"
}
trap cleanup EXIT
trap 'exit 143' TERM
trap 'exit 130' INT
printf '%s' "$token" >"$token_file"

cd "$repo"
echo "start_marimo.sh: serving $repo on http://$host:$port (token: $token_source)" >&2
"$marimo" edit "$repo" --headless --host "$host" --port "$port" \
    --token-password-file "$token_file" --skip-update-check "$@" &
child=$!
wait "$child"
