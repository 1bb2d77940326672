#!/usr/bin/env bash
# The example alerting rules (docs/alerts.yml) are valid Prometheus rules, and every countersign_*
# series they use is one the service registers (src/service/metrics.rs). Installs promtool
# (Debian's prometheus package) when absent.
set -euo pipefail
cd "$(dirname "$0")/../.."

if ! command -v promtool >/dev/null; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q
    apt-get install -y -q --no-install-recommends prometheus
fi
promtool --version | head -1
promtool check rules docs/alerts.yml

status=0
for series in $(grep -o 'countersign_[a-z_]*' docs/alerts.yml | sort -u); do
    name=${series#countersign_}
    name=$(sed -E 's/_(total|bucket|count|sum)$//' <<<"$name")
    if ! grep -q "\"$name\"" crates/countersign-server/src/service/metrics.rs; then
        echo "docs/alerts.yml uses $series, which the service does not export" >&2
        status=1
    fi
done
exit $status
