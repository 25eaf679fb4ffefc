#!/bin/bash
# The escape suite: what a hostile workload would try from inside a sandbox, and the VMM's
# confinement read back from outside. Black-box: it drives a bluebox binary with a private
# BLUEBOX_HOME and throwaway sandboxes, and looks at /proc, `bluebox ps` and the container's
# configuration (`podman inspect`, or the OCI bundle of a direct launch) on the host.
#
#   security/escape-test.sh <bluebox> <strict|standard> <uml|krun|qemu>
#
# Prints PASS / FAIL / WARN / SKIP per check, a `slowest:` line (the eight results that took
# longest, each timed from the result before it), then `no escapes.` or `N check(s) failed.`
# Exit: 0 no FAIL, 1 any FAIL, 2 setup error (nothing was tested). Everything it made is
# removed on exit, also when interrupted. Run it as the user whose sandboxes it should test
# (as a rootless user for strict). SECURITY.md maps each check to the claim it tests.
# A check that needs what the backend does not have yet (the qemu backend's refusals: "… is
# not on the qemu backend yet", "… the qemu backend does not have yet") is a SKIP that quotes
# the refusal, decided by asking bluebox, so it runs as soon as the backend has it.
#
# Environment:
#   BLUEBOX_ESCAPE_ONLY=a,b   run only these checks (ids as printed)
#   BLUEBOX_ESCAPE_IMAGE=ref  base image (default: localhost/bluebox-test/busybox:latest when
#                             present, else docker.io/library/busybox:latest); needs
#                             busybox's sh, wget, nc, ip, mount
#   BLUEBOX_ESCAPE_FORKBOMB=1 run the fork bomb even where the host cannot enforce the pids
#                             limit (it is then bounded only by the guest's memory)
#   BLUEBOX_ESCAPE_RESPONSIVE_MS=N  threshold for the host's `ls /` during the bomb (1000)
#   BLUEBOX_ESCAPE_NAME=esc-x the sandboxes' name prefix (default esc-<pid>-<random>), so a
#                             caller running several suites at once can tell theirs apart
#   BLUEBOX_ESCAPE_DEBUG=1    print what the egress checks' guest printed, and their log
#   BLUEBOX_ESCAPE_RUN=1      guest commands through a fresh `bluebox run` even where up works
#                             (to test run's launch path, e.g. with BLUEBOX_LAUNCH=direct)
#   TMPDIR                    where the work directory goes (default /tmp)
#   BLUEBOX_LAUNCH=podman     run/shell through `podman run` instead of the direct launch
#                             (runc without podman, the default on uml); the suite reads the
#                             container either way
#   BLUEBOX_QEMU_ACCEL=tcg    qemu with TCG, where KVM cannot run a guest (the suite never
#                             sets it: without it, qemu means KVM)
set -u
umask 022
PATH=${PATH:-/usr/local/bin:/usr/bin:/bin}

usage() {
    sed -n '2,/^set -u$/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
    exit 2
}
[ $# -eq 3 ] || usage
case $2 in strict | standard) ;; *) usage ;; esac
case $3 in uml | krun | qemu) ;; *) usage ;; esac
BIN=$(command -v "$1" 2>/dev/null) || BIN=$1
case $BIN in /*) ;; *) BIN=$PWD/$BIN ;; esac
MODE=$2
BACKEND=$3
ONLY=",${BLUEBOX_ESCAPE_ONLY:-},"
RESPONSIVE_MS=${BLUEBOX_ESCAPE_RESPONSIVE_MS:-1000}
ME=$(id -u)

# ---------------------------------------------------------------- reporting
npass=0 nfail=0 nwarn=0 nskip=0
# Each result's seconds since the one before (the first's include the set-up), for the
# `slowest:` line above the summary: where a slow backend's run spends its time.
last_line=${EPOCHREALTIME//[!0-9]/}
took=()
line() {
    local now=${EPOCHREALTIME//[!0-9]/}
    took+=("$(((now - last_line) / 1000000)) $2")
    last_line=$now
    printf '%-4s  %-14s %s\n' "$1" "$2" "$3"
}
pass() { line PASS "$1" "$2"; npass=$((npass + 1)); }
fail() { line FAIL "$1" "$2"; nfail=$((nfail + 1)); }
warn() { line WARN "$1" "$2"; nwarn=$((nwarn + 1)); }
skip() { line SKIP "$1" "$2"; nskip=$((nskip + 1)); }
# want ID: is this check selected?
want() { [ "$ONLY" = ",," ] || [[ $ONLY == *",$1,"* ]]; }
want_any() {
    local c
    for c in "$@"; do want "$c" && return 0; done
    return 1
}
setup_error() {
    echo "escape-test: setup error: $*" >&2
    exit 2
}
# not_yet OUTPUT: bluebox's refusal in OUTPUT of something the backend does not have yet
# (qemu's first stages), without its "bluebox: " prefix; nothing when OUTPUT has none
not_yet() {
    [ "$BACKEND" = qemu ] || return 0
    grep -Em1 'not on the qemu backend yet|the qemu backend (does not have|cannot)|needs? backend: uml for now' <<<"$1" |
        sed 's/^bluebox: //; s/^built, but isolation is not verified: //
             s/^could not boot the sandbox on qemu for the isolation check: //'
}

# ---------------------------------------------------------------- cleanup
WORK=""
NAMES=()
BG_PIDS=()
SERVER_PID=""
NET_SERVER_PID=""
API_PID="" # bluebox serve, while sdk-socket runs
UP=0
# shellcheck disable=SC2317  # reached through the EXIT trap
cleanup() {
    local p n ids
    trap '' INT TERM
    for p in "${BG_PIDS[@]}" $SERVER_PID $NET_SERVER_PID $API_PID; do
        kill "$p" 2>/dev/null
    done
    for p in "${BG_PIDS[@]}" $SERVER_PID $NET_SERVER_PID $API_PID; do
        wait "$p" 2>/dev/null
    done
    for n in "${NAMES[@]}"; do
        [ "$UP" = 1 ] && "$BIN" down "$n" >/dev/null 2>&1
        # shellcheck disable=SC2046  # this home's containers only (home_filter)
        ids=$(podman ps -aq --filter "label=bluebox.sandbox=$n" $(home_filter) 2>/dev/null)
        # shellcheck disable=SC2086
        [ -z "$ids" ] || podman rm -f -t 0 $ids >/dev/null 2>&1
        "$BIN" destroy "$n" --data -y >/dev/null 2>&1
    done
    [ -z "${USER_IMAGE:-}" ] || podman rmi -f "$USER_IMAGE" >/dev/null 2>&1
    if [ -n "$WORK" ] && [ -d "$WORK" ]; then
        rm -rf "$WORK" 2>/dev/null || podman unshare rm -rf "$WORK" 2>/dev/null
    fi
}
trap cleanup EXIT
trap 'echo "escape-test: interrupted" >&2; exit 130' INT
trap 'echo "escape-test: terminated" >&2; exit 143' TERM

# ---------------------------------------------------------------- setup
[ -x "$BIN" ] || setup_error "$1 is not an executable"
command -v podman >/dev/null || setup_error "podman is not on PATH"
command -v python3 >/dev/null || setup_error "python3 is needed for the loopback probe server"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/bluebox-escape.XXXXXX") || setup_error "cannot make a work directory"
# Readable by a strict sandbox's subordinate UID (the rw mount below is 0777 for the same
# reason); nothing secret lives here but the planted secrets, which are the point.
chmod 0755 "$WORK"
export BLUEBOX_HOME=$WORK/home
export BLUEBOX_BACKEND=$BACKEND
cd "$WORK" || setup_error "cannot enter $WORK"

rand() { od -An -N16 -tx1 /dev/urandom | tr -d ' \n'; }
# The home's id, the suffix of its image tags (localhost/bluebox/<name>:<id>), once a
# sandbox exists; empty for a bluebox from before names carried the home.
HOME_ID=""
# home_filter: the podman ps filter that keeps to this home's containers (see HOME_ID)
# shellcheck disable=SC2317  # reached through cleanup (the EXIT trap)
home_filter() { [ -z "$HOME_ID" ] || echo "--filter label=bluebox.home=$HOME_ID"; }
SECRET=escape-secret-$(rand)
LOOP_SECRET=loopback-secret-$(rand)
OUTSIDE=$WORK/outside # outside every mount: the guest must never see or touch it
mkdir -p "$OUTSIDE" "$WORK/ro" "$WORK/rw"
printf 'read-only host file\n' >"$WORK/ro/in"
chmod 0777 "$WORK/rw"
# fingerprint of what lies outside: names, sizes, contents
outside_state() { (cd "$OUTSIDE" && find . -printf '%p %y %s\n' | sort && cat ./* 2>/dev/null); }
# plant_outside: (re)make what lies outside, and remember its state
plant_outside() {
    rm -rf "${OUTSIDE:?}"/*
    printf '%s\n' "$SECRET" >"$OUTSIDE/secret"
    printf 'untouched\n' >"$OUTSIDE/target"
    OUTSIDE_BEFORE=$(outside_state)
}
plant_outside

IMAGE=${BLUEBOX_ESCAPE_IMAGE:-}
if [ -z "$IMAGE" ]; then
    IMAGE=docker.io/library/busybox:latest
    podman image exists localhost/bluebox-test/busybox:latest 2>/dev/null &&
        IMAGE=localhost/bluebox-test/busybox:latest
fi
BASE_NAME=esc-$$-$(rand | cut -c1-6)
if [ -n "${BLUEBOX_ESCAPE_NAME:-}" ]; then
    [[ $BLUEBOX_ESCAPE_NAME =~ ^esc-[a-z0-9]{1,16}$ ]] ||
        { echo "escape-test: BLUEBOX_ESCAPE_NAME must be esc- and 1-16 of [a-z0-9]" >&2; exit 2; }
    BASE_NAME=$BLUEBOX_ESCAPE_NAME
fi
A=$BASE_NAME-a # the sandbox most checks run in
B=$BASE_NAME-b # the fork bomb's own sandbox
ISO=""
RW_MOUNT="
  - {host: $WORK/rw, guest: /rw, mode: rw}"
if [ "$MODE" = strict ]; then
    ISO="isolation: strict"
    RW_MOUNT="" # strict allows read-only mounts only
fi

# define NAME BLUEFILE-BODY
define() {
    local out
    out=$("$BIN" new "$1" 2>&1) || setup_error "bluebox new $1: $out"
    NAMES+=("$1")
    printf '%s\n' "$2" >"$BLUEBOX_HOME/sandboxes/$1/Bluefile"
}
# define_a NETWORK: sandbox A's Bluefile
define_a() {
    local body="base: $IMAGE
backend: $BACKEND
ram_mib: 256
network: $1
readonly: true
timeout_seconds: 300
$ISO
mounts:
  - {host: $WORK/ro, guest: /ro, mode: ro}$RW_MOUNT"
    if [ -d "$BLUEBOX_HOME/sandboxes/$A" ]; then
        printf '%s\n' "$body" >"$BLUEBOX_HOME/sandboxes/$A/Bluefile"
    else
        define "$A" "$body"
    fi
}
define_a bridge
HOME_ID=$("$BIN" env "$A" 2>/dev/null | sed -n "s/^BLUEBOX_IMAGE='.*:\([0-9a-f]\{12\}\)'\$/\1/p")
# NO_BRIDGE: why the checks that need a bridge guest (loopback, host-gateway, lan, metadata,
# dns-exfil, sni-fronting, secret-in-guest) cannot run on this backend yet; A is then
# network: none, and every other check runs in it as usual
NO_BRIDGE=""
BUILD_OUT=$("$BIN" build "$A" 2>&1)
build_rc=$?
NO_BRIDGE=$(not_yet "$BUILD_OUT")
if [ -n "$NO_BRIDGE" ]; then
    define_a none
    BUILD_OUT=$("$BIN" build "$A" 2>&1)
    build_rc=$?
fi
[ "$build_rc" = 0 ] || {
    printf '%s\n' "$BUILD_OUT" | tail -n 20 >&2
    setup_error "bluebox build $A failed"
}
POSTURE=$(printf '%s\n' "$BUILD_OUT" | grep '^isolation: ' | tail -n1)
LIMITS_CLAIMED=1
[[ $POSTURE == *"NOT enforced"* ]] && LIMITS_CLAIMED=0

echo "bluebox escape test: $BIN · $MODE · $BACKEND · uid $ME · $(uname -r)"
echo "posture: ${POSTURE:-?}"
[ -z "$NO_BRIDGE" ] || echo "network: none (a bridge guest's checks are skipped: $NO_BRIDGE)"

# have CMD...: does this bluebox implement the command (help exits 0 only when it does)?
have() { "$BIN" "$@" --help >/dev/null 2>&1; }

# in_guest CMD...: one command in sandbox A; `exec` on the up VM when `up` works, else a
# fresh `run`. stdout and stderr go to stdout.
in_guest() {
    if [ "$UP" = 1 ]; then
        "$BIN" exec "$A" -- "$@" </dev/null 2>&1
    else
        "$BIN" run "$A" -- "$@" </dev/null 2>&1
    fi
}
TOKEN=""
AGENT_PORT=""
NO_UP="" # why up (the agent) cannot run on this backend yet: the checks that need it skip
if [ "${BLUEBOX_ESCAPE_RUN:-}" = 1 ]; then
    echo "guest commands: bluebox run (BLUEBOX_ESCAPE_RUN=1)"
elif have up && have exec; then
    if up_out=$("$BIN" up "$A" 2>&1); then
        UP=1
        state=$BLUEBOX_HOME/run/$A.json
        TOKEN=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["token"])' "$state" 2>/dev/null)
        AGENT_PORT=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["address"].rsplit(":",1)[1])' "$state" 2>/dev/null)
        echo "guest commands: bluebox exec on an up sandbox"
    elif NO_UP=$(not_yet "$up_out") && [ -n "$NO_UP" ]; then
        echo "guest commands: bluebox run ($NO_UP)"
    else
        warn up "bluebox up $A failed, falling back to bluebox run: $(printf '%s' "$up_out" | tail -n1)"
    fi
else
    echo "guest commands: bluebox run (up/exec not available in this bluebox)"
fi

# port_of FILE: the port a probe server wrote to FILE once it listens (within 10 s); fails
# when it did not
port_of() {
    local _
    for _ in $(seq 100); do
        [ -s "$1" ] && break
        sleep 0.1
    done
    cat "$1" 2>/dev/null
}

# The loopback probe: a server on the host's 127.0.0.1 that holds a secret and logs every
# connection it accepts.
start_server() {
    python3 - "$WORK/server.port" "$WORK/server.log" "$LOOP_SECRET" <<'EOF' &
import http.server, sys
port_file, log_file, secret = sys.argv[1:4]
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = secret.encode() + b"\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
class S(http.server.HTTPServer):
    def verify_request(self, request, addr):
        with open(log_file, "a") as f:
            f.write("connection from %s:%d\n" % addr)
        return True
s = S(("127.0.0.1", 0), H)
with open(port_file + ".tmp", "w") as f:
    f.write(str(s.server_address[1]))
import os
os.rename(port_file + ".tmp", port_file)
s.serve_forever()
EOF
    SERVER_PID=$!
    PORT=$(port_of "$WORK/server.port") || setup_error "the loopback probe server did not start"
    : >>"$WORK/server.log"
    # the server answers on the host: the probe itself works
    python3 -c 'import sys,urllib.request; sys.exit(sys.argv[2] not in urllib.request.urlopen("http://127.0.0.1:%s/" % sys.argv[1], timeout=5).read().decode())' \
        "$PORT" "$LOOP_SECRET" || setup_error "the loopback probe server does not answer on the host"
    : >"$WORK/server.log"
}
PORT=""
want loopback && [ -z "$NO_BRIDGE" ] && start_server

# The host as a bridge guest finds it: TCP servers on podman's bridge gateway (host-gateway)
# and on the host's own LAN address (lan), each logging every connection it accepts.
NET_GW=""
NET_LAN=""
NET_GW_PORT=""
NET_LAN_PORT=""
start_net_servers() {
    local gw lan a p _
    gw=$(podman network inspect podman --format '{{range .Subnets}}{{.Gateway}}{{end}}' 2>/dev/null)
    [ -n "$gw" ] && ip -o -4 addr show 2>/dev/null | awk '{print $4}' | grep -q "^$gw/" || gw=""
    lan=$(ip -o -4 addr show scope global 2>/dev/null |
        awk '$2 !~ /^(podman|cni-|veth)/ { sub(/\/.*/, "", $4); print $4; exit }')
    [ -n "$gw$lan" ] || return 0
    local addrs=()
    [ -n "$gw" ] && addrs+=("$gw")
    [ -n "$lan" ] && addrs+=("$lan")
    python3 - "$WORK/net.ports" "$WORK/net.log" "${addrs[@]}" <<'EOF' &
