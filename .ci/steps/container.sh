#!/usr/bin/env bash
# The container image (Dockerfile), built and started as far as a machine that reaches no image
# registry allows. Tested: the runtime stage as written (what is copied where, the non-root user,
# the entrypoint and default command, /data owned by that user), on a base made here from Debian's
# packages in place of distroless cc (libc6 and libgcc-s1 extracted by mmdebstrap, nothing else),
# with the binary CI already built standing in for the build stage (no Rust image can be pulled);
# then `serve` in that container answers /readyz and writes its key into /data as the runtime user.
# Not tested here: the build stage (`cargo build --release` inside rust:1.95-slim-bookworm) and the
# real distroless base.
set -euo pipefail
cd "$(dirname "$0")/../.."

if ! command -v podman >/dev/null || ! command -v mmdebstrap >/dev/null; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq podman mmdebstrap >/dev/null
fi

work="$(mktemp -d)"
name="countersign-ci-$$"
runtime="localhost/countersign-ci-runtime:$$"
binary="localhost/countersign-ci-binary:$$"
image="localhost/countersign:ci-$$"
cleanup() {
    podman rm -f -v "$name" >/dev/null 2>&1 || true
    podman rmi -f "$image" "$binary" "$runtime" >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT

echo "--- a runtime base from Debian's packages: libc6 and libgcc-s1, nothing else"
mmdebstrap --quiet --variant=extract --include=libc6,libgcc-s1 bookworm "$work/base.tar"
podman import --quiet "$work/base.tar" "$runtime" >/dev/null

echo "--- the binary, built outside the image"
cargo build -q -p countersign-cli --bin countersign
mkdir -p "$work/binary/out/data"
cp "${CARGO_TARGET_DIR:-target}/debug/countersign" "$work/binary/out/countersign"
printf 'FROM scratch\nCOPY out /out\n' >"$work/binary/Containerfile"
podman build --quiet -t "$binary" "$work/binary" >/dev/null

echo "--- the project's Dockerfile"
podman build --quiet \
    --build-arg RUNTIME_IMAGE="$runtime" \
    --build-arg BINARY_STAGE="$binary" \
    -t "$image" . >/dev/null
user="$(podman image inspect --format '{{.Config.User}}' "$image")"
entry="$(podman image inspect --format '{{json .Config.Entrypoint}} {{json .Config.Cmd}}' "$image")"
echo "user: $user; entrypoint and command: $entry"
[ "$user" = "65532:65532" ] || { echo "the image must run as 65532:65532, not '$user'"; exit 1; }

echo "--- serve from the image answers /readyz"
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
serve=(serve --listen "127.0.0.1:$port" --data-dir /data)
rootfs="$work/rootfs"
pid=""
if podman run -d --name "$name" --network host "$image" "${serve[@]}" >/dev/null 2>"$work/run.err"; then
    how="podman run"
else
    # Some sandboxes refuse the OCI runtime's setrlimit, so no container starts at all (seen on
    # CI's machines: "crun: setrlimit RLIMIT_NPROC: Operation not permitted"). Then run the image's
    # own filesystem under chroot as its user: the same binary, libraries, user and /data.
    echo "podman run failed here ($(tail -n1 "$work/run.err")); running the image's filesystem under chroot"
    podman rm -f "$name" >/dev/null 2>&1 || true
    podman create --name "$name" "$image" >/dev/null
    mkdir -p "$rootfs"
    podman export "$name" | tar -x -C "$rootfs"
    user="$(podman image inspect --format '{{.Config.User}}' "$image")"
    entry="$(podman image inspect --format '{{index .Config.Entrypoint 0}}' "$image")"
    chroot --userspec="$user" "$rootfs" "$entry" "${serve[@]}" 2>"$work/serve.log" &
    pid=$!
    how="chroot"
fi
stop() {
    if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
    cleanup
}
trap stop EXIT
ready=""
for _ in $(seq 1 60); do
    if ready="$(curl -fsS "http://127.0.0.1:$port/readyz" 2>/dev/null)"; then
        break
    fi
    sleep 0.5
done
if [ -z "$ready" ]; then
    echo "no answer from /readyz ($how); the service's log:"
    podman logs "$name" 2>/dev/null || cat "$work/serve.log" || true
    exit 1
fi
echo "readyz ($how): $ready"
# What the service wrote in /data belongs to the runtime user.
if [ "$how" = "chroot" ]; then
    key="$rootfs/data/service-key"
else
    podman cp "$name:/data" "$work/data-copy"
    key="$work/data-copy/service-key"
fi
owner="$(stat -c '%u' "$key")"
[ "$owner" = "65532" ] || { echo "service-key is owned by $owner, not 65532"; exit 1; }
echo "container image: ok (/data/service-key owned by $owner)"
