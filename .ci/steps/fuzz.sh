#!/usr/bin/env bash
# Coverage-guided fuzzing smoke run (docs/RELIABILITY.md, "Fuzzing"), on stable Rust with AFL++
# through afl.rs:
#   1. installs cargo-afl and builds AFL++ from its bundled source (both cached in the target
#      directory; needs only cc and make);
#   2. builds the eleven targets instrumented (their own target directory: other RUSTFLAGS);
#   3. writes each seed corpus from the conformance vectors and fuzzes each target for
#      FUZZ_SECONDS (default 20). afl-fuzz first runs every seed (its dry run), and stops with an
#      error if one crashes or hangs; any crash found while fuzzing fails the step too.
# The plain replay of the same seeds and of fuzz/regressions/ already ran in `cargo test`.
# Measured on the 2-core development machine, shared with other builds: see the figure in
# docs/RELIABILITY.md ("CI step"); roughly 3 min to install, 5-7 min to build, 11 x FUZZ_SECONDS.
# Knobs: FUZZ_SECONDS, FUZZ_TARGETS="canon der ..." (default: all eleven), FUZZ_KNOWN_FAILING.
set -euo pipefail
cd "$(dirname "$0")/../.."

target_dir=${CARGO_TARGET_DIR:-$PWD/target}
tools=$target_dir/afl-tools
export XDG_DATA_HOME=$tools/share # where cargo-afl keeps the AFL++ it builds
export PATH=$tools/bin:$PATH
seconds=${FUZZ_SECONDS:-20}
targets=${FUZZ_TARGETS:-canon cbor cose der auth_data client_data envelope case harness service mcp_relay}
# Targets whose crashes are reported but do not fail the step (a known open finding, named while
# its fix is under way). None today: mcp_relay was listed until issue 25's strict admission landed.
known_failing=" ${FUZZ_KNOWN_FAILING-} "

if ! cargo afl --version >/dev/null 2>&1; then
    cargo install cargo-afl --version 0.18.2 --locked --root "$tools"
fi
if [ -z "$(find "$XDG_DATA_HOME/afl.rs" -path '*/afl/bin/afl-fuzz' 2>/dev/null | head -1)" ]; then
    cargo afl config --build --force
fi

afl_target=$target_dir/afl
# cargo-afl compiles at -C opt-level=3 -C codegen-units=1; a smoke run does not need that speed,
# and level 1 roughly halves the build (the longest part of this step).
export AFL_OPT_LEVEL=${AFL_OPT_LEVEL:-1}
CARGO_TARGET_DIR=$afl_target cargo afl build -p countersign-fuzz --features afl --bins
# (`seed` is built by the same command; run outside afl-fuzz, an instrumented binary runs plainly.)
"$afl_target/debug/seed" "$afl_target/corpus"

# A CI machine has no core-dump handler to configure and its CPUs are shared.
export AFL_SKIP_CPUFREQ=1 AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES=1 AFL_NO_AFFINITY=1 AFL_NO_UI=1
# Persistent mode: restart the process now and then, so the service target's in-memory
# database does not grow for the whole run.
export AFL_FUZZER_LOOPCOUNT=20000
failed=0
mkdir -p "$afl_target/ci-out"
for t in $targets; do
    out=$afl_target/ci-out/$t
    rm -rf "$out"
    echo "fuzz_$t: ${seconds}s"
    known=0
    [[ $known_failing == *" $t "* ]] && known=1
    if ! cargo afl fuzz -V "$seconds" -i "$afl_target/corpus/$t" -o "$out" \
        "$afl_target/debug/fuzz_$t" >"$out.log" 2>&1; then
        echo "fuzz_$t: afl-fuzz failed (a seed crashes or hangs?); the end of its log:"
        tail -n 30 "$out.log"
        [ "$known" = 1 ] || failed=1
        continue
    fi
    stats=$out/default/fuzzer_stats
    grep -E '^(execs_done|execs_per_sec|edges_found|total_edges|bitmap_cvg|saved_crashes|saved_hangs) ' "$stats" | tr -s ' ' | paste -sd' '
    crashes=$(find "$out/default/crashes" -name 'id:*' | wc -l)
    if [ "$crashes" -gt 0 ]; then
        echo "fuzz_$t: $crashes crash(es); reproduce with: $afl_target/debug/fuzz_$t < FILE"
        find "$out/default/crashes" -name 'id:*' -print
        if [ "$known" = 1 ]; then
            echo "fuzz_$t: a known open finding (FUZZ_KNOWN_FAILING): not failing the step"
        else
            failed=1
        fi
    fi
done
exit "$failed"
