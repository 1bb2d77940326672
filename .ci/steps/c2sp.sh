#!/usr/bin/env bash
# The C2SP cross-check (issue 29 §4): Go's golang.org/x/mod/sumdb/tlog and sumdb/note, an
# implementation Countersign shares no code with, read the audit log's tlog-tiles from a running
# service, verify its checkpoint, prove entries and check a grant receipt's tlog-proof
# (tests/c2sp-go). No Go module proxy is reachable, so both Go and x/mod come from Debian:
# golang-go (Go 1.19 on bookworm) and golang-golang-x-mod-dev (x/mod 0.7.0, used through the
# go.mod `replace` to its source tree).
set -euo pipefail
cd "$(dirname "$0")/../.."

xmod=/usr/share/gocode/src/golang.org/x/mod/sumdb/tlog/tile.go
if ! command -v go >/dev/null || [ ! -f "$xmod" ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q
    apt-get install -y -q --no-install-recommends golang-go golang-golang-x-mod-dev
fi
go version
dpkg-query -W golang-golang-x-mod-dev

(cd tests/c2sp-go && GOPROXY=off GOFLAGS=-mod=readonly go vet . && test -z "$(gofmt -l .)")
GOPROXY=off cargo test -p countersign-server --test it c2sp:: -- --include-ignored
