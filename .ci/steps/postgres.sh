#!/usr/bin/env bash
# PostgreSQL backend: the store behaviour suite against PostgreSQL, and three real replicas of
# `countersign serve` over one database (concurrency, then 200 random SIGKILLs). The tests that
# need PostgreSQL (or root, or libfaketime) are `#[ignore]`d with the reason, so a plain `cargo
# test` lists them as ignored; here they run (`--include-ignored`), with COUNTERSIGN_TEST_POSTGRES
# set, and whatever they need missing is a failure.
set -euo pipefail
cd "$(dirname "$0")/../.."

. .ci/lib/postgres.sh
psql "$url" -Atqc 'select version()'

export COUNTERSIGN_TEST_POSTGRES="$url"
echo "--- store behaviour suite (SQLite and PostgreSQL)"
cargo test -q -p countersign-server --lib store:: -- --include-ignored
echo "--- the CLI's gateway and auditor commands on PostgreSQL"
cargo test -q -p countersign-cli --test it on_postgres -- --include-ignored
# One replica test runs a replica with its wall clock an hour slow, through Debian's libfaketime.
if [ ! -e /usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1 ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libfaketime >/dev/null
fi
echo "--- three replicas over one database; 200 random SIGKILLs; a replica an hour slow"
cargo test -q -p countersign-cli --test it replicas:: -- --include-ignored
# Faults (about 1 minute): the disk fills (a tmpfs: CI runs as root), the database turns read-only, its connections are killed mid-settlement, a webhook
# receiver that never answers, wall-clock steps, slowloris.
echo "--- faults: full disk, read-only PostgreSQL, killed connections, clock, slowloris"
cargo test -q -p countersign-cli --test it faults:: -- --include-ignored --skip a_postgres_restart
# Then PostgreSQL itself restarts mid-settlement, alone: a restart cuts every session on the
# server, so run beside the other fault tests it would fail them (seen in CI: a read-only test's
# gateway never loaded, a killed-connections test's final lifecycle met the restart).
echo "--- faults: PostgreSQL restarted mid-settlement (alone)"
COUNTERSIGN_FAULT_PG_RESTART=1 cargo test -q -p countersign-cli --test it \
    faults::a_postgres_restart_mid_settlement_loses_and_doubles_nothing -- --exact --ignored
