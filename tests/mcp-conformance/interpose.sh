#!/usr/bin/env bash
# Put `countersign mcp http` in front of an MCP server's Streamable HTTP endpoint, for the
# conformance suite (see README.md here).
#
#   interpose.sh start DIR UPSTREAM_URL   starts, in DIR: a `countersign serve` (the approval
#       service the interposer needs, though with `allow = ["*"]` no call is held), the
#       interposer with `allow = ["*"]`, and bearer-proxy.mjs (the suite's client sends no
#       agent token); prints the URL the suite is pointed at (the proxy's /mcp).
#   interpose.sh stop DIR                 stops what `start` started in DIR (by pid).
#
# Needs COUNTERSIGN_BIN (the built CLI) and `node` (>= 22) on PATH.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
wait_for() { # FILE PATTERN: until FILE has a line matching PATTERN (at most 30 s)
    for _ in $(seq 300); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.1; done
    echo "interpose.sh: timed out waiting for '$2' in $1" >&2; cat "$1" >&2; return 1
}

case "${1:-}" in
start)
    bin=${COUNTERSIGN_BIN:?set COUNTERSIGN_BIN to the countersign binary}
    dir=$2 upstream=$3
    mkdir -p "$dir"
    : > "$dir/pids"
    "$bin" serve --listen 127.0.0.1:0 --data-dir "$dir/data" > "$dir/serve.out" 2> "$dir/serve.err" &
    echo $! >> "$dir/pids"
    wait_for "$dir/serve.out" '^countersign: listening on '
    service=$(sed -n 's/^countersign: listening on \(http[^ ]*\).*/\1/p' "$dir/serve.out" | head -1)
    "$bin" gateway add conformance --data-dir "$dir/data" > "$dir/gateway.token" 2> "$dir/gateway.err"
    "$bin" registry export --data-dir "$dir/data" > "$dir/registry.json"
    token=conformance-agent-$(python3 -c 'import secrets; print(secrets.token_hex(16))')
    cat > "$dir/mcp.toml" <<TOML
registry = "$dir/registry.json"
allow = ["*"]
audit_log = "$dir/mcp-audit.jsonl"

[[agents]]
id = "conformance-suite"
token = "$token"
TOML
    port=$(free_port)
    COUNTERSIGN_LOG=${COUNTERSIGN_LOG:-info} "$bin" mcp http --listen "127.0.0.1:$port" \
        --upstream "$upstream" --service "$service" --gateway-token-file "$dir/gateway.token" \
        --server-id conformance --config "$dir/mcp.toml" > "$dir/mcp.out" 2> "$dir/mcp.err" &
    echo $! >> "$dir/pids"
    wait_for "$dir/mcp.err" 'mcp http relay ready'
    AGENT_TOKEN=$token node "$here/bearer-proxy.mjs" "http://127.0.0.1:$port" > "$dir/proxy.out" 2> "$dir/proxy.err" &
    echo $! >> "$dir/pids"
    wait_for "$dir/proxy.out" '^listening '
    echo "http://localhost:$(sed -n 's/^listening //p' "$dir/proxy.out")/mcp"
    ;;
stop)
    dir=$2
    [ -f "$dir/pids" ] || exit 0
    while read -r pid; do kill "$pid" 2>/dev/null || true; done < "$dir/pids"
    while read -r pid; do while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done; done < "$dir/pids"
    rm -f "$dir/pids"
    ;;
*)
    echo "usage: interpose.sh start DIR UPSTREAM_URL | stop DIR" >&2; exit 2 ;;
esac
