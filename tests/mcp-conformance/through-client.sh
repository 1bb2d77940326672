#!/usr/bin/env bash
# through-client.sh URL: client.mjs through `countersign mcp http` (interpose.sh) in front of
# URL, the suite's scenario server: the interposer's client face, for `conformance client`.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dir=$(mktemp -d)
trap '"$here/interpose.sh" stop "$dir"' EXIT
url=$("$here/interpose.sh" start "$dir" "$1")
node "$here/client.mjs" "$url"
