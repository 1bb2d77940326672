#!/usr/bin/env bash
# The official MCP conformance suite (@modelcontextprotocol/conformance, pinned) against the
# interposer's server face: every server scenario (--suite all) bare against the project's
# stand-in server (tests/mcp-conformance/server.mjs, on the official TypeScript SDK), then again
# through `countersign mcp http` with `allow = ["*"]` in front of it. Fails if the interposer
# loses a scenario the bare server passes; then the client scenarios (initialize, tools_call,
# elicitation defaults, sse-retry) with tests/mcp-conformance/client.mjs direct and through the
# interposer in front of the suite's scenario server, with the same rule. The suite needs Node >= 22: the `node` package from
# the npm registry ships it (tests/mcp-conformance/package-lock.json pins everything).
# Measured 2026-12-05 on the shared 2-core machine, warm cargo target: 68 s (npm ci ~16 s, each
# server-suite run ~3 s, the eight client runs ~35 s). Cold, add the CLI build (minutes on 2 cores).
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}"
dir=tests/mcp-conformance
work="$CARGO_TARGET_DIR/mcp-conformance"
rm -rf "$work"
mkdir -p "$work"

echo "--- the countersign binary (service and interposer)"
cargo build -q -p countersign-cli
export COUNTERSIGN_BIN="$CARGO_TARGET_DIR/debug/countersign"

echo "--- npm: Node 22, the suite and the SDK (exact versions from the lock file)"
(cd $dir && npm ci --no-audit --no-fund --loglevel=error)
export PATH="$root/$dir/node_modules/.bin:$PATH"
node --version
conformance --version

server_pid=
cleanup() {
    "$dir/interpose.sh" stop "$work/stack" || true
    [ -z "$server_pid" ] || kill "$server_pid" 2>/dev/null || true
}
trap cleanup EXIT

echo "--- the stand-in server, bare"
node "$dir/server.mjs" > "$work/server.out" 2> "$work/server.err" &
server_pid=$!
for _ in $(seq 100); do grep -q '^listening ' "$work/server.out" && break; sleep 0.1; done
port=$(sed -n 's/^listening //p' "$work/server.out")
[ -n "$port" ] || { cat "$work/server.err"; exit 1; }
conformance server --url "http://localhost:$port/mcp" --suite all -o "$work/bare" > "$work/bare.txt" 2>&1 || true
sed -n '/=== SUMMARY ===/,$p' "$work/bare.txt"

echo "--- through countersign mcp http"
url=$("$dir/interpose.sh" start "$work/stack" "http://localhost:$port/mcp")
conformance server --url "$url" --suite all -o "$work/through" > "$work/through.txt" 2>&1 || true
sed -n '/=== SUMMARY ===/,$p' "$work/through.txt"

echo "--- scenario by scenario"
status=0
"$dir/compare.sh" "$work/bare.txt" "$work/through.txt" || status=1

echo "--- the client face: client.mjs direct and through the interposer (the suite's scenario server as its upstream)"
for scenario in initialize tools_call elicitation-sep1034-client-defaults sse-retry; do
    for face in bare through; do
        if [ $face = bare ]; then command="node $dir/client.mjs"; else command="$dir/through-client.sh"; fi
        conformance client --command "$command" --scenario "$scenario" -o "$work/client-$face" \
            > "$work/client-$face-$scenario.txt" 2>&1 || true
        printf '%-38s %-8s %s\n' "$scenario" "$face" \
            "$(grep -a '^Passed: ' "$work/client-$face-$scenario.txt" | tail -1 || true)"
    done
    bare=$(grep -a '^Passed: ' "$work/client-bare-$scenario.txt" | tail -1 || true)
    through=$(grep -a '^Passed: ' "$work/client-through-$scenario.txt" | tail -1 || true)
    if [[ $bare == *", 0 failed"* && $through != *", 0 failed"* ]]; then
        echo "the interposer lost the client scenario $scenario" >&2
        status=1
    fi
done
exit $status
