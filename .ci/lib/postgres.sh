#!/usr/bin/env bash
# Sourced by the steps that need PostgreSQL (postgres.sh, notify.sh): make sure a server answers
# on 127.0.0.1:5432 (installing and starting Debian's cluster if none does) and that the test
# database exists; sets `url` (COUNTERSIGN_TEST_POSTGRES or the default test database).
url="${COUNTERSIGN_TEST_POSTGRES:-postgres://postgres@127.0.0.1:5432/test}"

if ! pg_isready -q -h 127.0.0.1 -p 5432; then
    if ! command -v pg_ctlcluster >/dev/null; then
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
    fi
    version="$(ls /etc/postgresql | sort -V | tail -n1)"
    echo "--- starting PostgreSQL $version"
    pg_ctlcluster --skip-systemctl-redirect "$version" main start
    for _ in $(seq 1 30); do
        pg_isready -q -h 127.0.0.1 -p 5432 && break
        sleep 1
    done
fi
if ! psql "$url" -Atqc 'select 1' >/dev/null 2>&1; then
    # A fresh cluster: make the test database (local socket, as the postgres superuser).
    su postgres -c "createdb test" 2>/dev/null || true
fi
