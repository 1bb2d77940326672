module countersign.test/c2sp-go

go 1.19

// golang.org/x/mod v0.7.0 is the release Debian 12 (bookworm) packages as
// golang-golang-x-mod-dev 0.7.0-1: it builds with bookworm's Go 1.19 (its go.mod says go 1.17),
// and its sumdb/note and sumdb/tlog import the standard library only. Go modules cannot be
// downloaded here (no module proxy), so the module is taken from the Debian package's source
// tree; .ci/steps/c2sp.sh installs it.
require golang.org/x/mod v0.7.0

replace golang.org/x/mod => /usr/share/gocode/src/golang.org/x/mod
