#!/usr/bin/env bash
# Run fuzz targets one after the other and print one summary line each, from AFL++'s
# fuzzer_stats, with the machine load at the end of the run (the figures of docs/RELIABILITY.md).
#   fuzz/campaign.sh canon:600 der:300 ...   (TARGET:SECONDS)
# With AFL_EXECS=N a target also stops once it has run N executions (afl-fuzz -E), so
# `AFL_EXECS=10000000 fuzz/campaign.sh cbor:1800` is the issue's "10 million or 30 minutes".
# Expects the binaries of `cargo afl build -p countersign-fuzz --features afl --bins` in
# $AFL_TARGET_DIR/debug and the corpora of `seed $AFL_TARGET_DIR/corpus` (.ci/steps/fuzz.sh
# makes both); findings go to $AFL_TARGET_DIR/campaign/TARGET/default/{crashes,hangs}.
set -euo pipefail
afl_target=${AFL_TARGET_DIR:-${CARGO_TARGET_DIR:-target}/afl}
export AFL_SKIP_CPUFREQ=1 AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES=1 AFL_NO_AFFINITY=1 AFL_NO_UI=1
export AFL_FUZZER_LOOPCOUNT=${AFL_FUZZER_LOOPCOUNT:-20000}
for spec in "$@"; do
    t=${spec%%:*}
    seconds=${spec#*:}
    out=$afl_target/campaign/$t
    rm -rf "$out"
    mkdir -p "$(dirname "$out")"
    start=$(date -u +%H:%M:%S)
    cargo afl fuzz -V "$seconds" ${AFL_EXECS:+-E "$AFL_EXECS"} -i "$afl_target/corpus/$t" -o "$out" \
        "$afl_target/debug/fuzz_$t" >"$out.log" 2>&1 || echo "$t: afl-fuzz exited $?"
    stats=$out/default/fuzzer_stats
    load=$(cut -d' ' -f1-3 /proc/loadavg)
    if [ -f "$stats" ]; then
        get() { grep -E "^$1 " "$stats" | sed 's/.*: //'; }
        echo "$t | start $start | $(get run_time) s | execs $(get execs_done) | $(get execs_per_sec)/s | edges $(get edges_found)/$(get total_edges) | map $(get bitmap_cvg) | corpus $(get corpus_count) | crashes $(get saved_crashes) | hangs $(get saved_hangs) | stability $(get stability) | load $load"
    else
        echo "$t: no fuzzer_stats; see $out.log"
    fi
done
