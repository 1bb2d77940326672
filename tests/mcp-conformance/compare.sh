#!/usr/bin/env bash
# compare.sh BARE.txt THROUGH.txt: the two summaries of `conformance server`. Prints one row per
# scenario (scenario, bare, through the interposer) and exits 1 if a scenario the bare server
# passes fails through the interposer, or the interposer run lacks one.
set -euo pipefail
summary() { sed -n '/=== SUMMARY ===/,$p' "$1" | sed -n 's/^\([✓✗]\) \([^:]*\): .*/\2 \1/p'; }
status=0
printf '%-32s %-6s %s\n' scenario bare through
while read -r name bare; do
    through=$(summary "$2" | awk -v n="$name" '$1 == n { print $2 }')
    printf '%-32s %-6s %s\n' "$name" "$bare" "${through:-missing}"
    if [ "$bare" = "✓" ] && [ "$through" != "✓" ]; then status=1; fi
done < <(summary "$1")
[ "$(summary "$1" | wc -l)" -gt 0 ] || { echo "compare.sh: no summary in $1" >&2; exit 1; }
[ $status = 0 ] || echo "the interposer lost a scenario the bare server passes" >&2
exit $status