import socket, sys, threading
ports_file, log_file, addrs = sys.argv[1], sys.argv[2], sys.argv[3:]
def serve(s, addr):
    while True:
        c, peer = s.accept()
        with open(log_file, "a") as f:
            f.write("%s: connection from %s:%d\n" % (addr, peer[0], peer[1]))
        c.close()
lines = []
for a in addrs:
    s = socket.create_server((a, 0))
    lines.append("%s %d\n" % (a, s.getsockname()[1]))
    threading.Thread(target=serve, args=(s, a), daemon=True).start()
with open(ports_file + ".tmp", "w") as f:
    f.writelines(lines)
import os
os.rename(ports_file + ".tmp", ports_file)
threading.Event().wait()
EOF
    NET_SERVER_PID=$!
    for _ in $(seq 100); do
        [ -s "$WORK/net.ports" ] && break
        sleep 0.1
    done
    : >>"$WORK/net.log"
    while read -r a p; do
        [ "$a" = "$gw" ] && NET_GW=$a NET_GW_PORT=$p
        [ "$a" = "$lan" ] && NET_LAN=$a NET_LAN_PORT=$p
    done <"$WORK/net.ports"
    # the servers answer on the host: the probe itself works
    for a in "$NET_GW:$NET_GW_PORT" "$NET_LAN:$NET_LAN_PORT"; do
        [ "$a" = : ] && continue
        python3 -c 'import socket,sys; socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=5).close()' \
            "${a%:*}" "${a#*:}" || setup_error "the probe server on $a does not answer on the host"
    done
    # (the servers log after accepting: wait for the host's own connections before clearing)
    for _ in $(seq 50); do
        [ "$(wc -l <"$WORK/net.log")" -ge "${#addrs[@]}" ] && break
        sleep 0.1
    done
    : >"$WORK/net.log"
}
want_any host-gateway lan && [ -z "$NO_BRIDGE" ] && start_net_servers

# ---------------------------------------------------------------- the guest's attempts
# One boot runs every in-guest attempt; each prints a "== section" and, where it got
# through, a line saying so. The guest never learns the secrets: the host looks for them
# in what the guest printed.
S=$OUTSIDE/secret
T=$OUTSIDE/target
probe_script() {
    cat <<EOF
cd /
echo "== kernel"
uname -r
cat /proc/sys/kernel/random/boot_id
echo "== host-files"
for f in $S $OUTSIDE /host$S /mnt$S /run/host$S; do
    [ -e "\$f" ] && echo "VISIBLE \$f"
done
cat $S 2>/dev/null
echo "== symlinks"
ln -sfn $S /data/esc-abs
ln -sfn ../../../../../../../../..$S /data/esc-rel
ln -sfn $OUTSIDE /data/esc-dir
ln -sfn $T /data/esc-wr
ln -sfn $S /rw/esc-abs
ln -sfn ../../../../../../../../..$S /rw/esc-rel
mkdir -p /data/esc-d && echo inside > /data/esc-d/f
cat /data/esc-abs /data/esc-rel /data/esc-dir/secret /rw/esc-abs /rw/esc-rel 2>/dev/null
(echo guest-wrote > /data/esc-wr) 2>/dev/null && echo "WROTE through /data/esc-wr"
(echo guest-wrote > /data/esc-dir/new) 2>/dev/null && echo "WROTE through /data/esc-dir"
echo "== dotdot"
cat /data/../../../..$S /rw/../../../..$S /ro/../../..$S 2>/dev/null
ls -a /data/../../.. /rw/../.. 2>/dev/null | grep -qx "$(basename "$OUTSIDE")" && echo "VISIBLE via .."
echo "== setuid"
cp /bin/busybox /tmp/esc-suid-src 2>/dev/null && chown 1234:1234 /tmp/esc-suid-src 2>/dev/null
chmod 6755 /tmp/esc-suid-src 2>/dev/null
for d in /data /rw; do
    [ -d "\$d" ] && [ -w "\$d" ] || continue
    cp /bin/busybox "\$d/esc-suid" && chown 0:0 "\$d/esc-suid" 2>/dev/null
    chmod 4755 "\$d/esc-suid" 2>/dev/null && echo "SET setuid on \$d/esc-suid"
    cp /bin/busybox "\$d/esc-sgid" && chmod 2755 "\$d/esc-sgid" 2>/dev/null && echo "SET setgid on \$d/esc-sgid"
    : > "\$d/esc-owner" && chown 1234:1234 "\$d/esc-owner" 2>/dev/null && echo "SET owner 1234 on \$d/esc-owner"
    mkdir -p "\$d/esc-sgid-dir" && chmod g+s "\$d/esc-sgid-dir" 2>/dev/null && echo "SET setgid on \$d/esc-sgid-dir"
    mkfifo -m 4755 "\$d/esc-fifo" 2>/dev/null && echo "MADE \$d/esc-fifo with mode 4755"
    cp -p /tmp/esc-suid-src "\$d/esc-cp-p" 2>/dev/null && echo "COPIED a setuid file to \$d/esc-cp-p"
done
echo "== ro-root"
for f in /esc-root /etc/esc-root /usr/esc-root; do
    (: > "\$f") 2>/dev/null && echo "WROTE \$f"
done
mount -o remount,rw / 2>/dev/null
for f in /esc-root2 /etc/esc-root2; do
    (: > "\$f") 2>/dev/null && echo "WROTE \$f after a remount"
done
# qemu: the root's lower layer is the file server's read-only export (virtio-fs tag bbroot);
# guest root mounts it again by hand, read-write, and writes
mkdir -p /tmp/esc-v
if mount -t virtiofs bbroot /tmp/esc-v 2>/dev/null; then
    mount -o remount,rw /tmp/esc-v 2>/dev/null
    (: > /tmp/esc-v/esc-root3) 2>/dev/null && echo "WROTE /esc-root3 through virtio-fs bbroot"
    (: >> /tmp/esc-v/etc/passwd) 2>/dev/null && echo "WROTE /etc/passwd through virtio-fs bbroot"
    umount /tmp/esc-v
fi
echo "== ro-mount"
(: >> /ro/in) 2>/dev/null && echo "WRITABLE /ro/in"
(echo x > /ro/esc-new) 2>/dev/null && echo "WROTE /ro/esc-new"
mount -o remount,rw /ro 2>/dev/null
(echo x > /ro/esc-new2) 2>/dev/null && echo "WROTE /ro/esc-new2 after a remount"
(: >> /ro/in) 2>/dev/null && echo "WRITABLE /ro/in after a remount"
echo "== vmm-fs"
procview() {
    n=\$(ls "\$1" 2>/dev/null | grep -c '^[0-9][0-9]*\$')
    [ "\$n" -gt 0 ] && echo "REACHED \$2: \$n processes (\$(readlink "\$1"/self/exe 2>/dev/null || echo ?))"
}
mkdir -p /tmp/esc-h /tmp/esc-r
for p in /proc / /.bluebox /.. /data/../.. /.bluebox/../proc; do
    if mount -t hostfs none /tmp/esc-h -o "\$p" 2>/dev/null; then
        procview /tmp/esc-h "hostfs \$p"
        procview /tmp/esc-h/proc "hostfs \$p, proc/"
        umount /tmp/esc-h
    fi
done
# every file-server device by hand (qemu's root is bbroot; /data and mounts are bbfsN): the
# container's /proc and bluebox's own directory are not in any of them
for t in bbroot bbfs0 bbfs1 bbfs2 bbfs3; do
    mount -t virtiofs \$t /tmp/esc-h 2>/dev/null || continue
    procview /tmp/esc-h "virtio-fs \$t"
    procview /tmp/esc-h/proc "virtio-fs \$t, proc/"
    for f in /tmp/esc-h/.bluebox/bluebox /tmp/esc-h/.bluebox/vmm/*; do
        [ -s "\$f" ] && echo "REACHED \$f through virtio-fs \$t" # (not podman's empty mountpoint)
    done
    umount /tmp/esc-h
done
mount --bind / /tmp/esc-r 2>/dev/null && procview /tmp/esc-r/proc "bind mount of /, proc/"
echo "== agent-binary"
for f in /.bluebox/bluebox /.bluebox/vmm/* /tmp/esc-r/.bluebox/bluebox /tmp/esc-r/.bluebox/vmm/*; do
    [ -f "\$f" ] || continue
    (: >> "\$f") 2>/dev/null && echo "WRITABLE \$f"
done
mount -o remount,rw /.bluebox/bluebox 2>/dev/null
(: >> /.bluebox/bluebox) 2>/dev/null && echo "WRITABLE /.bluebox/bluebox after a remount"
mkdir -p /tmp/esc-b
if mount -t hostfs none /tmp/esc-b -o /.bluebox 2>/dev/null; then
    for f in /tmp/esc-b/bluebox /tmp/esc-b/vmm/*; do
        [ -f "\$f" ] || continue
        (: >> "\$f") 2>/dev/null && echo "WRITABLE \$f through hostfs"
    done
    umount /tmp/esc-b
fi
echo "== dev-kvm"
for f in /dev/kvm /tmp/esc-r/dev/kvm; do
    [ -e "\$f" ] && echo "PRESENT \$f"
done
echo "== token"
for f in /proc/[0-9]*/environ; do tr '\0' '\n' < "\$f"; done 2>/dev/null
env
echo "== loopback"
EOF
    if want loopback; then
        cat <<EOF
gw=\$(ip route 2>/dev/null | awk '/^default/ {print \$3; exit}')
echo "GATEWAY \$gw"
for a in 127.0.0.1 localhost host.containers.internal host.docker.internal 169.254.1.2 10.0.2.2 \$gw; do
    for p in $PORT $AGENT_PORT; do
        (nc -w 3 "\$a" "\$p" -e /bin/true </dev/null >/dev/null 2>&1 && echo "CONNECTED \$a:\$p") &
        (printf 'GET / HTTP/1.0\r\n\r\n' | nc -w 3 "\$a" "\$p" 2>/dev/null) &
    done
done
wait
EOF
    fi
    # host-gateway, lan, metadata: one TCP connect each; CONNECTED, or nc's error (a refusal by
    # bluebox-vmm's network policy is an immediate "Connection refused")
    local id addr port
    for id in host-gateway lan metadata; do
        case $id in
        host-gateway) addr=$NET_GW port=$NET_GW_PORT ;;
        lan) addr=$NET_LAN port=$NET_LAN_PORT ;;
        metadata) addr=169.254.169.254 port=80 ;;
        esac
        want "$id" || continue
        echo "echo '== $id'"
        [ -n "$addr" ] || continue
        echo "nc -w 5 $addr $port </dev/null >/dev/null 2>/tmp/esc-nc && echo 'CONNECTED $addr:$port'; head -c 200 /tmp/esc-nc; echo"
    done
    echo 'echo "== end"'
}

# section NAME: the lines the guest printed in that section
section() { awk -v s="== $1" '$0 == s { on = 1; next } /^== / { on = 0 } on' "$WORK/probe.out"; }
# hits NAME REGEX: the section's lines matching REGEX, joined
hits() { section "$1" | grep -E "$2" | head -n 8 | paste -sd ';' | sed 's/;/; /g'; }
has_secret() { section "$1" | grep -qF "$SECRET"; }

GUEST_CHECKS=(kernel host-files symlinks dotdot setuid ro-root ro-mount vmm-fs agent-binary dev-kvm token loopback host-gateway lan metadata)
if want_any "${GUEST_CHECKS[@]}" data-snapshot data-export data-restore data-reset data-destroy; then
    in_guest sh -c "$(probe_script)" >"$WORK/probe.out"
    grep -qx '== end' "$WORK/probe.out" || {
        tail -n 20 "$WORK/probe.out" >&2
        setup_error "the in-guest probe did not finish"
    }
fi

# ---------------------------------------------------------------- checks on what it printed
check_kernel() {
    local rel boot
    rel=$(section kernel | sed -n 1p)
    boot=$(section kernel | sed -n 2p)
    if [ -z "$rel" ] || [ -z "$boot" ]; then
        fail kernel "the guest did not report its kernel"
    elif [ "$rel" = "$(uname -r)" ]; then
        fail kernel "the guest runs the host's kernel release $rel"
    elif [ "$boot" = "$(cat /proc/sys/kernel/random/boot_id)" ]; then
        fail kernel "the guest has the host's boot_id"
    else
        pass kernel "guest kernel $rel, host $(uname -r); boot_ids differ"
    fi
}

check_host_files() {
    local h
    h=$(hits host-files '^VISIBLE')
    if [ -n "$h" ] || has_secret host-files; then
        fail host-files "a host file outside every mount is visible in the guest: ${h:-its content was read}"
    else
        pass host-files "$OUTSIDE (outside every mount) is invisible to the guest"
    fi
}

check_symlinks() {
    local h
    h=$(hits symlinks '^WROTE')
    if has_secret symlinks; then
        fail symlinks "a symlink planted in /data or an rw mount resolved to the host's file"
    elif [ -n "$h" ] || [ "$(outside_state)" != "$OUTSIDE_BEFORE" ]; then
        fail symlinks "a write through a planted symlink reached the host: ${h:-$OUTSIDE changed}"
    elif [ -n "$RW_MOUNT" ] && [ ! -L "$WORK/rw/esc-abs" ]; then
        fail symlinks "the symlink planted in the rw mount did not arrive as a symlink"
    else
        pass symlinks "symlinks planted in /data${RW_MOUNT:+ and an rw mount} resolve inside the guest"
    fi
}

check_dotdot() {
    if has_secret dotdot || [ -n "$(hits dotdot '^VISIBLE')" ]; then
        fail dotdot "'..' through a mount reached a host path"
    else
        pass dotdot "'..' through /data and the mounts finds nothing of the host"
    fi
}

# What the guest wrote through hostfs carries no privilege on the host: no setuid or setgid
# bit, no owner or group but the one bluebox gave the sandbox's /data (you under standard,
# the subordinate UID under strict). The guest tried chown 0:0 + chmod 4755, chmod 2755,
# chown 1234, a setgid directory, mkfifo -m 4755 and cp -p of a setuid file, in /data and
# the rw mount.
check_setuid() {
    local data=$BLUEBOX_HOME/data/$A uid gid bad
    uid=$(stat -c %u "$data") gid=$(stat -c %g "$data")
    if [ ! -e "$data/esc-suid" ] || { [ -n "$RW_MOUNT" ] && [ ! -e "$WORK/rw/esc-suid" ]; }; then
        fail setuid "the guest's files did not reach the host, nothing was tested"
        return
    fi
    bad=$(find "$data" ${RW_MOUNT:+"$WORK/rw"} \( -perm /6000 -o ! -uid "$uid" -o ! -gid "$gid" \) \
        -printf '%p %m %U:%G\n' 2>&1 | head -n 6 | paste -sd ';' | sed 's/;/; /g')
    if [ -n "$bad" ]; then
        fail setuid "guest-written host files carry privilege (want owner $uid:$gid, no setuid/setgid): $bad"
    else
        pass setuid "guest chmod/chown/mkfifo/cp -p leave no setuid, setgid or foreign owner on the host (owner $uid:$gid)"
    fi
}

# A check that fails when the guest's probe printed a line matching PATTERN in its section.
check_no_hits() { # ID PATTERN FAIL-PREFIX PASS-MESSAGE
    local h
    h=$(hits "$1" "$2")
    if [ -n "$h" ]; then fail "$1" "$3: $h"; else pass "$1" "$4"; fi
}

check_ro_mount() {
    local h
    h=$(hits ro-mount '^(WROTE|WRITABLE)')
    if [ -n "$h" ] || [ -e "$WORK/ro/esc-new" ] || [ -e "$WORK/ro/esc-new2" ] ||
        [ "$(cat "$WORK/ro/in")" != "read-only host file" ]; then
        fail ro-mount "an ro mount took a write: ${h:-a file changed on the host}"
    else
        pass ro-mount "an ro mount refuses writes, also after a remount in the guest"
    fi
}



check_dev_kvm() {
    local h devs
    h=$(hits dev-kvm '^PRESENT')
    if [ -n "$h" ]; then
        fail dev-kvm "the guest sees a KVM device: $h"
        return
    fi
    # the VMM's container holds /dev/kvm only where the VM runs on KVM (krun, qemu (KVM))
    local emulated=0
    [ "$BACKEND" = uml ] && emulated=1
    [ "$BACKEND" = qemu ] && [[ $POSTURE == *"qemu (TCG"* ]] && emulated=1
    if [ "$emulated" = 1 ] && [ -n "${VMM_CID:-}" ]; then
        devs=$(container_fact "$VMM_CID" devices)
        if [[ $devs == *kvm* ]]; then
            fail dev-kvm "the $BACKEND VMM's container was given a KVM device: $devs"
            return
        fi
    fi
    local also=""
    [ "$emulated" = 1 ] && [ -n "${VMM_CID:-}" ] && also=" or in the $BACKEND VMM container"
    pass dev-kvm "no /dev/kvm in the guest$also"
}

# The agent's chain head for the state's token (src/abi/chain.h), hex: what the guest
# holds instead of the token. Found in the agent's memory, it shows the scan reads memory.
chain_head() {
    python3 -c 'import hashlib, struct, sys
v = hashlib.sha256(sys.argv[1].encode() + b"bluebox-agent" + struct.pack(">I", 0)).digest()
for _ in range(1024):
    v = hashlib.sha256(v).digest()
print(v.hex())' "$1"
}

# Guest root dumps the readable memory of every guest process into /data (which is the
# host's data directory); the host looks for the token there, so the guest never sees it.
mem_scan_script() {
    cat <<'EOF'
mkdir -p /data/.esc-mem || exit 1
for d in /proc/[0-9]*; do
    p=${d#/proc/}
    [ "$p" = "$$" ] && continue
    while read -r range perms rest; do
        case $perms in r*) ;; *) continue ;; esac
        case $rest in *vsyscall* | *vvar*) continue ;; esac
        s=$((0x${range%-*}))
        e=$((0x${range#*-}))
        [ $((e - s)) -le 67108864 ] || continue
        dd if="$d/mem" bs=4096 skip=$((s / 4096)) count=$(((e - s) / 4096)) 2>/dev/null
    done <"$d/maps" >"/data/.esc-mem/$p" 2>/dev/null
done
echo "SCANNED $(ls /data/.esc-mem | wc -l)"
EOF
}

# scan_guest_memory: "<processes> <MiB> <token hits> <head hits>", after at least one exec
scan_guest_memory() {
    local dir=$BLUEBOX_HOME/data/$A/.esc-mem out
    out=$(in_guest sh -c "$(mem_scan_script)")
    [[ $out == *SCANNED* ]] || return 1
    python3 - "$dir" "$TOKEN" "$(chain_head "$TOKEN")" <<'EOF'
import os, sys
d, token, head = sys.argv[1], sys.argv[2].encode(), bytes.fromhex(sys.argv[3])
n = size = tok = hd = 0
for f in os.listdir(d):
    try:
        data = open(os.path.join(d, f), "rb").read()
    except OSError:
        continue
    n += 1
    size += len(data)
    tok += data.count(token)
    hd += data.count(head) + data.count(head.hex().encode())
print(n, size >> 20, tok, hd)
EOF
}

# ask_socket SOCK [USER]: GET /v1/version on the API socket (as USER when given); prints
# ANSWERED when an HTTP answer came back, REFUSED when the connection was taken and closed
# unanswered, NOCONNECT when it could not connect at all.
ask_socket() {
    local py
    py=$(command -v /usr/bin/python3 || command -v python3)
    local code='
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(5)
try:
    s.connect(sys.argv[1])
except OSError as e:
    print("NOCONNECT (%s)" % e)
    sys.exit()
try:
    s.sendall(b"GET /v1/version HTTP/1.1\r\nHost: x\r\n\r\n")
    got = s.recv(100)
    print("ANSWERED" if got.startswith(b"HTTP/") else "REFUSED (closed)")
except OSError as e:
    print("REFUSED (%s)" % e.__class__.__name__)
'
    if [ $# -gt 1 ]; then
        setpriv --reuid="$2" --regid="$2" --clear-groups "$py" -c "$code" "$1" 2>&1
    else
        "$py" -c "$code" "$1" 2>&1
    fi
}

# sdk-socket: bluebox serve's socket is owner-only from the start (mode, directory), a
# connection from another UID is refused by the SO_PEERCRED check even when the socket has
# been opened up by mistake (chmod 0666, directory o+x), and a symlink planted at the socket
# path is never followed.
check_sdk_socket() {
    if ! have serve; then
        skip sdk-socket "serve not available"
        return
    fi
    local sock=$BLUEBOX_HOME/bluebox.sock dir=$BLUEBOX_HOME mode dmode other="" out
    "$BIN" serve --idle 0 >/dev/null 2>"$WORK/serve.err" &
    API_PID=$!
    for _ in $(seq 50); do [ -S "$sock" ] && break; sleep 0.1; done
    if [ ! -S "$sock" ]; then
        fail sdk-socket "serve did not make its socket: $(tail -n1 "$WORK/serve.err")"
        return
    fi
    mode=$(stat -c %a "$sock")
    dmode=$(stat -c %a "$dir")
    if [ "$mode" != 600 ]; then
        fail sdk-socket "the socket is mode $mode, not 0600"
    elif [ "$(stat -c %u "$dir")" != "$ME" ] || (((8#$dmode & 8#022) != 0)); then
        fail sdk-socket "the socket's directory is mode $dmode or not this user's"
    elif [ "$(ask_socket "$sock")" != ANSWERED ]; then
        fail sdk-socket "the owner is not answered: $(ask_socket "$sock")"
    else
        if [ "$ME" = 0 ] && command -v setpriv >/dev/null; then
            other=$(id -u nobody 2>/dev/null || echo 65534)
        fi
        if [ -z "$other" ]; then
            warn sdk-socket "socket 0600 in an owner-only directory; another UID not tried (needs root for setpriv)"
        else
            chmod 0711 "$dir"
            chmod 0666 "$sock"
            out=$(ask_socket "$sock" "$other")
            chmod 0700 "$dir"
            chmod 0600 "$sock" 2>/dev/null
            if [[ $out != REFUSED* ]]; then
                if [ "$out" = ANSWERED ]; then
                    fail sdk-socket "uid $other was answered on a socket chmod 0666: SO_PEERCRED is not checked"
                else
                    fail sdk-socket "uid $other could not try the socket: $out"
                fi
                kill "$API_PID" 2>/dev/null
                wait "$API_PID" 2>/dev/null
                API_PID=""
                return
            fi
        fi
        kill "$API_PID" 2>/dev/null
        wait "$API_PID" 2>/dev/null
        API_PID=""
        # a planted symlink: serve must neither follow it nor bind through it
        mkdir -m 0700 "$WORK/sockdir"
        ln -s "$WORK/sock-target" "$WORK/sockdir/api.sock"
        if "$BIN" serve --socket "$WORK/sockdir/api.sock" --idle 1 >/dev/null 2>&1; then
            fail sdk-socket "serve started on a socket path that is a symlink"
        elif [ -e "$WORK/sock-target" ] || [ ! -L "$WORK/sockdir/api.sock" ]; then
            fail sdk-socket "serve followed or replaced a symlink planted at the socket path"
        elif [ -n "$other" ]; then
            pass sdk-socket "socket 0600 in an owner-only directory; uid $other refused after chmod 0666; a planted symlink is not followed"
        else
            pass sdk-socket "socket 0600 in an owner-only directory; a planted symlink is not followed"
        fi
        return
    fi
    kill "$API_PID" 2>/dev/null
    wait "$API_PID" 2>/dev/null
    API_PID=""
}

check_token() {
    if ! have up; then
        skip token "up not available"
        return
    fi
    if [ -n "$NO_UP" ]; then
        skip token "$NO_UP"
        return
    fi
    if [ "$UP" != 1 ] || [ -z "$TOKEN" ]; then
        warn token "cannot check: the sandbox is not up or its state has no token"
        return
    fi
    local where="" scan procs mib tok head
    section token | grep -qF "$TOKEN" && where="$where guest-environment"
    pgrep -f -- "$TOKEN" >/dev/null && where="$where host-ps"
    # the container's process and the `podman run` that made it (gone from ps by now), and
    # what the VM's container (so bluebox-vmm, which writes the guest's launch spec) was given
    container_text "${VMM_CID:-}" | grep -qF "$TOKEN" && where="$where container-argv-or-environment"
    grep -rqF "$TOKEN" "$BLUEBOX_HOME/logs" 2>/dev/null && where="$where logs"
    scan=$(scan_guest_memory) || scan=""
    read -r procs mib tok head <<<"$scan"
    # (under strict the dump belongs to the guest's subordinate uid: the guest removes it)
    in_guest rm -rf /data/.esc-mem >/dev/null
    rm -rf "$BLUEBOX_HOME/data/$A/.esc-mem" 2>/dev/null
    [ "${tok:-0}" -gt 0 ] && where="$where guest-memory($tok)"
    if [ -n "$where" ]; then
        fail token "the agent token shows in:$where"
    elif [ -z "$scan" ]; then
        fail token "cannot scan the guest's memory (the dump into /data did not work)"
    elif [ "${head:-0}" = 0 ]; then
        warn token "the token is nowhere looked, also not in $procs guest processes' memory ($mib MiB), but the scan did not find the agent's chain head either: it may not have read the agent"
    else
        pass token "the agent token is in no guest environment or memory ($procs processes, $mib MiB; the guest holds only the chain head), host ps, podman argv or environment, or log"
    fi
}

check_loopback() {
    local h
    h=$(hits loopback '^CONNECTED')
    if section loopback | grep -qF "$LOOP_SECRET"; then
        fail loopback "the guest fetched the secret from the host's 127.0.0.1:$PORT"
    elif [ -s "$WORK/server.log" ] || [ -n "$h" ]; then
        [ -n "$h" ] || h=$(head -n1 "$WORK/server.log")
        fail loopback "the guest reached the host loopback: $h"
    elif [ -z "$(section loopback | sed -n 's/^GATEWAY //p')" ]; then
        warn loopback "nothing reached the host loopback, but the guest had no network route at all"
    else
        pass loopback "127.0.0.1:$PORT${AGENT_PORT:+ and the agent port $AGENT_PORT} on the host unreachable via 127.0.0.1, localhost, host.{containers,docker}.internal, 169.254.1.2, 10.0.2.2, the gateway"
    fi
}

# check_egress ID ADDR PORT WHAT: a bridge guest's TCP connect to ADDR:PORT must be refused at
# once by the VMM's network policy (not connect, not time out, not arrive at our server). A
# backend whose posture line says bridge does not refuse the host and LAN gets a WARN: the
# gap is stated, not hidden (SECURITY.md).
check_egress() {
    local id=$1 addr=$2 port=$3 what=$4 h out
    if [ -z "$addr" ]; then
        skip "$id" "no $what on this host to aim at"
        return
    fi
    h=$(hits "$id" '^CONNECTED')
    [ -n "$h" ] || h=$(grep -F "$addr: " "$WORK/net.log" 2>/dev/null | head -n1)
    out=$(section "$id" | grep -v '^$' | head -n1)
    if [[ $POSTURE == *"NOT refused"* ]] && { [ -n "$h" ] || [[ $out != *"Connection refused"* ]]; }; then
        warn "$id" "$what $addr:$port is not refused on this backend, as its posture line says: ${h:-$out}"
    elif [ -n "$h" ]; then
        fail "$id" "a bridge guest reached $what $addr:$port: $h"
    elif [[ $out != *"Connection refused"* ]]; then
        fail "$id" "a bridge guest's connection to $what $addr:$port was not refused by the sandbox (it left it): ${out:-no answer}"
    else
        pass "$id" "$what $addr:$port refused at once to a bridge guest"
    fi
}

# ---------------------------------------------------------------- the VMM, from outside
VMM_CID=""
VMM_PID=""
# find_container NAME [OLD_IDS]: "ID PID" of its running container that is not one of
# OLD_IDS (a finished run's container may still be on its way out); waits while it boots
find_container() {
    local _ id pid
    for _ in $(seq 300); do
        # bluebox ps: this home's containers, podman's and direct ones (runc, no podman)
        while read -r id pid; do
            [[ " ${2:-} " == *" $id "* ]] && continue
            if [ -n "$pid" ] && [ "$pid" != - ] && [ -d "/proc/$pid" ]; then
                echo "$id $pid"
                return 0
            fi
        done < <("$BIN" ps "$1" 2>/dev/null | awk 'NR > 1 && $4 == "running" { print $1, $5 }')
        sleep 0.2
    done
    return 1
}
containers_of() { "$BIN" ps -q "$1" 2>/dev/null | paste -sd ' '; }
# DIRECT_RUNS: a direct launch's OCI bundle (config.json) while it runs (src/launch/direct.h)
DIRECT_RUNS=/run/bluebox-direct/runs
# direct_config CID: the config.json of a running direct container, or nothing (podman's)
direct_config() { [ -n "$1" ] && [ -f "$DIRECT_RUNS/$1/config.json" ] && echo "$DIRECT_RUNS/$1/config.json"; }
# container_text CID: the container's process, argv and environment as the host keeps them:
# podman inspect's, or the direct launch's whole config.json
container_text() {
    local cfg
    if cfg=$(direct_config "$1"); then
        cat "$cfg"
    else
        podman inspect --format '{{.Path}} {{join .Args " "}} {{join .Config.CreateCommand " "}} {{join .Config.Env " "}}' \
            "${1:-none}" 2>/dev/null
    fi
}
# container_fact CID devices|security|netmode: podman inspect's answer, or the same read from
# a direct launch's config.json (security: podman's words for the same settings)
container_fact() {
    local cfg
    if ! cfg=$(direct_config "$1"); then
        case $2 in
        devices) podman inspect --format '{{range .HostConfig.Devices}}{{.PathOnHost}}:{{.PathInContainer}} {{end}}' "$1" 2>/dev/null ;;
        security) podman inspect --format '{{.HostConfig.SecurityOpt}}' "$1" 2>/dev/null ;;
        netmode) podman inspect --format '{{.HostConfig.NetworkMode}}' "$1" 2>/dev/null ;;
        esac
        return
    fi
    python3 - "$cfg" "$2" <<'EOF'
import json, sys
c = json.load(open(sys.argv[1]))
lx = c.get("linux", {})
if sys.argv[2] == "devices":
    print(" ".join(f"{d['path']}:{d['path']}" for d in lx.get("devices") or []))
elif sys.argv[2] == "security":
    o = ["no-new-privileges"] if c.get("process", {}).get("noNewPrivileges") else []
    print(" ".join(o + ([] if lx.get("seccomp") else ["seccomp=unconfined"])) + " (direct)")
else:
    ns = [n for n in lx.get("namespaces") or [] if n.get("type") == "network"]
    print(("ns:" + ns[0]["path"] if ns[0].get("path") else "private") if ns else "host")
EOF
}
# descendants PID: PID and every process below it
descendants() {
    local c kids
    echo "$1"
    read -ra kids <<<"$(cat /proc/"$1"/task/*/children 2>/dev/null)"
    for c in "${kids[@]}"; do descendants "$c"; done
}
status_field() { awk -v k="$2:" '$1 == k { print $2; exit }' "/proc/$1/status" 2>/dev/null; }
# cgroup_file PID CONTROLLER FILE: the path of FILE in PID's cgroup for CONTROLLER (v1 or v2)
cgroup_file() {
    local path
    path=$(awk -F: -v c="$2" '$2 == c { print $3; exit }' "/proc/$1/cgroup" 2>/dev/null)
    if [ -n "$path" ] && [ -e "/sys/fs/cgroup/$2$path/$3" ]; then
        echo "/sys/fs/cgroup/$2$path/$3"
        return
    fi
    path=$(awk -F: '$1 == "0" { print $3; exit }' "/proc/$1/cgroup" 2>/dev/null)
    local f=${3/limit_in_bytes/max}
    [ -n "$path" ] && [ -e "/sys/fs/cgroup$path/$f" ] && echo "/sys/fs/cgroup$path/$f"
}

VMM_CHECKS=(vmm-nnp vmm-seccomp vmm-caps vmm-netns vmm-limits vmm-uid)
attach_vmm() {
    local old="" found
    if [ "$UP" != 1 ]; then
        old=$(containers_of "$A")
        # a second, fresh boot: read back what the first planted, then stay up to be looked at
        "$BIN" run "$A" -- sh -c "cat /data/esc-abs /data/esc-rel /data/esc-dir/secret 2>/dev/null; echo ready; sleep 120" \
            </dev/null >"$WORK/second.out" 2>&1 &
        BG_PIDS+=($!)
        # its guest is up: the container found below is the one running it, not a probe of
        # bluebox's isolation check (a re-verification boots one first) on its way out
        local _
        for _ in $(seq 600); do
            grep -q ready "$WORK/second.out" 2>/dev/null && break
            kill -0 "${BG_PIDS[-1]}" 2>/dev/null || break
            sleep 0.2
        done
        grep -q ready "$WORK/second.out" 2>/dev/null ||
            setup_error "the second boot of $A did not come up: $(tail -n 2 "$WORK/second.out" | paste -sd ' ')"
    fi
    found=$(find_container "$A" "$old") || setup_error "no running container for $A"
    read -r VMM_CID VMM_PID <<<"$found"
    VMM_PIDS=$(descendants "$VMM_PID" | sort -un | paste -sd ' ')
    local how=podman
    direct_config "$VMM_CID" >/dev/null && how="direct (runc without podman)"
    echo "# the VMM's container: $VMM_CID, pid $VMM_PID, launched by $how"
}

# every_vmm FIELD WANT: the pids whose /proc status FIELD is not WANT
every_vmm() {
    local p v bad=""
    for p in $VMM_PIDS; do
        v=$(status_field "$p" "$1")
        [ -z "$v" ] || [ "$v" = "$2" ] || bad="$bad $p($(cat "/proc/$p/comm" 2>/dev/null)):$v"
    done
    echo "$bad"
}

check_vmm_status() { # ID FIELD WANT WHAT
    local bad
    bad=$(every_vmm "$2" "$3")
    if [ -z "$(status_field "$VMM_PID" "$2")" ]; then
        fail "$1" "cannot read $2 of the VMM process $VMM_PID"
    elif [ -n "$bad" ]; then
        fail "$1" "$2 is not $3 for:$bad"
    else
        pass "$1" "$4 ($2 $3 for all $(wc -w <<<"$VMM_PIDS") VMM processes)"
    fi
}

# On uml, bluebox-vmm sets no_new_privs and stacks a seccomp filter of its own, so the
# process alone would look right without podman's layer: check that layer as podman has it.
check_podman_layer() { # ID OPTION present|absent
    local opts has=absent
    opts=$(container_fact "$VMM_CID" security)
    [[ $opts == *"$2"* ]] && has=present
    [ "$has" = "$3" ] && return 0
    if [ "$3" = present ]; then
        fail "$1" "podman started the VMM's container without $2 (security opts: $opts)"
    else
        fail "$1" "podman started the VMM's container with $2"
    fi
    return 1
}

check_vmm_netns() {
    local mine theirs
    mine=$(readlink /proc/self/ns/net)
    theirs=$(readlink "/proc/$VMM_PID/ns/net" 2>/dev/null)
    if [ -z "$theirs" ]; then
        local mode
        mode=$(container_fact "$VMM_CID" netmode)
        if [ "$mode" = host ]; then
            fail vmm-netns "the VMM's container shares the host's network namespace"
        else
            pass vmm-netns "the VMM has its own network namespace (podman: $mode)"
        fi
    elif [ "$theirs" = "$mine" ]; then
        fail vmm-netns "the VMM is in the host's network namespace $mine"
    else
        pass vmm-netns "the VMM has its own network namespace ($theirs, host $mine)"
    fi
}

check_vmm_limits() {
    local pmax mf mem want_mem=$(((256 + 256) * 1024 * 1024)) problems=""
    pmax=$(cgroup_file "$VMM_PID" pids pids.max)
    mf=$(cgroup_file "$VMM_PID" memory memory.limit_in_bytes)
    [ -n "$pmax" ] && pmax=$(cat "$pmax")
    [ -n "$mf" ] && mem=$(cat "$mf") || mem=""
    [ "$pmax" = 512 ] || problems="$problems pids.max=${pmax:-none}"
    [ "$mem" = "$want_mem" ] || problems="$problems memory=${mem:-none} (want $want_mem)"
    if [ -z "$problems" ]; then
        pass vmm-limits "pids.max 512 and memory $want_mem in force on the VMM's cgroup"
    elif [ "$LIMITS_CLAIMED" = 0 ]; then
        warn vmm-limits "not in force, as bluebox says (this host cannot enforce them for rootless podman):$problems"
    else
        fail vmm-limits "bluebox claims limits that are not in force:$problems"
    fi
}

check_vmm_uid() {
    local uid
    uid=$(status_field "$VMM_PID" Uid)
    if [ -z "$uid" ]; then
        fail vmm-uid "cannot read the VMM's uid"
    elif [ "$MODE" = strict ] && [ "$uid" = "$ME" ]; then
        fail vmm-uid "isolation: strict, but the VMM runs as your uid $ME"
    elif [ "$MODE" = strict ]; then
        pass vmm-uid "the VMM runs as host uid $uid, not yours ($ME)"
    elif [ "$uid" = "$ME" ]; then
        warn vmm-uid "standard isolation: the VMM runs as your uid $ME (use isolation: strict)"
    else
        pass vmm-uid "the VMM runs as host uid $uid, not yours ($ME)"
    fi
}

check_symlinks_second_boot() {
    [ "$UP" = 1 ] && return 0
    local _
    for _ in $(seq 300); do
        grep -q ready "$WORK/second.out" 2>/dev/null && break
        sleep 0.2
    done
    if grep -qF "$SECRET" "$WORK/second.out"; then
        fail symlinks "on the next boot a symlink planted in /data resolved to the host's file"
    fi
}

if want_any "${VMM_CHECKS[@]}" dev-kvm token symlinks; then
    attach_vmm
    want symlinks && check_symlinks_second_boot
    want vmm-nnp && check_podman_layer vmm-nnp "no-new-privileges" present &&
        check_vmm_status vmm-nnp NoNewPrivs 1 "no_new_privs"
    want vmm-seccomp && check_podman_layer vmm-seccomp "seccomp=unconfined" absent &&
        check_vmm_status vmm-seccomp Seccomp 2 "a seccomp filter"
    want vmm-caps && check_vmm_status vmm-caps CapEff 00000000000004cb "exactly the six capabilities"
    want vmm-netns && check_vmm_netns
    want vmm-limits && check_vmm_limits
    want vmm-uid && check_vmm_uid
fi

want kernel && check_kernel
if [ -n "$NO_BRIDGE" ]; then
    for c in loopback host-gateway lan metadata; do want "$c" && skip "$c" "$NO_BRIDGE"; done
else
    want loopback && check_loopback
    want host-gateway && check_egress host-gateway "$NET_GW" "$NET_GW_PORT" "podman's bridge gateway (the host)"
    want lan && check_egress lan "$NET_LAN" "$NET_LAN_PORT" "the host's LAN address"
    want metadata && check_egress metadata 169.254.169.254 80 "the cloud metadata address"
fi
want host-files && check_host_files
want symlinks && check_symlinks
want dotdot && check_dotdot
want setuid && check_setuid
want ro-root && check_no_hits ro-root '^WROTE' "the read-only root took a write" \
    "readonly: true refuses writes, also after a remount in the guest"
want ro-mount && check_ro_mount
want vmm-fs && check_no_hits vmm-fs '^REACHED' \
    "guest root reaches the VMM's side (the container's /proc or bluebox's directory)" \
    "no hostfs, virtio-fs or bind mount reaches the VMM's /proc"
want agent-binary && check_no_hits agent-binary '^WRITABLE' "the guest can open for writing" \
    "/.bluebox/bluebox and the VMM bundle cannot be opened for writing"
want dev-kvm && check_dev_kvm
want token && check_token

want sdk-socket && check_sdk_socket

# the second boot (or nothing, when up) is done with
for p in "${BG_PIDS[@]}"; do kill "$p" 2>/dev/null; done
for p in "${BG_PIDS[@]}"; do wait "$p" 2>/dev/null; done
BG_PIDS=()

# ---------------------------------------------------------------- forks
# A fork of a fresh sandbox: its /data is an overlay its guest makes over the parent's
# /data, served read-only.
# Guest root mounts every file-server device by hand and tries to write the parent's, plants
# symlinks to the host's $OUTSIDE (in the overlay and straight into the upper layer) and a
# whiteout of its own, then the host applies the fork: $OUTSIDE is untouched, the planted
# links arrive as links, and the fork's layers stay in BLUEBOX_HOME/data/<fork>.
fork_script() {
    cat <<EOF
ln -s $OUTSIDE/target /data/esc-fork-link 2>/dev/null
mkdir -p /data/esc-fork-dir && ln -s $OUTSIDE /data/esc-fork-dir/out 2>/dev/null
for t in bbfs0 bbfs1 bbfs2 bbfs3; do
    mkdir -p /tmp/esc-\$t
    mount -t virtiofs \$t /tmp/esc-\$t 2>/dev/null || continue
    mount -o remount,rw /tmp/esc-\$t 2>/dev/null # the guest's own read-only flag is no wall
    if [ -d /tmp/esc-\$t/upper ]; then
        ln -s $OUTSIDE /tmp/esc-\$t/upper/esc-up-link
        mkdir -p /tmp/esc-\$t/upper/esc-up-dir && ln -s $OUTSIDE/secret /tmp/esc-\$t/upper/esc-up-dir/s
        mknod /tmp/esc-\$t/upper/esc-up-wh c 0 0
    else
        (echo x > /tmp/esc-\$t/esc-fork-wrote) 2>/dev/null && echo "WROTE \$t"
    fi
done
EOF
}
check_fork() {
    local p=$BASE_NAME-fp f=$BASE_NAME-fp-f out data=$BLUEBOX_HOME/data/$BASE_NAME-fp
    define "$p" "base: $IMAGE
backend: $BACKEND
ram_mib: 256
$ISO"
    if ! out=$("$BIN" build "$p" 2>&1) || ! out=$("$BIN" fork "$p" "$f" 2>&1); then
        local gap
        gap=$(not_yet "$out")
        [ -n "$gap" ] && { skip fork "$gap"; return; }
        fail fork "bluebox build/fork $p failed: $(printf '%s' "$out" | tail -n1)"
        return
    fi
    NAMES=("$f" "${NAMES[@]}")
    out=$("$BIN" run "$f" -- sh -c "$(fork_script)" </dev/null 2>&1)
    if [ -n "$(not_yet "$out")" ]; then
        skip fork "$(not_yet "$out")"
        "$BIN" destroy "$f" -y >/dev/null 2>&1
        return
    fi
    if [[ $out == *WROTE* ]] || [ -e "$data/esc-fork-wrote" ] || [ -e "$data/esc-fork-link" ]; then
        fail fork "the fork's guest wrote the parent's /data: $(printf '%s' "$out" | grep WROTE | head -n1)"
        return
    fi
    out=$("$BIN" apply "$f" -y 2>&1)
    if [ "$(outside_state)" != "$OUTSIDE_BEFORE" ]; then
        fail fork "applying the fork changed $OUTSIDE"
    elif [ ! -L "$data/esc-fork-link" ] || [ ! -L "$data/esc-up-link" ] || [ ! -L "$data/esc-up-dir/s" ]; then
        fail fork "the fork's planted links did not arrive as links: $out"
    elif [ -n "$(find "$BLUEBOX_HOME/data/$f" -mindepth 1 -maxdepth 1 ! -name upper ! -name work)" ]; then
        fail fork "the fork's layers hold more than upper/ and work/"
    else
        pass fork "a fork's guest cannot write its parent's /data; apply of planted links stays inside it"
    fi
    "$BIN" destroy "$f" -y >/dev/null 2>&1
}
if want fork; then
    if [ "$BACKEND" != krun ] && have fork; then check_fork; else skip fork "forks need the uml or qemu backend"; fi
fi
# ---------------------------------------------------------------- warm pool
# Pool P keeps two VMs booted (warm: 2). A run served by one of them must not reach the other
# VM's agent (its port on the host's loopback, through any address the guest may try), nor
# see the pool's files or any pool VM's token; the pool directory is owner-only.
check_pool() {
    local p=$BASE_NAME-pl dir out ports="" toks="" script n w
    dir=$BLUEBOX_HOME/pool/$p
    define "$p" "base: $IMAGE
backend: $BACKEND
ram_mib: 256
network: bridge
timeout_seconds: 60
warm: 2
warmup:
  - echo w > /tmp/.esc-warm
$ISO"
    if ! out=$("$BIN" build "$p" 2>&1); then
        fail pool "bluebox build $p failed: $(printf '%s' "$out" | tail -n1)"
        return
    fi
    for _ in $(seq 1 600); do
        "$BIN" pool "$p" >/dev/null 2>&1
        n=0
        for w in "$dir"/*.waiting; do [ -e "$w" ] && n=$((n + 1)); done
        [ "$n" = 2 ] && break
        sleep 0.2
    done
    for f in "$dir"/*.waiting; do
        [ -e "$f" ] || continue
        ports="$ports $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["addr"].rsplit(":",1)[1])' "$f")"
        toks="$toks $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["token"])' "$f")"
    done
    if [ -z "$ports" ]; then
        fail pool "the warm pool of $p never filled"
        return
    fi
    # shellcheck disable=SC2016  # expanded in the guest
    script='test -e /tmp/.esc-warm || { echo COLD; exit 0; }; gw=$(ip route 2>/dev/null | awk '"'"'/^default/ {print $3; exit}'"'"')'
    for port in $ports; do
        script="$script; for a in 127.0.0.1 10.0.2.2 169.254.1.2 \$gw; do echo x | nc -w 3 \$a $port >/dev/null 2>&1 && echo RE\"\"ACHED \$a:$port; done"
    done
    script="$script; find / -xdev \\( -name '*.waiting' -o -name '*.claimed-*' \\) 2>/dev/null | sed 's/^/FO\"\"UND /'; cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n'; true"
    out=$("$BIN" run "$p" -- sh -c "$script" </dev/null 2>&1)
    local leak=""
    for t in $toks; do [[ $out == *"$t"* ]] && leak=1; done
    if [[ $out == *COLD* ]]; then
        fail pool "the run was not served by a pool VM (the warmup's file is missing)"
    elif [[ $out == *REACHED* ]]; then
        fail pool "a pool VM reached another's agent: $(printf '%s' "$out" | grep REACHED | head -n1)"
    elif [[ $out == *FOUND* ]]; then
        fail pool "a pool VM sees the pool's files: $(printf '%s' "$out" | grep FOUND | head -n1)"
    elif [ -n "$leak" ]; then
        fail pool "a pool VM's agent token shows in a pool VM"
    elif [ "$(stat -c %a "$dir")" != 700 ]; then
        fail pool "the pool directory $dir is not owner-only ($(stat -c %a "$dir"))"
    else
        pass pool "a pool VM cannot reach another's agent ($(echo "$ports" | wc -w) ports), see the pool's files or tokens; pool/ is 0700"
    fi
    "$BIN" destroy "$p" -y >/dev/null 2>&1
}
if want pool; then
    if [ -n "$NO_UP" ]; then
        skip pool "the warm pool keeps up sandboxes: $NO_UP"
    elif [ "$BACKEND" != krun ] && have pool; then
        check_pool
    else
        skip pool "the warm pool is tested on the uml and qemu backends"
    fi
fi
# ---------------------------------------------------------------- egress by name
# Sandbox E runs with allowlists and the apt mirror this machine uses (read from apt's sources:
# a name that resolves upstream here). dns-exfil: with a list that lacks it, the mirror's name
# gets NXDOMAIN from bluebox's own resolver and is never looked up upstream (a query that left
# could carry data out). sni-fronting: with the mirror allowed, a connection to
# the allowed name that says another name (an HTTP Host, a TLS SNI) is reset before anything
# reaches the server, while the same request with the right name gets an answer. Each list is
# the Bluefile's allow:; the denial is read from the sandbox's connection log,
# logs/net/<name>.log (strict: the VMM's file, owned by the sandbox's root, read through
# podman unshare).
E=$BASE_NAME-e
apt_mirror_host() {
    cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources 2>/dev/null |
        grep -v '^[[:space:]]*#' | grep -oE 'http://[A-Za-z0-9.-]+' | head -n1 | sed 's|http://||'
}
# client_hello SNI: a TLS ClientHello record naming SNI, as printf octal escapes
client_hello() {
    python3 - "$1" <<'EOF'
import struct, sys
n = sys.argv[1].encode()
ext = struct.pack(">HHHH", 10, 4, 2, 0x1d) + struct.pack(">HHHBH", 0, len(n) + 5, len(n) + 3, 0, len(n)) + n
body = b"\x03\x03" + bytes(32) + b"\x00" + struct.pack(">HH", 2, 0x1301) + b"\x01\x00" + struct.pack(">H", len(ext)) + ext
hs = b"\x01" + struct.pack(">I", len(body))[1:] + body
print("".join("\\%03o" % b for b in b"\x16\x03\x01" + struct.pack(">H", len(hs)) + hs))
EOF
}
# egress_box ENTRY...: sandbox E's Bluefile with allow: ENTRY..., built (the image is cached)
egress_box() {
    local out list="" a
    for a in "$@"; do list+=$'\n'"  - \"$a\""; done
    [ -d "$BLUEBOX_HOME/sandboxes/$E" ] || define "$E" ""
    printf '%s\n' "base: $IMAGE
backend: $BACKEND
ram_mib: 256
network: bridge
$ISO
allow:$list" >"$BLUEBOX_HOME/sandboxes/$E/Bluefile"
    out=$("$BIN" build "$E" 2>&1) && return
    EGRESS_GAP=$(not_yet "$out")
    [ -n "$EGRESS_GAP" ] || setup_error "bluebox build $E failed: $(tail -n1 <<<"$out")"
}
EGRESS_GAP=
# net_log FILE: a connection log as this user can read it (strict: the sandbox's root owns it)
net_log() {
    if [ "$ME" = 0 ]; then cat "$1" 2>/dev/null; else podman unshare cat "$1" 2>/dev/null; fi
}
egress_checks() {
    local host out log
    local gap="" c
    [ "$BACKEND" = krun ] && gap="egress by name is enforced by bluebox-vmm (uml, qemu) only"
    [ -n "$NO_BRIDGE" ] && gap=$NO_BRIDGE
    if [ -z "$gap" ] && [ "$BACKEND" = qemu ]; then
        egress_box allowed.invalid
        gap=$EGRESS_GAP
    fi
    if [ -n "$gap" ]; then
        for c in dns-exfil sni-fronting; do want "$c" && skip "$c" "$gap"; done
        return
    fi
    host=$(apt_mirror_host)
    if [ -z "$host" ] || ! getent hosts "$host" >/dev/null; then
        want dns-exfil && skip dns-exfil "no apt mirror name that resolves here to test with"
        want sni-fronting && skip sni-fronting "no apt mirror name that resolves here to test with"
        return
    fi
    log=$BLUEBOX_HOME/logs/net/$E.log
    local evil
    evil=$(client_hello "fronted.invalid")
    # dns-exfil: the list names another host; the mirror's name, which resolves upstream, is
    # the name the guest must not get answered
    egress_box allowed.invalid
    out=$("$BIN" run "$E" -- sh -c "
echo '== dns-exfil'
nslookup $host 2>&1 | grep -E 'Address:|NXDOMAIN' | tail -n1" </dev/null 2>&1)
    net_log "$log" >"$WORK/egress-dns.log"
    egress_box "$host"
    out+=$'\n'$("$BIN" run "$E" -- sh -c "
echo '== sni-fronting'
# (the write side stays open a while: a server may reset a request half-closed at once)
{ printf 'HEAD / HTTP/1.0\r\nHost: $host\r\n\r\n'; sleep 2; } | timeout 10 nc $host 80 | head -c 12; echo ' (right Host)'
{ printf 'HEAD / HTTP/1.0\r\nHost: fronted.invalid\r\n\r\n'; sleep 2; } | timeout 10 nc $host 80 | head -c 12 | sed 's/^/FRONTED-HOST /'; echo
{ printf '$evil'; sleep 2; } | timeout 10 nc $host 80 | head -c 12 | od -c | head -n1 | sed 's/^/FRONTED-SNI /'; echo
echo '== end'" </dev/null 2>&1)
    net_log "$log" >"$WORK/egress.log"
    printf '%s\n' "$out" >"$WORK/egress.out"
    [ -n "${BLUEBOX_ESCAPE_DEBUG:-}" ] && { cat "$WORK/egress.out"; cat "$WORK/egress.log"; } >&2
    if want dns-exfil; then
        local ans
        ans=$(printf '%s\n' "$out" | awk '$0 == "== dns-exfil" {on=1; next} /^== / {on=0} on' | head -n1)
        if [[ $ans == *"Address:"* ]]; then
            fail dns-exfil "a name not on the allowlist resolved ($host -> ${ans#*Address: }): guest DNS leaves the sandbox"
        elif ! grep -qF "\"kind\":\"dns\",\"name\":\"$host\",\"decision\":\"deny\"" "$WORK/egress-dns.log"; then
            fail dns-exfil "no logged denial for $host in $log: ${ans:-no answer}"
        else
            pass dns-exfil "a name not on the allowlist gets NXDOMAIN from bluebox's resolver, never asked upstream, logged"
        fi
    fi
    if want sni-fronting; then
        local sec
        sec=$(printf '%s\n' "$out" | awk '$0 == "== sni-fronting" {on=1; next} /^== / {on=0} on')
        if grep -q '^FRONTED-HOST .' <<<"$sec"; then
            fail sni-fronting "a request to $host with Host: fronted.invalid got an answer: $(grep '^FRONTED-HOST' <<<"$sec")"
        elif grep -q '^FRONTED-SNI 0000000 ' <<<"$sec"; then
            fail sni-fronting "a TLS ClientHello to $host naming fronted.invalid got an answer: $(grep '^FRONTED-SNI' <<<"$sec")"
        elif [ "$(grep -F '"decision":"deny"' "$WORK/egress.log" | grep -cF '"seen":"fronted.invalid"')" -lt 2 ]; then
            fail sni-fronting "the fronted Host and SNI were refused, but $log does not show both denials"
        elif ! grep -q '^HTTP/.*(right Host)' <<<"$sec"; then
            warn sni-fronting "fronting was refused, but so was the right request to $host (nothing to compare): $(head -n1 <<<"$sec")"
        else
            pass sni-fronting "a Host or TLS SNI naming another name than the allowed one is reset before it reaches $host, logged"
        fi
    fi
}
want_any dns-exfil sni-fronting && egress_checks

# ---------------------------------------------------------------- the root layer
# Sandbox C has a writable root. What a run writes to it must never reach the host disk: on
# uml it lives in guest RAM, and guest root mounting hostfs by hand finds the container
# read-only. Host side, the running container's overlay upper directory must hold none of
# it. And the guest's /etc/hosts and /etc/resolv.conf are bluebox's, not podman's copies
# of the host's entries, resolvers and search domains.
C=$BASE_NAME-c
MARK=esc-root-$(rand | cut -c1-8)
root_layer_script() {
    cat <<EOF
mkdir -p /home /var /root /tmp/esc-h 2>/dev/null
for d in / /tmp /home /var /root /etc; do echo x > "\$d/$MARK" 2>/dev/null; done
dd if=/dev/zero of=/root/$MARK.big bs=1M count=16 2>/dev/null
if mount -t hostfs none /tmp/esc-h -o / 2>/dev/null; then
    for f in /tmp/esc-h/$MARK /tmp/esc-h/etc/$MARK /tmp/esc-h/usr/$MARK /tmp/esc-h/.bluebox/$MARK; do
        (echo x > "\$f") 2>/dev/null && echo "WROTE \$f through hostfs"
    done
    umount /tmp/esc-h
fi
# qemu: the container's root as the file server exports it (tag bbroot), remounted rw
if mount -t virtiofs bbroot /tmp/esc-h 2>/dev/null; then
    mount -o remount,rw /tmp/esc-h 2>/dev/null
    for f in /tmp/esc-h/$MARK /tmp/esc-h/etc/$MARK /tmp/esc-h/usr/$MARK /tmp/esc-h/.bluebox/$MARK; do
        (echo x > "\$f") 2>/dev/null && echo "WROTE \$f through virtio-fs bbroot"
    done
    umount /tmp/esc-h
fi
echo "== hosts"
cat /etc/hosts 2>/dev/null
echo "== resolv"
cat /etc/resolv.conf 2>/dev/null
echo "== hostname"
hostname
echo "== cpuinfo"
umount /proc/cpuinfo 2>/dev/null
cat /proc/cpuinfo 2>/dev/null
echo "== ready"
while [ ! -e /data/.esc-go ]; do sleep 0.2; done
EOF
}
# rsection NAME: the lines the root-layer run printed in that section
rsection() { awk -v s="== $1" '$0 == s { on = 1; next } /^== / { on = 0 } on' "$WORK/root.out"; }

# upper_marks DIR: files named after MARK under the container's overlay upper DIR
upper_marks() {
    if [ "$ME" = 0 ]; then
        find "$1" -name "$MARK*" 2>/dev/null
    else
        podman unshare find "$1" -name "$MARK*" 2>/dev/null
    fi
}

# The VMM of a plain `run` of a network-none sandbox (the root-layer run below): on uml the
# direct launch (runc without podman) unless BLUEBOX_LAUNCH=podman, while the checks above
# read the up VM's, which podman starts. The same confinement, read the same way.
check_run_vmm() { # CID PID
    local cid=$1 pid=$2 how=podman p f want v bad="" opts pmax mem want_mem=$(((256 + 256) * 1024 * 1024))
    direct_config "$cid" >/dev/null && how=direct
    local pids
    pids=$(descendants "$pid" | sort -un | paste -sd ' ')
    [ -n "$(status_field "$pid" NoNewPrivs)" ] || bad=" cannot read /proc/$pid/status"
    for p in $pids; do
        for f in NoNewPrivs:1 Seccomp:2 CapEff:00000000000004cb; do
            want=${f#*:}
            v=$(status_field "$p" "${f%%:*}")
            [ -z "$v" ] || [ "$v" = "$want" ] || bad="$bad $p($(cat "/proc/$p/comm" 2>/dev/null)):${f%%:*}=$v"
        done
    done
    [ "$(readlink "/proc/$pid/ns/net" 2>/dev/null)" = "$(readlink /proc/self/ns/net)" ] &&
        bad="$bad in-the-host's-network-namespace"
    opts=$(container_fact "$cid" security)
    [[ $opts == *no-new-privileges* ]] || bad="$bad container-without-no-new-privileges($opts)"
    [[ $opts == *seccomp=unconfined* ]] && bad="$bad container-seccomp-unconfined"
    if [ "$LIMITS_CLAIMED" = 1 ]; then
        pmax=$(cgroup_file "$pid" pids pids.max)
        mem=$(cgroup_file "$pid" memory memory.limit_in_bytes)
        [ -n "$pmax" ] && pmax=$(cat "$pmax")
        [ -n "$mem" ] && mem=$(cat "$mem")
        [ "$pmax" = 512 ] || bad="$bad pids.max=${pmax:-none}"
        [ "$mem" = "$want_mem" ] || bad="$bad memory=${mem:-none}(want $want_mem)"
    fi
    if [ -n "$bad" ]; then
        fail run-vmm "a run's VMM ($how launch, $cid):$bad"
    else
        pass run-vmm "a run's VMM ($how launch, $(wc -w <<<"$pids") processes): no_new_privs, a seccomp filter, the six capabilities, its own network namespace$([ "$LIMITS_CLAIMED" = 1 ] && echo ", pids 512 and memory $want_mem")"
    fi
}

ROOT_OK=0
ROOT_UPPER=""
ROOT_UPPER_HITS=""
run_root_layer() {
    define "$C" "base: $IMAGE
backend: $BACKEND
ram_mib: 256
network: none
timeout_seconds: 300
$ISO"
    "$BIN" build "$C" >"$WORK/root.out" 2>&1 || return
    "$BIN" run "$C" -- sh -c "$(root_layer_script)" </dev/null >"$WORK/root.out" 2>&1 &
    local pid=$! _ found cid rpid
    BG_PIDS+=("$pid")
    for _ in $(seq 300); do
        grep -qx '== ready' "$WORK/root.out" 2>/dev/null && break
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.2
    done
    if grep -qx '== ready' "$WORK/root.out" && found=$(find_container "$C"); then
        read -r cid rpid <<<"$found"
        want run-vmm && check_run_vmm "$cid" "$rpid"
        if [ -f "$DIRECT_RUNS/$cid/scratch" ]; then # a direct launch's throwaway upper layer
            ROOT_UPPER=$(cat "$DIRECT_RUNS/$cid/scratch")/upper
        else
            ROOT_UPPER=$(podman inspect --format '{{.GraphDriver.Data.UpperDir}}' "$cid" 2>/dev/null)
        fi
        [ -n "$ROOT_UPPER" ] && ROOT_UPPER_HITS=$(upper_marks "$ROOT_UPPER" | head -n 4 | paste -sd ' ')
        ROOT_OK=1
    fi
    # the go-ahead the guest waits for; a strict sandbox's /data is the subordinate range's
    if [ "$ME" = 0 ]; then
        : >"$BLUEBOX_HOME/data/$C/.esc-go"
    else
        podman unshare touch "$BLUEBOX_HOME/data/$C/.esc-go" 2>/dev/null
    fi
    wait "$pid" 2>/dev/null
}

check_root_disk() {
    local h
    if [ "$ROOT_OK" != 1 ]; then
        fail root-disk "the root-layer run did not come up: $(tail -n 2 "$WORK/root.out" | paste -sd ' ')"
        return
    fi
    h=$(grep -E '^WROTE' "$WORK/root.out" | head -n 4 | paste -sd ';' | sed 's/;/; /g')
    if [ -n "$h" ]; then
        fail root-disk "guest root wrote the container's files on the host: $h"
    elif [ -n "$ROOT_UPPER_HITS" ] && [ "$BACKEND" = krun ]; then
        warn root-disk "krun: root writes land in the container's overlay on the host disk (known gap, SECURITY.md): $ROOT_UPPER_HITS"
    elif [ -n "$ROOT_UPPER_HITS" ]; then
        fail root-disk "root writes reached the host disk: $ROOT_UPPER_HITS"
    elif [ -z "$ROOT_UPPER" ]; then
        warn root-disk "nothing written was seen, but the container's overlay upper directory is unknown"
    else
        pass root-disk "writes to / /tmp /home /var /root /etc stay off the host disk; hostfs or virtio-fs of / is read-only"
    fi
}

check_hosts() {
    local guest_host names bad=""
    if [ "$ROOT_OK" != 1 ]; then
        fail hosts "the root-layer run did not come up"
        return
    fi
    guest_host=$(rsection hostname | sed -n 1p)
    names=$(rsection hosts | sed 's/#.*//' | awk '{ for (i = 2; i <= NF; i++) print $i }' | sort -u)
    names=$(printf '%s\n' "$names" | grep -vxE "localhost|ip6-localhost|ip6-loopback|${guest_host:-localhost}" | paste -sd ' ')
    [ -n "$names" ] && bad="/etc/hosts names $names"
    if rsection resolv | grep -qE '^[[:space:]]*(search|domain)[[:space:]]' ||
        rsection resolv | grep -E '^[[:space:]]*nameserver' | grep -qvE 'nameserver[[:space:]]+10\.0\.2\.3[[:space:]]*$'; then
        bad="${bad:+$bad; }/etc/resolv.conf: $(rsection resolv | grep -E 'nameserver|search|domain' | head -n 3 | paste -sd ' ')"
    fi
    if [ -z "$bad" ]; then
        pass hosts "the guest's /etc/hosts and /etc/resolv.conf are bluebox's, with nothing of the host's"
    elif [ "$BACKEND" = krun ]; then
        warn hosts "krun: podman's /etc files (known gap, SECURITY.md): $bad"
    else
        fail hosts "host details in the guest: $bad"
    fi
}

# the host's kernel (release and build) is nowhere in the guest's /proc/cpuinfo, also once
# guest root unmounted bluebox's copy over it (UML prints its host's uname there)
check_host_kernel() {
    local release version hits
    if [ "$ROOT_OK" != 1 ]; then
        fail host-kernel "the root-layer run did not come up"
        return
    fi
    release=$(uname -r)
    version=$(uname -v)
    if ! rsection cpuinfo | grep -q .; then
        fail host-kernel "the guest could not read /proc/cpuinfo"
        return
    fi
    hits=$(rsection cpuinfo | grep -F -e "$release" -e "$version" | head -n 2 | paste -sd ' ')
    if [ -n "$hits" ]; then
        fail host-kernel "the guest's /proc/cpuinfo names the host's kernel: $hits"
    else
        pass host-kernel "the host's kernel release and build are not in the guest's /proc/cpuinfo"
    fi
}

if want_any root-disk hosts host-kernel run-vmm; then
    run_root_layer
    want run-vmm && [ "$ROOT_OK" != 1 ] && fail run-vmm "the root-layer run did not come up"
    want root-disk && check_root_disk
    want hosts && check_hosts
    want host-kernel && check_host_kernel
fi

# ---------------------------------------------------------------- fork bomb
# On uml every guest process is a host process of the VMM's: the bomb runs until the pids
# cgroup has sat at the limit for a second (the limit holds), goes past it (fail), or 90 s
# pass (a fixed length said PASS on a slow host whose bomb had not reached the limit, with or
# without one). On qemu and krun the guest's processes are its kernel's, not the host's: the
# bomb runs 12 s and the VMM's cgroup must stay within the limit and the host usable.
check_fork_bomb() {
    if [ "$LIMITS_CLAIMED" = 0 ] && [ "${BLUEBOX_ESCAPE_FORKBOMB:-0}" != 1 ]; then
        warn fork-bomb "not run: this host cannot enforce the pids limit for rootless podman (BLUEBOX_ESCAPE_FORKBOMB=1 runs it anyway)"
        return
    fi
    define "$B" "base: $IMAGE
backend: $BACKEND
ram_mib: 256
network: none
timeout_seconds: 90
$ISO"
    local out
    out=$("$BIN" build "$B" 2>&1) || {
        printf '%s\n' "$out" | tail -n 5 >&2
        setup_error "bluebox build $B failed"
    }
    "$BIN" run "$B" -- sh -c 'b() { b | b & }; b; sleep 120' </dev/null >/dev/null 2>&1 &
    local run_pid=$!
    BG_PIDS+=("$run_pid")
    local found pid pf peak=0 n at_limit=0 samples=() t0 t1 ms end=$((SECONDS + 12))
    found=$(find_container "$B") || setup_error "no running container for $B"
    pid=${found#* }
    pf=$(cgroup_file "$pid" pids pids.current)
    while kill -0 "$run_pid" 2>/dev/null; do
        if [ -n "$pf" ]; then
            n=$(cat "$pf" 2>/dev/null) || n=0
            [ "${n:-0}" -gt "$peak" ] && peak=$n
            if [ "${n:-0}" -ge 512 ]; then at_limit=$((at_limit + 1)); else at_limit=0; fi
            # past the limit, or held at it for a second: known; the run is stopped
            if [ "$peak" -gt 512 ] || [ "$at_limit" -ge 5 ] ||
                { [ "$BACKEND" != uml ] && [ "$SECONDS" -ge "$end" ]; }; then
                kill -INT "$run_pid" 2>/dev/null
            fi
        fi
        t0=$(date +%s%N)
        ls / >/dev/null
        t1=$(date +%s%N)
        samples+=($(((t1 - t0) / 1000000)))
        sleep 0.2
    done
    wait "$run_pid" 2>/dev/null
    BG_PIDS=()
    ms=$(printf '%s\n' "${samples[@]}" | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] + 0 }')
    local max
    max=$(printf '%s\n' "${samples[@]}" | sort -n | tail -n1)
    if [ -z "$pf" ]; then
        fail fork-bomb "no pids cgroup for the VMM: nothing bounds the bomb"
    elif [ "$peak" -gt 512 ]; then
        fail fork-bomb "the fork bomb reached $peak processes, past the pids limit of 512"
    elif [ "$peak" -lt 512 ] && [ "$BACKEND" = uml ]; then
        warn fork-bomb "the bomb reached only $peak of the 512 pids in 90 s: this host is too slow to show the limit at work (vmm-limits reads it)"
    elif [ "$ms" -ge "$RESPONSIVE_MS" ]; then
        fail fork-bomb "the host stalled during the bomb: median host \`ls /\` ${ms} ms (max ${max} ms, ${#samples[@]} samples)"
    else
        pass fork-bomb "the bomb peaked at $peak of 512 pids$([ "$BACKEND" = uml ] || echo " (the guest kernel's processes are not the host's)"); host \`ls /\` median ${ms} ms, max ${max} ms over ${#samples[@]} samples"
    fi
}
want fork-bomb && check_fork_bomb

# ---------------------------------------------------------------- homes
# A second BLUEBOX_HOME with a sandbox of the same name, as another user of this podman
# store would have: its down and destroy must leave this home's running VM and its image.
check_home_isolation() {
    if [ "$UP" != 1 ]; then
        skip home-isolation "needs an up sandbox (${NO_UP:-bluebox up failed or is not available})"
        return
    fi
    local other=$WORK/home2 vm image out
    vm=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["container"])' "$BLUEBOX_HOME/run/$A.json" 2>/dev/null)
    image=$("$BIN" env "$A" 2>/dev/null | sed -n "s/^BLUEBOX_IMAGE='\(.*\)'\$/\1/p")
    out=$(BLUEBOX_HOME=$other "$BIN" new "$A" 2>&1) || {
        fail home-isolation "bluebox new in a second home failed: $(tail -n1 <<<"$out")"
        return
    }
    BLUEBOX_HOME=$other "$BIN" down "$A" >/dev/null 2>&1
    BLUEBOX_HOME=$other "$BIN" destroy "$A" --data -y >/dev/null 2>&1
    if [ "$(podman inspect --format '{{.State.Running}}' "$vm" 2>/dev/null)" != true ]; then
        fail home-isolation "down/destroy of $A in another BLUEBOX_HOME stopped this home's VM $vm"
    elif ! podman image exists "$image" 2>/dev/null; then
        fail home-isolation "destroy of $A in another BLUEBOX_HOME removed this home's image $image"
    elif ! out=$(in_guest true); then
        fail home-isolation "this home's VM stopped answering after another home's down: $(tail -n1 <<<"$out")"
    else
        pass home-isolation "another BLUEBOX_HOME's down and destroy of a same-named sandbox leave this home's VM and image"
    fi
}
want home-isolation && check_home_isolation
# ---------------------------------------------------------------- data_limit
# A sandbox whose Bluefile sets data_limit: 16M. Guest root fills /data and then goes for the
# host file behind it: through hostfs (the image's path in the container, and a hostfs mount
# of its own), truncate, fallocate and the raw block device. The host file must stay at 16M
# (disk use too), what was written before must survive, and /data must be that disk.
check_data_limit() {
    local dl=$BASE_NAME-dl out img size used keep limit=$((16 << 20))
    if [ "$BACKEND" = krun ]; then
        skip data-limit "data_limit is attached by the uml and qemu backends only"
        return
    fi
    define "$dl" "base: $IMAGE
backend: $BACKEND
ram_mib: 256
data_limit: 16M
$ISO"
    out=$("$BIN" build "$dl" 2>&1) || {
        [ -n "$(not_yet "$out")" ] && { skip data-limit "$(not_yet "$out")"; return; }
        fail data-limit "a sandbox with data_limit: 16M cannot be built: $(tail -n1 <<<"$out")"
        return
    }
    # shellcheck disable=SC2016  # expanded by the guest shell
    out=$("$BIN" run "$dl" -- sh -c '
        echo kept >/data/keep && sync
        echo "df $(df -k /data | tail -n1)"
        dd if=/dev/zero of=/data/fill bs=1M count=48 2>&1 | tail -n1
        umount /.bluebox/data.img 2>/dev/null
        dd if=/dev/zero of=/.bluebox/data.img bs=1M seek=40 count=8 conv=notrunc 2>&1 | tail -n1
        truncate -s 1G /.bluebox/data.img 2>&1
        fallocate -o 32M -l 8M /.bluebox/data.img 2>&1
        mkdir -p /mnt/h && mount -t hostfs none /mnt/h -o /.bluebox 2>&1 &&
            dd if=/dev/zero of=/mnt/h/data.img bs=1M seek=64 count=1 conv=notrunc 2>&1 | tail -n1
        dd if=/dev/zero of=/dev/ubda bs=1M seek=16 count=8 2>&1 | tail -n1
        dd if=/dev/zero of=/dev/vda bs=1M seek=16 count=8 2>&1 | tail -n1
        sync' </dev/null 2>&1)
    if [ -n "$(not_yet "$out")" ]; then
        skip data-limit "$(not_yet "$out")"
        return
    fi
    img=$BLUEBOX_HOME/disks/$dl.img
    size=$(stat -c %s "$img" 2>/dev/null || echo 0)
    used=$(($(stat -c %b "$img" 2>/dev/null || echo 0) * 512))
    keep=$("$BIN" run "$dl" -- cat /data/keep </dev/null 2>/dev/null)
    local total
    total=$(sed -n 's/^df [^ ]* *\([0-9]*\) .*/\1/p' <<<"$out" | head -n1)
    if [ ! -f "$img" ]; then
        fail data-limit "no disk image at $img: data_limit did not put /data on a disk"
    elif [ "$size" -gt "$limit" ] || [ "$used" -gt $((limit + (1 << 20))) ]; then
        fail data-limit "the guest grew the 16M /data image on the host to $size bytes ($used on disk)"
    elif [ -z "$total" ] || [ "$total" -gt $((limit >> 10)) ] || [ "$total" -lt $((limit >> 11)) ]; then
        fail data-limit "/data in the guest is not the 16M disk (df: ${total:-none} KiB)"
    elif [ "$keep" != kept ]; then
        fail data-limit "a file written before the guest filled /data is gone (read back: ${keep:-nothing})"
    else
        pass data-limit "data_limit: 16M holds: the guest cannot grow the host file past 16M by any of dd, hostfs, truncate, fallocate or the raw disk"
    fi
}
want data-limit && check_data_limit
# build_or_die NAME: build a sandbox a check needs; its failure is a setup error, not a result
build_or_die() {
    local out
    out=$("$BIN" build "$1" 2>&1) || {
        printf '%s\n' "$out" | tail -n 5 >&2
        setup_error "bluebox build $1 failed"
    }
}
# ---------------------------------------------------------------- the VMM's log
# Guest root swaps UML's console log (/.bluebox/mem/uml.log, which its view includes) for a
# symlink to /dev/zero and powers off without reporting an exit code. bluebox-vmm, outside
# the jail, then shows the log's last lines: following the guest's symlink, it spun
# forever and `run` never returned. It must read the file it opened before boot.
check_vmm_log() {
    if [ "$BACKEND" != uml ]; then
        skip vmm-log "uml only (bluebox-vmm's console log)"
        return
    fi
    local c=$BASE_NAME-v out rc t0 took
    define "$c" "base: $IMAGE
backend: $BACKEND
ram_mib: 256
network: none
$ISO"
    build_or_die "$c"
    t0=$(date +%s)
    # /.bluebox is read-only in the guest's own view, but UML needs the exec tmpfs writable,
    # so guest root can reach it with a hostfs mount of its own: the swap must happen, or the
    # check proves nothing. The marker in /data says it did.
    out=$(timeout 90 "$BIN" run "$c" -- sh -c \
        'mkdir -p /mnt/m && mount -t hostfs none /mnt/m -o /.bluebox/mem &&
         rm -f /mnt/m/uml.log && ln -s /dev/zero /mnt/m/uml.log &&
         echo swapped >/data/vmm-log-swapped && sync && poweroff -f' \
        </dev/null 2>&1)
    rc=$?
    took=$(($(date +%s) - t0))
    local data swapped
    data=$("$BIN" env "$c" 2>/dev/null | sed -n "s/^BLUEBOX_DATA='\(.*\)'\$/\1/p")
    if [ "$ME" = 0 ]; then
        swapped=$(cat "$data/vmm-log-swapped" 2>/dev/null)
    else # strict: /data belongs to the subordinate range
        swapped=$(podman unshare cat "$data/vmm-log-swapped" 2>/dev/null)
    fi
    if [ "$swapped" != swapped ]; then
        fail vmm-log "the guest could not swap uml.log through a hostfs mount of /.bluebox/mem, so the check did not run (exit $rc): $(tail -n1 <<<"$out")"
    elif [ "$rc" = 124 ]; then
        fail vmm-log "bluebox run did not return within 90 s after the guest swapped uml.log for a symlink to /dev/zero"
    elif [ "$rc" = 0 ] || [ "$took" -gt 60 ]; then
        fail vmm-log "bluebox run took ${took} s and exited $rc after the guest swapped uml.log and powered off: $(tail -n1 <<<"$out")"
    else
        pass vmm-log "a guest that swaps uml.log for a symlink to /dev/zero and powers off: run ends in ${took} s (exit $rc)"
    fi
}
want vmm-log && check_vmm_log
# ---------------------------------------------------------------- the image's USER
# An image whose USER is another uid (4242) must not make podman start the VMM, which writes
# the guest's files on the host, as that host uid: a file the guest user makes in /data
# belongs to the sandbox's identity (the data directory's owner), and the command still runs
# as 4242 in the guest.
USER_IMAGE=""
check_image_user() {
    if [ "$BACKEND" = krun ]; then
        warn image-user "krun: the VMM runs as the image's USER and libkrun's virtio-fs writes as it (SECURITY.md, Modes and owners)"
        return
    fi
    local c=$BASE_NAME-u out data uid owner guest
    USER_IMAGE=localhost/bluebox-escape/$BASE_NAME-user:latest
    mkdir -p "$WORK/user-ctx" && printf 'FROM %s\nUSER 4242:4242\n' "$IMAGE" >"$WORK/user-ctx/Containerfile"
    podman build -q --pull=never -t "$USER_IMAGE" "$WORK/user-ctx" >/dev/null 2>&1 ||
        setup_error "cannot build $USER_IMAGE"
    define "$c" "base: $USER_IMAGE
backend: $BACKEND
ram_mib: 256
network: none
$ISO"
    build_or_die "$c"
    data=$BLUEBOX_HOME/data/$c
    uid=$(stat -c %u "$data")
    # let the guest's uid 4242 write there (under strict the directory is the subordinate uid's)
    chmod 0777 "$data" 2>/dev/null || podman unshare chmod 0777 "$data" 2>/dev/null
    # shellcheck disable=SC2016  # expanded in the guest
    out=$("$BIN" run "$c" -- sh -c 'echo "guest-uid $(id -u)"; touch /data/esc-user' </dev/null 2>&1)
    owner=$(stat -c %u "$data/esc-user" 2>/dev/null)
    guest=$(sed -n 's/^guest-uid //p' <<<"$out")
    if [ -z "$owner" ]; then
        fail image-user "the guest's user could not write /data, nothing was tested: $(tail -n1 <<<"$out")"
    elif [ "$owner" != "$uid" ]; then
        fail image-user "with USER 4242 in the image, a file the guest wrote in /data is owned by host uid $owner, not the sandbox's $uid"
    elif [ "$guest" != 4242 ]; then
        fail image-user "the command ran as uid ${guest:-?} in the guest, not the image's USER 4242"
    else
        pass image-user "with USER 4242 in the image, the command runs as 4242 and its files in /data belong to the sandbox's uid $uid"
    fi
}
want image-user && check_image_user

# ---------------------------------------------------------------- secrets
# A Bluefile secret (from the invoking environment, for one allowed host) must never be in
# the guest: its environment holds a placeholder, and its real value is in no process's
# environment, command line or memory, no file the guest can read (the image, /.bluebox, the
# RAM layer), the container's environment or argv as podman inspect shows them, host ps, or
# the logs. Guest root dumps all of that into /data and the host searches it, so the guest
# never learns what is looked for. Needs the Bluefile's `secrets:` keys (skipped by a bluebox
# that refuses them) and the uml VMM's broker.
secret_dump_script() {
    mem_scan_script | sed 's|/data/.esc-mem|/data/.esc-sec/mem|g; /^echo "SCANNED/d'
    cat <<'EOF'
d=/data/.esc-sec
env >$d/env
for p in /proc/[0-9]*; do
    tr '\0' '\n' <$p/environ >>$d/environ 2>/dev/null
    tr '\0' ' ' <$p/cmdline >>$d/cmdline 2>/dev/null
done
find / \( -path /proc -o -path /sys -o -path /dev -o -path /data -o -path /.bluebox/vmm \) -prune \
    -o -type f -size -16384k -print 2>/dev/null | while read -r f; do cat "$f"; done >$d/files 2>/dev/null
echo DUMPED >$d/done
sleep 5
EOF
}

# in_data NAME CMD...: CMD on the sandbox's data directory, as its owner (strict: podman unshare)
in_data() {
    if [ "$ME" = 0 ]; then "$@"; else podman unshare "$@"; fi
}

# build_secret_box CHECK NAME VALUE HOST MORE: define and build NAME, a bridge sandbox that
# allows HOST (MORE follows it: a :PORT, further entries) and has ESC_TOKEN=VALUE as a secret
# for HOST; when it cannot be built, say so as CHECK's SKIP (the backend does not have it
# yet) or FAIL and return 1
build_secret_box() {
    local out
    define "$2" "base: $IMAGE
backend: $BACKEND
ram_mib: 256
network: bridge
$ISO
allow:
  - $4$5
secrets:
  - name: ESC_TOKEN
    from_env: BLUEBOX_ESCAPE_SECRET
    hosts: [$4]"
    out=$(BLUEBOX_ESCAPE_SECRET=$3 "$BIN" build "$2" 2>&1) && return 0
    if [ -n "$(not_yet "$out")" ]; then
        skip "$1" "$(not_yet "$out")"
    else
        fail "$1" "bluebox build failed: $(tail -n1 <<<"$out")"
    fi
    return 1
}

check_secret_in_guest() {
    if [ "$BACKEND" = krun ]; then
        skip secret-in-guest "uml and qemu only (bluebox-vmm's broker substitutes secrets)"
        return
    fi
    if [ -n "$NO_BRIDGE" ]; then
        skip secret-in-guest "$NO_BRIDGE"
        return
    fi
    local c=$BASE_NAME-s value out data cid="" where="" pid
    value=escape-secret-value-$(rand)
    build_secret_box secret-in-guest "$c" "$value" api.escape.test "" || return
    data=$BLUEBOX_HOME/data/$c
    in_data mkdir -p "$data/.esc-sec/mem" && in_data chmod -R 0777 "$data/.esc-sec"
    BLUEBOX_ESCAPE_SECRET=$value "$BIN" run "$c" -- sh -c "$(secret_dump_script)" \
        </dev/null >"$WORK/secret.out" 2>&1 &
    pid=$!
    # While the guest sleeps after its dump: the container as podman shows it, and host ps.
    for _ in $(seq 1 120); do
        in_data test -e "$data/.esc-sec/done" && break
        kill -0 "$pid" 2>/dev/null || break
        sleep 1
    done
    cid=$(containers_of "$c" | cut -d' ' -f1)
    container_text "${cid:-}" | grep -qF "$value" && where="$where podman-inspect"
    pgrep -f -- "$value" >/dev/null && where="$where host-ps"
    wait "$pid"
    grep -rqF "$value" "$BLUEBOX_HOME/logs" 2>/dev/null && where="$where logs"
    grep -qF "$value" "$WORK/secret.out" && where="$where guest-output"
    local scan ph mib hits
    scan=$(in_data python3 - "$data/.esc-sec" "$value" <<'EOF'
import os, sys
d, value = sys.argv[1], sys.argv[2].encode()
hits, n = [], 0
for root, _, files in os.walk(d):
    for f in files:
        try:
            data = open(os.path.join(root, f), "rb").read()
        except OSError:
            continue
        n += len(data)
        if value in data:
            hits.append(os.path.relpath(os.path.join(root, f), d))
try:
    ph = b"ESC_TOKEN=BLUEBOX_SECRET_" in open(os.path.join(d, "env"), "rb").read()
except OSError:
    ph = False
print("placeholder" if ph else "no-placeholder", n >> 20, ",".join(sorted(hits)[:8]) or "-")
EOF
    )
    in_data rm -rf "$data/.esc-sec" 2>/dev/null
    read -r ph mib hits <<<"$scan"
    [ "${hits:--}" = - ] || where="$where guest($hits)"
    if [ -n "$where" ]; then
        fail secret-in-guest "the secret's real value shows in:$where"
    elif [ "$ph" != placeholder ]; then
        fail secret-in-guest "the guest's environment has no placeholder for ESC_TOKEN, so nothing was tested: $(tail -n1 "$WORK/secret.out")"
    else
        pass secret-in-guest "the guest holds only a placeholder: the real value is in no guest environment, command line, memory or readable file (${mib} MiB dumped), podman inspect, host ps or log"
    fi
}
want secret-in-guest && check_secret_in_guest

# A secret's value leaves only inside TLS whose chain and name bluebox-vmm verified.
# A server of the suite on the host, plain HTTP, is what answers at the secret's own host
# (host.containers.internal, its port and the host's addresses allowed): the guest sends
# requests there in cleartext with the placeholder as its Authorization credential. The
# server must see the placeholder (the request arrived: something was tested) and never the
# value, and the connection log must say "refused":"cleartext".
check_secret_cleartext() {
    if [ "$BACKEND" = krun ]; then
        skip secret-cleartext "uml and qemu only (bluebox-vmm's broker substitutes secrets)"
        return
    fi
    if [ -n "$NO_BRIDGE" ]; then
        skip secret-cleartext "$NO_BRIDGE"
        return
    fi
    local c=$BASE_NAME-ct value out port gw lan cidrs="" heads=$WORK/cleartext.heads log
    value=escape-cleartext-value-$(rand)
    python3 - "$WORK/cleartext.port" "$heads" <<'EOF' &
import os, socket, sys, threading
port_file, heads = sys.argv[1:3]
def one(c):
    buf = b""
    while b"\r\n\r\n" not in buf:
        more = c.recv(65536)
        if not more:
            break
        buf += more
    with open(heads, "ab") as f:
        f.write(buf.split(b"\r\n\r\n")[0] + b"\n--\n")
    c.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: 3\r\n\r\nok\n")
    c.close()
s = socket.create_server(("0.0.0.0", 0))
with open(port_file + ".tmp", "w") as f:
    f.write(str(s.getsockname()[1]))
os.rename(port_file + ".tmp", port_file)
while True:
    c, _ = s.accept()
    threading.Thread(target=one, args=(c,), daemon=True).start()
EOF
    BG_PIDS+=("$!")
    port=$(port_of "$WORK/cleartext.port") || setup_error "the cleartext probe server did not start"
    : >>"$heads"
    gw=$(podman network inspect podman --format '{{range .Subnets}}{{.Gateway}}{{end}}' 2>/dev/null)
    lan=$(ip -o -4 addr show scope global 2>/dev/null |
        awk '$2 !~ /^(podman|cni-|veth)/ { sub(/\/.*/, "", $4); print $4; exit }')
    [ -n "$gw" ] && cidrs+=$'\n'"  - $gw/32"
    [ -n "$lan" ] && [ "$lan" != "$gw" ] && cidrs+=$'\n'"  - $lan/32"
    build_secret_box secret-cleartext "$c" "$value" host.containers.internal ":$port$cidrs" ||
        return
    # (nc, as the egress checks use: busybox wget segfaulted in this guest; the write side
    # stays open a while, as there)
    # shellcheck disable=SC2016  # $ESC_TOKEN is expanded in the guest
    out=$(BLUEBOX_ESCAPE_SECRET=$value "$BIN" run "$c" -- sh -c '
for p in /plain /again; do
    { printf "GET $p HTTP/1.1\r\nHost: host.containers.internal:'"$port"'\r\nAuthorization: Bearer %s\r\nConnection: close\r\n\r\n" "$ESC_TOKEN"
      sleep 2; } | timeout 20 nc host.containers.internal '"$port"' | head -n1
done' </dev/null 2>&1)
    log=$(net_log "$BLUEBOX_HOME/logs/net/$c.log")
    [ -n "${BLUEBOX_ESCAPE_DEBUG:-}" ] && { printf '%s\n' "$out"; cat "$heads"; printf '%s\n' "$log"; } >&2
    if grep -qF "$value" "$heads"; then
        fail secret-cleartext "a plain-HTTP server at the secret's host received its real value (no TLS, no certificate checked)"
    elif ! grep -q '^Authorization: Bearer BLUEBOX_SECRET_[0-9a-f]\{32\}' "$heads"; then
        fail secret-cleartext "the guest's plain request with the placeholder never reached the server, so nothing was tested: $(tail -n1 <<<"$out")"
    elif grep -qF "$value" <<<"$out$log"; then
        fail secret-cleartext "the secret's real value shows in the guest's output or the connection log"
    elif ! grep -qF '"refused":"cleartext"' <<<"$log"; then
        fail secret-cleartext "the placeholder went unsubstituted, but the connection log does not say refused: cleartext"
    else
        pass secret-cleartext "plain HTTP to the secret's own host gets only the placeholder, never the value; logged as refused: cleartext"
    fi
}
want secret-cleartext && check_secret_cleartext

# ---------------------------------------------------------------- /data and logs around a run
# One sandbox, built on first use, for the checks below: /data a plain directory (no
# data_limit), no network. data-inuse runs last, since an old bluebox's destroy goes through.
D=$BASE_NAME-d
D_BUILT=0
data_box() {
    [ "$D_BUILT" = 1 ] && return
    define "$D" "base: $IMAGE
backend: $BACKEND
ram_mib: 256
network: none
timeout_seconds: 240
$ISO"
    local out
    out=$("$BIN" build "$D" 2>&1) || {
        printf '%s\n' "$out" | tail -n 5 >&2
        setup_error "bluebox build $D failed"
    }
    D_BUILT=1
}

# A run whose output is 50 MiB: the sandbox's run log (and its rotations) stays small and
# still holds the command line and the exit line. (qemu: 4 MiB, four times the bound below:
# its console is a serial line, which carries 50 MiB under TCG only in minutes.)
check_run_log() {
    data_box
    local out log=$BLUEBOX_HOME/logs/$D.log total=0 f s mib=50
    [ "$BACKEND" = qemu ] && mib=4
    out=$("$BIN" run "$D" -- sh -c "head -c $((mib << 20)) /dev/zero" </dev/null 2>&1 >/dev/null) || {
        fail run-log "bluebox run of $mib MiB of output failed: $(tail -n1 <<<"$out")"
        return
    }
    for f in "$log" "$log".*; do
        [ -f "$f" ] || continue
        s=$(stat -c %s "$f") && total=$((total + s))
    done
    if [ ! -f "$log" ]; then
        fail run-log "no run log at $log"
    elif [ "$total" -gt $((1 << 20)) ]; then
        fail run-log "a run that printed $mib MiB left $total bytes of run log in $BLUEBOX_HOME/logs"
    elif ! grep -aqF "head -c $((mib << 20)) /dev/zero" "$log"; then
        fail run-log "the run log lost the command line"
    elif ! grep -aEq '^=== exit 0( |$)' "$log"; then
        fail run-log "the run log lost the exit line"
    else
        pass run-log "a run that printed $mib MiB left $total bytes of run log, command line and exit line kept"
    fi
}

# The guest makes a 4 GiB sparse file in /data with a few KiB at 1 GiB: snapshot and
# restore keep the hole (a small archive, a small file on the host) and the data.
check_sparse() {
    data_box
    local tok out snap arc file alloc size back bad=""
    tok=sparse-$(rand)
    # shellcheck disable=SC2016  # expanded by the guest shell
    out=$("$BIN" run "$D" -- sh -c '
        rm -f /data/sparse /data/chunk
        i=0; while [ $i -lt 64 ]; do echo "$0"; i=$((i + 1)); done >/data/chunk
        truncate -s 4G /data/sparse &&
            dd if=/data/chunk of=/data/sparse bs=4096 seek=262144 conv=notrunc 2>/dev/null &&
            rm /data/chunk && sync && echo made' "$tok" </dev/null 2>&1)
    if ! grep -qx made <<<"$out"; then
        fail sparse "the guest could not make the sparse file, nothing was tested: $(tail -n1 <<<"$out")"
        return
    fi
    out=$("$BIN" snapshot "$D" sp -y 2>&1) || {
        fail sparse "bluebox snapshot of a 4 GiB sparse file failed: $(tail -n1 <<<"$out")"
        return
    }
    snap=$(find "$BLUEBOX_HOME/snapshots/$D" -maxdepth 1 -type f -name 'sp.tar*' 2>/dev/null | head -n1)
    if [ -z "$snap" ]; then
        fail sparse "no snapshot archive sp.tar* in $BLUEBOX_HOME/snapshots/$D"
        return
    fi
    arc=$(stat -c %s "$snap")
    # the restore is checked even when the archive is already too big
    out=$("$BIN" restore "$D" sp -y 2>&1) || {
        fail sparse "bluebox restore of a 4 GiB sparse file failed: $(tail -n1 <<<"$out")"
        return
    }
    file=$BLUEBOX_HOME/data/$D/sparse
    size=$(stat -c %s "$file" 2>/dev/null || echo 0)
    alloc=$(($(stat -c %b "$file" 2>/dev/null || echo 0) * 512))
    back=$(dd if="$file" bs=4096 skip=262144 count=1 2>/dev/null | tr -d '\0' | sort -u)
    [ "$arc" -gt $((1 << 20)) ] && bad="$bad; its snapshot is $arc bytes"
    [ "$size" != $((4 << 30)) ] && bad="$bad; the restored file is $size bytes, not 4 GiB"
    [ "$alloc" -gt $((1 << 20)) ] && bad="$bad; the restored file takes $alloc bytes of host disk"
    [ "$back" != "$tok" ] && bad="$bad; the data at 1 GiB in the restored file is not what the guest wrote"
    if [ -n "$bad" ]; then
        fail sparse "a 4 GiB sparse file with 4 KiB of data at 1 GiB:${bad#;}"
    else
        pass sparse "a 4 GiB sparse file: snapshot $arc bytes, restored with $alloc bytes on disk, data intact"
    fi
}

# Bluefile values (env:, run:) with terminal escapes: `env` and `build --dry-run` on a
# terminal show them escaped, and piped `env` still gives the exact bytes (eval-safe).
check_tty_escape() {
    local t=$BASE_NAME-t out rc cmd got bad=""
    local evil=$'\e]0;PWNED\a\e[2J'
    define "$t" "base: $IMAGE
backend: $BACKEND
env:
  EVIL: \"\\e]0;PWNED\\a\\e[2J\"
run:
  - \"echo \\e]0;PWNED\\a \\e[2J\"
$ISO"
    for cmd in env "build --dry-run"; do
        # shellcheck disable=SC2086  # cmd is two words for build
        out=$(script -qec "$(printf '%q ' "$BIN" $cmd "$t")" /dev/null </dev/null 2>&1)
        rc=$?
        if [ "$rc" != 0 ]; then
            bad="$bad; \`$cmd\` on a terminal exited $rc: $(tr -d '\r' <<<"$out" | tail -n1 | cat -v)"
        elif LC_ALL=C grep -aq $'\e\|\xc2\x9b' <<<"$out"; then
            bad="$bad; \`$cmd\` wrote raw escape bytes to the terminal"
        fi
    done
    # shellcheck disable=SC2016
    got=$(sh -c 'eval "$("$0" env "$1")" && printf %s "$BLUEBOX_ENV_EVIL"' "$BIN" "$t" </dev/null 2>/dev/null)
    [ "$got" = "$evil" ] || bad="$bad; piped \`env\` does not eval to the exact bytes ($(printf %s "$got" | cat -v))"
    if [ -n "$bad" ]; then
        fail tty-escape "${bad#; }"
    else
        pass tty-escape "env and build --dry-run show ESC sequences escaped on a terminal; piped env evals to the exact bytes"
    fi
}

# reset, restore and destroy --data while a `bluebox run` uses /data: each must refuse,
# naming the run, and what the run wrote must stay.
check_data_inuse() {
    data_box
    local out rc run_pid cmd what _ went="" named="" mark=$BLUEBOX_HOME/data/$D/inuse-mark tok
    tok=inuse-$(rand)
    out=$("$BIN" snapshot "$D" iu -y 2>&1) || {
        fail data-inuse "bluebox snapshot failed, nothing was tested: $(tail -n1 <<<"$out")"
        return
    }
    # shellcheck disable=SC2016  # expanded by the guest shell
    "$BIN" run "$D" -- sh -c 'echo "$0" >/data/inuse-mark && sync && sleep 30' "$tok" \
        </dev/null >"$WORK/inuse.out" 2>&1 &
    run_pid=$!
    BG_PIDS+=("$run_pid")
    find_container "$D" >/dev/null || setup_error "no running container for $D"
    for _ in $(seq 300); do
        [ "$(cat "$mark" 2>/dev/null)" = "$tok" ] && break
        kill -0 "$run_pid" 2>/dev/null || break
        sleep 0.2
    done
    if [ "$(cat "$mark" 2>/dev/null)" != "$tok" ]; then
        kill "$run_pid" 2>/dev/null
        wait "$run_pid" 2>/dev/null
        fail data-inuse "the run never wrote its marker to /data, nothing was tested: $(tail -n1 "$WORK/inuse.out")"
        return
    fi
    for cmd in "reset $D -y" "restore $D iu -y" "destroy $D --data -y"; do
        # shellcheck disable=SC2086  # the words of cmd
        out=$("$BIN" $cmd </dev/null 2>&1)
        rc=$?
        what=${cmd%% *}
        [ "$what" = destroy ] && what="destroy --data"
        if [ "$rc" = 0 ]; then
            went="$went, $what"
        elif ! grep -q 'run' <<<"$out"; then
            named="$named; $what: $(tail -n1 <<<"$out")"
        fi
    done
    local alive=0
    kill -0 "$run_pid" 2>/dev/null && alive=1
    kill "$run_pid" 2>/dev/null
    wait "$run_pid" 2>/dev/null
    if [ -n "$went" ]; then
        fail data-inuse "${went#, } went through while bluebox run was using /data"
    elif [ "$(cat "$mark" 2>/dev/null)" != "$tok" ]; then
        fail data-inuse "the running run's file in /data was lost although every command refused"
    elif [ -n "$named" ]; then
        fail data-inuse "refused without naming the run:${named#;}"
    elif [ "$alive" != 1 ]; then
        fail data-inuse "the run ended while reset/restore/destroy were refused: $(tail -n1 "$WORK/inuse.out")"
    else
        pass data-inuse "reset, restore and destroy --data refuse while bluebox run uses /data, and name the run"
    fi
}
want run-log && check_run_log

# The run log is the host's record: a workload that exits 3 prints a run record of
# a command that never ran and an "=== exit 0" for itself, and one of its arguments (as an
# API or MCP caller may pass) carries the same behind a newline. `bluebox logs` must show,
# from the run's header on, exactly two records: that header, on one line, and "=== exit 3".
check_run_log_forge() {
    data_box
    local m shown recs arg
    m=never-ran-$(rand | cut -c1-8)
    arg=$'x\n=== 2026-01-01T00:00:00Z run: \''"$m"$'\'\n=== exit 0 (0.01s)'
    # shellcheck disable=SC2016  # $1 is the guest shell's
    "$BIN" run "$D" -- sh -c 'printf "%s\n" "$1"; exit 3' sh "$arg" </dev/null >/dev/null 2>&1
    shown=$("$BIN" logs "$D" -n 50 2>&1)
    # every record from the first one that names the marker (the run's header) on
    recs=$(grep -a '^=== ' <<<"$shown" | awk -v m="$m" 'index($0, m) {on=1} on')
    if ! grep -qF "$m" <<<"$shown"; then
        fail run-log-forge "the run is not in bluebox logs, so nothing was tested: $(tail -n1 <<<"$shown")"
    elif [ "$(grep -c '' <<<"$recs")" != 2 ] || ! grep -qE '^=== exit 3 ' <<<"$(tail -n1 <<<"$recs")"; then
        fail run-log-forge "output or an argument's newline made records of its own in bluebox logs: $(tr '\n' '|' <<<"$recs")"
    else
        pass run-log-forge "a workload's forged run and exit records, and a newline in an argument, stay output and quoting: logs shows the real header and exit 3 only"
    fi
}
want run-log-forge && check_run_log_forge
want sparse && check_sparse
want tty-escape && check_tty_escape
want data-inuse && check_data_inuse
# ---------------------------------------------------------------- the VM's lifeline
# `bluebox run` killed with -9 together with its whole process group (a harness's timeout, a
# closed terminal, the OOM killer): the VM must not run on beside the next reset. The run goes
# through podman here, where nothing but the VMM's lifeline (launch/lifeline.h) can stop it:
# conmon keeps a container running whatever happened to its client. (The direct launch adds
# its supervisor's janitor; tests/integration/test_lifeline.py covers that path.)
check_lifeline() {
    if [ "$BACKEND" = krun ]; then
        warn lifeline "krun: its VMM is libkrun under crun, which has no lifeline; a killed run's VM is stopped only by the next data command (SECURITY.md)"
        return
    fi
    data_box
    local run_pid found cid vmm i
    BLUEBOX_LAUNCH=podman setsid "$BIN" run "$D" -- sh -c 'echo ready; sleep 300' \
        </dev/null >"$WORK/lifeline.out" 2>&1 &
    run_pid=$! # setsid in a job without job control: the session's leader, this pid
    BG_PIDS+=("$run_pid")
    for i in $(seq 600); do
        grep -q ready "$WORK/lifeline.out" 2>/dev/null && break
        kill -0 "$run_pid" 2>/dev/null || break
        sleep 0.2
    done
    found=$(find_container "$D") || {
        fail lifeline "the run never came up, nothing was tested: $(tail -n1 "$WORK/lifeline.out")"
        return
    }
    read -r cid vmm <<<"$found"
    kill -9 -- "-$run_pid" 2>/dev/null
    wait "$run_pid" 2>/dev/null
    for i in $(seq 30); do
        [ -d "/proc/$vmm" ] || break
        sleep 0.1
    done
    if [ -d "/proc/$vmm" ]; then
        fail lifeline "the VM ($cid, VMM pid $vmm) still runs 3 s after its bluebox run was killed with -9 with its process group"
        podman rm -f -t 0 "$cid" >/dev/null 2>&1
    else
        pass lifeline "a VM stops when the bluebox run that owns it is killed with -9 with its process group (podman launch, VM gone in ~$((i / 10)).$((i % 10)) s)"
    fi
}
want lifeline && check_lifeline

# ---------------------------------------------------------------- host-side /data tools
# What the guest planted in /data (symlinks to $OUTSIDE, to its secret, a write target)
# must not make bluebox's own commands read or write outside /data.
DATA=$BLUEBOX_HOME/data/$A
outside_intact() { [ "$(outside_state)" = "$OUTSIDE_BEFORE" ]; }

check_snapshot() {
    plant_outside
    if ! have snapshot; then
        skip data-snapshot "snapshot not available"
        return 1
    fi
    local out arc
    out=$("$BIN" snapshot "$A" esc -y 2>&1) || {
        fail data-snapshot "bluebox snapshot failed on a /data with planted symlinks: $(tail -n1 <<<"$out")"
        return 1
    }
    arc=$BLUEBOX_HOME/snapshots/$A/esc.tar.gz
    if [ ! -f "$arc" ]; then
        fail data-snapshot "no archive at $arc"
    elif tar -xzOf "$arc" 2>/dev/null | grep -qF "$SECRET"; then
        fail data-snapshot "the snapshot followed a planted symlink: it holds the host file's content"
    elif tar -tzf "$arc" | grep -Eq '^/|(^|/)\.\.(/|$)'; then
        fail data-snapshot "the snapshot has entries outside /data"
    elif ! tar -tvzf "$arc" | grep -Eq '^l.* (\./)?esc-abs -> '; then
        fail data-snapshot "the planted symlink esc-abs is not in the snapshot as a symlink"
    elif ! outside_intact; then
        fail data-snapshot "$OUTSIDE changed during the snapshot"
    else
        pass data-snapshot "snapshot keeps planted symlinks as symlinks and reads nothing outside /data"
    fi
}

check_export() {
    plant_outside
    if ! have data export; then
        skip data-export "data export not available"
        return
    fi
    local out dst=$WORK/export
    out=$("$BIN" data export "$A" "$dst" 2>&1)
    if [ ! -d "$dst" ]; then
        fail data-export "data export made no directory: $(tail -n1 <<<"$out")"
    elif grep -rqF "$SECRET" "$dst" 2>/dev/null; then
        fail data-export "the export followed a planted symlink: it holds the host file's content"
    elif ! outside_intact; then
        fail data-export "$OUTSIDE changed during the export"
    elif [ ! -f "$dst/esc-d/f" ]; then
        fail data-export "the export lost an ordinary file (esc-d/f): $(tail -n1 <<<"$out")"
    else
        pass data-export "data export copies /data without following planted symlinks"
    fi
}

# restore: the snapshot has esc-d/ as a directory; the guest swaps it for a symlink to
# $OUTSIDE, and restore must not write esc-d/f through it.
check_restore() {
    local have_snap=$1
    plant_outside
    if ! have restore; then
        skip data-restore "restore not available"
        return
    fi
    if [ "$have_snap" != 1 ]; then
        skip data-restore "no snapshot to restore"
        return
    fi
    in_guest sh -c "rm -rf /data/esc-d && ln -s $OUTSIDE /data/esc-d" >/dev/null
    if [ "$UP" = 1 ]; then
        "$BIN" down "$A" >/dev/null 2>&1
        UP=0
    fi
    local out
    out=$("$BIN" restore "$A" esc -y 2>&1)
    if ! outside_intact; then
        fail data-restore "restore wrote through a planted symlink into $OUTSIDE"
    elif [ -L "$DATA/esc-d" ] || [ "$(cat "$DATA/esc-d/f" 2>/dev/null)" != inside ]; then
        fail data-restore "restore did not put esc-d/ back as a directory: $(tail -n1 <<<"$out")"
    else
        pass data-restore "restore replaces a planted symlink instead of writing through it"
    fi
}

check_reset() {
    plant_outside
    if ! have reset; then
        skip data-reset "reset not available"
        return
    fi
    if [ "$UP" = 1 ]; then
        "$BIN" down "$A" >/dev/null 2>&1
        UP=0
    fi
    local out
    out=$("$BIN" reset "$A" -y 2>&1)
    if ! outside_intact; then
        fail data-reset "reset deleted or changed files through a planted symlink in $OUTSIDE"
    elif [ -n "$(ls -A "$DATA" 2>/dev/null)" ]; then
        fail data-reset "reset left /data non-empty: $(tail -n1 <<<"$out")"
    else
        pass data-reset "reset empties /data and nothing it points at"
    fi
}

check_destroy() {
    local out
    plant_outside
    # (again: reset may have emptied /data)
    in_guest sh -c "ln -sfn $OUTSIDE /data/esc-dir; ln -sfn $S /data/esc-abs" >/dev/null
    out=$("$BIN" destroy "$A" --data -y 2>&1)
    if ! outside_intact; then
        fail data-destroy "destroy --data deleted or changed files through a planted symlink in $OUTSIDE"
    elif [ -e "$DATA" ]; then
        fail data-destroy "destroy --data left $DATA: $(tail -n1 <<<"$out")"
    else
        pass data-destroy "destroy --data removes /data and nothing its symlinks point at"
    fi
}

snap=0
want_any data-snapshot data-restore && check_snapshot && snap=1
want data-export && check_export
want data-restore && check_restore "$snap"
want data-reset && check_reset
want data-destroy && check_destroy

# ---------------------------------------------------------------- summary
[ "${#took[@]}" -gt 0 ] && echo "slowest: $(printf '%s\n' "${took[@]}" | sort -rn | head -n 8 |
    awk '{ printf "%s%s %ds", (NR > 1 ? ", " : ""), $2, $1 }')"
echo "$npass passed, $nfail failed, $nwarn warning(s), $nskip skipped"
if [ "$nfail" -eq 0 ]; then
    echo "no escapes."
    exit 0
fi
echo "$nfail check(s) failed."
exit 1
