#!/bin/bash
# Prepare this machine for bluebox's real-podman integration tests. Run as root; idempotent.
#
#   tests/integration/setup.sh [--debian] [--upstream-tags] [--verbose]
#
#   --debian         also build localhost/bluebox-test/debian:bookworm (debootstrap minbase,
#                    ~30-40 s the first time; the .debs are cached in /var/cache/bluebox-test)
#   --upstream-tags  also tag the local images as docker.io/library/busybox:latest and
#                    docker.io/library/debian:bookworm{,-slim}, so Bluefiles naming those
#                    bases build offline with --pull=never (they are NOT the upstream images)
#   --verbose        show every step
#
# What it sets up (see tests/integration/README.md for why):
#   * /etc/bluebox-test/containers.conf: runtime runc, cgroupfs, file events, default_ulimits
#     within this host's hard limits. Tests export CONTAINERS_CONF to it (root and rootless).
#   * localhost/bluebox-test/busybox:latest, imported from busybox-static, for root and for
#     the rootless test user.
#   * the rootless test user (bbtest): subuid/subgid ranges of 65536, overlay storage,
#     XDG_RUNTIME_DIR /run/user/<uid>, the same containers.conf in its ~/.config.
#   * /dev/net/tun mode 0666 (rootless bridge networking through slirp4netns).
#
# stdout: only `export NAME=value` lines (so `eval "$(tests/integration/setup.sh)"` works);
# the same lines are kept in /etc/bluebox-test/env. stderr: one summary line, or the error
# and the tail of the failing step's output.
set -euo pipefail

CONF_DIR=/etc/bluebox-test
CONF=$CONF_DIR/containers.conf
ENV_FILE=$CONF_DIR/env
CACHE=/var/cache/bluebox-test
TEST_USER=${BLUEBOX_TEST_USER:-bbtest}
BUSYBOX_IMAGE=localhost/bluebox-test/busybox:latest
DEBIAN_IMAGE=localhost/bluebox-test/debian:bookworm
# The Debian mirror comes from this machine's apt configuration (no host is named here);
# BLUEBOX_TEST_MIRROR overrides it. Read when the debian image is built (apt_mirror below).
MIRROR=${BLUEBOX_TEST_MIRROR:-}
SECURITY_MIRROR=${BLUEBOX_TEST_SECURITY_MIRROR:-}
STAMP_LABEL=io.bluebox.test.stamp
# Bump when the image recipes below change, so existing images are rebuilt.
RECIPE=3
PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export PATH

want_debian=0
upstream_tags=0
verbose=0
for a in "$@"; do
    case $a in
    --debian) want_debian=1 ;;
    --upstream-tags) upstream_tags=1 ;;
    --verbose | -v) verbose=1 ;;
    -h | --help)
        sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
        exit 0
        ;;
    *)
        echo "setup.sh: unknown argument: $a (see --help)" >&2
        exit 2
        ;;
    esac
done

if [ "$(id -u)" -ne 0 ]; then
    echo "setup.sh: must run as root (it creates a user, writes /etc/bluebox-test, chmods /dev/net/tun)" >&2
    exit 1
fi

T0=$(date +%s%N)
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
WORK=$(mktemp -d /var/tmp/bluebox-test-setup.XXXXXX)
chmod 0755 "$WORK"
LOG=$WORK/log
: >"$LOG"
trap 'rm -rf "$WORK"' EXIT
cd /

# One setup at a time (parallel test runners may all call it).
mkdir -p /run/lock
exec 9>/run/lock/bluebox-test-setup.lock
flock 9

did=()
say() { [ "$verbose" = 0 ] || echo "setup.sh: $*" >&2; }
die() {
    echo "setup.sh: $*" >&2
    if [ -s "$LOG" ]; then
        echo "---- last output ----" >&2
        tail -n 25 "$LOG" >&2
    fi
    exit 1
}
# run CMD...: quiet unless --verbose; on failure die with the output.
run() {
    say "+ $*"
    echo "+ $*" >>"$LOG"
    if [ "$verbose" = 1 ]; then
        "$@" 2>&1 | tee -a "$LOG" >&2 || die "failed: $*"
    else
        "$@" >>"$LOG" 2>&1 || die "failed: $*"
    fi
}
# Write stdin to FILE (mode MODE, owner OWNER) only when the content differs, and touch its
# mode and owner only when they differ: bluebox's isolation-check fingerprint includes the
# ctime of containers.conf, so a rewrite (or even a same-value chmod) by another test
# process's setup would invalidate every cached check.
put() {
    local file=$1 mode=$2 owner=$3 tmp
    tmp=$(mktemp "$WORK/put.XXXXXX")
    cat >"$tmp"
    if ! cmp -s "$tmp" "$file" 2>/dev/null; then
        install -D -m "$mode" -o "${owner%:*}" -g "${owner#*:}" "$tmp" "$file"
        did+=("wrote $file")
    fi
    rm -f "$tmp"
    [ "$(stat -c %a "$file")" = "${mode#0}" ] || chmod "$mode" "$file"
    case "$(stat -c '%U:%G %u:%g' "$file")" in
    "$owner "* | *" $owner") ;;
    *) chown "$owner" "$file" ;;
    esac
}

# ---------------------------------------------------------------- packages
need_pkgs=""
for p in podman runc uidmap slirp4netns fuse-overlayfs busybox-static; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
        need_pkgs="$need_pkgs $p"
done
if [ -n "$need_pkgs" ]; then
    if [ -x "$ROOT/scripts/deps.sh" ]; then
        run "$ROOT/scripts/deps.sh"
    else
        export DEBIAN_FRONTEND=noninteractive
        run apt-get update -qq
        # shellcheck disable=SC2086
        run apt-get install -y -qq --no-install-recommends $need_pkgs
    fi
    did+=("installed$need_pkgs")
fi
if [ "$want_debian" = 1 ] && ! command -v debootstrap >/dev/null; then
    export DEBIAN_FRONTEND=noninteractive
    if ! apt-get install -y -qq --no-install-recommends debootstrap >>"$LOG" 2>&1; then
        run apt-get update -qq
        run apt-get install -y -qq --no-install-recommends debootstrap
    fi
    did+=("installed debootstrap")
fi
BUSYBOX=/bin/busybox
[ -x "$BUSYBOX" ] || BUSYBOX=$(command -v busybox) || die "busybox not found"
# busybox-static provides a static /bin/busybox; a dynamic one would not run in the image.
if LC_ALL=C readelf -l "$BUSYBOX" 2>/dev/null | grep -q 'INTERP'; then
    die "$BUSYBOX is dynamically linked; install busybox-static"
fi

# ---------------------------------------------------------------- containers.conf
# podman raises RLIMIT_NOFILE to the hard limit and lowers RLIMIT_NPROC to 32768 (when it
# cannot set 1048576) for itself, and runc cannot give the container more than podman has:
# without CAP_SYS_RESOURCE (this host's root lacks it) podman's defaults fail with
# "error setting rlimit type 6/7: operation not permitted". So stay within both.
hn=$(ulimit -Hn)
hu=$(ulimit -Hu)
[ "$hn" = unlimited ] && hn=1048576
[ "$hu" = unlimited ] && hu=1048576
nofile=$((hn < 1048576 ? hn : 1048576))
nproc=$((hu < 32768 ? hu : 32768))

put "$CONF" 0644 root:root <<EOF
# Written by bluebox tests/integration/setup.sh; used through CONTAINERS_CONF (root and
# rootless). Host facts: crun fails on hybrid cgroups v1 here, no systemd/journald as PID 1,
# hard limits nofile=$(ulimit -Hn) nproc=$(ulimit -Hu).
[containers]
default_ulimits = [
  "nofile=$nofile:$nofile",
  "nproc=$nproc:$nproc",
]

[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
EOF
export CONTAINERS_CONF=$CONF

# ---------------------------------------------------------------- /dev/net/tun
if [ ! -e /dev/net/tun ]; then
    mkdir -p /dev/net
    run mknod -m 0666 /dev/net/tun c 10 200
    did+=("created /dev/net/tun")
fi
if [ "$(stat -c %a /dev/net/tun)" != 666 ]; then
    chmod 0666 /dev/net/tun
    did+=("chmod 0666 /dev/net/tun")
fi

# ---------------------------------------------------------------- the rootless test user
if ! id -u "$TEST_USER" >/dev/null 2>&1; then
    run useradd --create-home --shell /bin/sh --comment "bluebox rootless tests" "$TEST_USER"
    did+=("created user $TEST_USER")
fi
USER_UID=$(id -u "$TEST_USER")
USER_GID=$(id -g "$TEST_USER")
USER_HOME=$(getent passwd "$TEST_USER" | cut -d: -f6)
USER_RUN=/run/user/$USER_UID
[ -d "$USER_HOME" ] || install -d -m 0750 -o "$USER_UID" -g "$USER_GID" "$USER_HOME"

# A subordinate range of >= 65536 ids in FILE for the user, else add one past all others.
subids_changed=0
ensure_subids() {
    local file=$1 flag=$2 start
    touch "$file"
    if awk -F: -v u="$TEST_USER" -v id="$USER_UID" \
        '($1 == u || $1 == id) && $3 >= 65536 { found = 1 } END { exit !found }' "$file"; then
        return 0
    fi
    start=$(awk -F: 'BEGIN { m = 100000 } NF >= 3 && $2 + $3 > m { m = $2 + $3 } END { print m }' "$file")
    run usermod "$flag" "$start-$((start + 65535))" "$TEST_USER"
    did+=("$file: $TEST_USER:$start:65536")
    subids_changed=1
}
ensure_subids /etc/subuid --add-subuids
ensure_subids /etc/subgid --add-subgids

# XDG_RUNTIME_DIR without logind: podman also picks /run/user/<uid> by itself when it exists.
install -d -m 0700 -o "$USER_UID" -g "$USER_GID" "$USER_RUN"

# Rootless storage: overlay (native on kernels >= 5.13, fuse-overlayfs before). Without a
# storage.conf podman 4.3 fell back to vfs here, which copies whole layers on every build.
kmaj=$(uname -r | cut -d. -f1)
kmin=$(uname -r | cut -d. -f2)
if [ "$kmaj" -gt 5 ] || { [ "$kmaj" -eq 5 ] && [ "$kmin" -ge 13 ]; }; then
    overlay_opts=""
else
    overlay_opts=$'\n[storage.options.overlay]\nmount_program = "/usr/bin/fuse-overlayfs"'
fi
install -d -m 0755 -o "$USER_UID" -g "$USER_GID" "$USER_HOME/.config" "$USER_HOME/.config/containers"
put "$USER_HOME/.config/containers/storage.conf" 0644 "$USER_UID:$USER_GID" <<EOF
# Written by bluebox tests/integration/setup.sh
[storage]
driver = "overlay"$overlay_opts
EOF
# The same engine settings for the user when CONTAINERS_CONF is not exported (when it is,
# podman reads only that file).
put "$USER_HOME/.config/containers/containers.conf" 0644 "$USER_UID:$USER_GID" <$CONF

# as_user CMD...: run as the test user with a clean, complete environment.
as_user() {
    (cd "$USER_HOME" && runuser -u "$TEST_USER" -- env -i \
        PATH="$PATH" HOME="$USER_HOME" USER="$TEST_USER" LOGNAME="$TEST_USER" SHELL=/bin/sh \
        XDG_RUNTIME_DIR="$USER_RUN" CONTAINERS_CONF="$CONF" "$@")
}

if [ "$subids_changed" = 1 ] && [ -d "$USER_HOME/.local/share/containers/storage" ]; then
    run as_user podman system migrate
fi
driver=$(as_user podman info --format '{{.Store.GraphDriverName}}' 2>>"$LOG") || driver=""
if [ -z "$driver" ]; then
    # Rootless podman joins the user namespace of its pause process or of a running
    # container; when all were killed (a machine's processes ended mid-run, containers still
    # recorded as running) every call fails with "invalid internal status" until
    # `podman system migrate` starts anew.
    run as_user podman system migrate
    driver=$(as_user podman info --format '{{.Store.GraphDriverName}}' 2>>"$LOG") || driver=""
    [ -n "$driver" ] && did+=("restart $TEST_USER's podman pause process")
fi
if [ "$driver" != overlay ]; then
    # Storage made earlier with another driver (e.g. vfs): it is a test user, start over.
    run as_user podman system reset --force
    driver=$(as_user podman info --format '{{.Store.GraphDriverName}}' 2>>"$LOG") ||
        die "rootless podman info fails for $TEST_USER"
    [ "$driver" = overlay ] || die "rootless storage driver is '$driver', wanted overlay"
    did+=("reset $TEST_USER's podman storage")
fi

rt=$(podman info --format '{{.Host.OCIRuntime.Name}}' 2>>"$LOG") || die "podman info fails with $CONF"
[ "$rt" = runc ] || die "podman uses runtime '$rt', wanted runc"

# ---------------------------------------------------------------- images
# image_stamp PODMAN... IMAGE: the recipe stamp label of IMAGE, empty when it is missing.
image_stamp() {
    local img=${*: -1}
    "${@:1:$#-1}" image inspect --format "{{index .Config.Labels \"$STAMP_LABEL\"}}" "$img" 2>/dev/null || true
}
# import_into "root"|"user" TAR IMAGE STAMP CMD
import_into() {
    local who=$1 tar=$2 img=$3 stamp=$4 cmd=$5
    local -a pm=(podman)
    [ "$who" = user ] && pm=(as_user podman)
    run "${pm[@]}" import --quiet --change "CMD $cmd" --change "LABEL $STAMP_LABEL=$stamp" "$tar" "$img"
    did+=("imported $img ($who)")
}

bb_stamp="r$RECIPE-$(sha256sum "$BUSYBOX" | cut -c1-16)"
bb_tar=""
make_busybox_tar() {
    local r=$WORK/busybox-root a
    mkdir -p "$r"/{bin,sbin,usr/bin,usr/sbin,etc,root,data,tmp,proc,sys,dev,run,var/tmp}
    cp "$BUSYBOX" "$r/bin/busybox"
    # Applets at their usual places (bin/sh, sbin/ip, usr/bin/awk, ...), like `--install -s`.
    for a in $("$BUSYBOX" --list-full); do
        [ -e "$r/$a" ] || ln -s /bin/busybox "$r/$a"
    done
    printf '%s\n' 'root:x:0:0:root:/root:/bin/sh' \
        'nobody:x:65534:65534:nobody:/nonexistent:/bin/false' >"$r/etc/passwd"
    printf '%s\n' 'root:x:0:' 'nogroup:x:65534:' >"$r/etc/group"
    # Static glibc resolves host names only with an nsswitch.conf (wget segfaults without).
    printf '%s\n' 'passwd: files' 'group: files' 'hosts: files dns' >"$r/etc/nsswitch.conf"
    chmod 0700 "$r/root"
    chmod 1777 "$r/tmp" "$r/var/tmp"
    bb_tar=$WORK/busybox.tar
    tar -C "$r" --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -cf "$bb_tar" .
    chmod 0644 "$bb_tar"
}
for who in root user; do
    if [ "$who" = root ]; then pm=(podman); else pm=(as_user podman); fi
    if [ "$(image_stamp "${pm[@]}" "$BUSYBOX_IMAGE")" != "$bb_stamp" ]; then
        [ -n "$bb_tar" ] || make_busybox_tar
        import_into "$who" "$bb_tar" "$BUSYBOX_IMAGE" "$bb_stamp" '["/bin/sh"]'
    fi
done

# apt_uris: "URI SUITE" per enabled deb source in apt's one-line (.list) and deb822
# (.sources) files.
apt_uris() {
    local f
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
        [ -f "$f" ] || continue
        sed -e 's/#.*//' -e 's/\[[^]]*\]//g' "$f" | awk '$1 == "deb" && NF >= 3 {print $2, $3}'
    done
    for f in /etc/apt/sources.list.d/*.sources; do
        [ -f "$f" ] || continue
        awk 'function flush() { if (en != "no") for (i in u) for (j in s) print u[i], s[j]
                                delete u; delete s; en = "" }
             /^[ \t]*$/ { flush(); next }
             /^#/ { next }
             tolower($1) == "uris:" { for (i = 2; i <= NF; i++) u[i] = $i }
             tolower($1) == "suites:" { for (i = 2; i <= NF; i++) s[i] = $i }
             tolower($1) == "enabled:" { en = tolower($2) }
             END { flush() }' "$f"
    done
}

# apt_mirror: the first http:// Debian archive and security archive apt here uses.
apt_mirror() {
    local uri suite
    while read -r uri suite; do
        case $uri in http://*) ;; *) continue ;; esac
        case $suite in
        */) ;;
        *-security) [ -n "$SECURITY_MIRROR" ] || SECURITY_MIRROR=${uri%/} ;;
        *) [ -n "$MIRROR" ] || MIRROR=${uri%/} ;;
        esac
    done < <(apt_uris)
    if [ -z "$MIRROR" ]; then
        echo "setup.sh: apt has no http:// Debian mirror configured on this machine; set" \
            "BLUEBOX_TEST_MIRROR=http://<mirror>/debian for the debian test image" >&2
        exit 2
    fi
    [ -n "$SECURITY_MIRROR" ] || SECURITY_MIRROR=${MIRROR%/debian}/debian-security
}

if [ "$want_debian" = 1 ]; then
    deb_stamp="r$RECIPE-bookworm-minbase"
    deb_tar=""
    for who in root user; do
        if [ "$who" = root ]; then pm=(podman); else pm=(as_user podman); fi
        [ "$(image_stamp "${pm[@]}" "$DEBIAN_IMAGE")" != "$deb_stamp" ] || continue
        if [ -z "$deb_tar" ]; then
            apt_mirror
            r=$WORK/debian-root
            mkdir -p "$CACHE/debs"
            run debootstrap --variant=minbase --cache-dir="$CACHE/debs" bookworm "$r" "$MIRROR"
            cat >"$r/etc/apt/sources.list" <<EOF
deb $MIRROR bookworm main
deb $MIRROR bookworm-updates main
deb $SECURITY_MIRROR bookworm-security main
EOF
            rm -rf "${r:?}"/var/cache/apt/archives/*.deb "$r"/var/lib/apt/lists/* "${r:?}"/dev/* \
                "$r"/var/log/bootstrap.log "$r"/var/log/apt/* "$r"/var/log/dpkg.log
            deb_tar=$WORK/debian.tar
            tar -C "$r" --numeric-owner -cf "$deb_tar" .
            chmod 0644 "$deb_tar"
            rm -rf "$r"
            did+=("debootstrap bookworm")
        fi
        import_into "$who" "$deb_tar" "$DEBIAN_IMAGE" "$deb_stamp" '["/bin/bash"]'
    done
fi

if [ "$upstream_tags" = 1 ]; then
    for pm in "podman" "as_user podman"; do
        # shellcheck disable=SC2086
        run $pm tag "$BUSYBOX_IMAGE" docker.io/library/busybox:latest
        if [ "$want_debian" = 1 ]; then
            # shellcheck disable=SC2086
            run $pm tag "$DEBIAN_IMAGE" docker.io/library/debian:bookworm docker.io/library/debian:bookworm-slim
        fi
    done
fi

# ---------------------------------------------------------------- smoke checks
out=$(podman run --rm --pull=never --network=none "$BUSYBOX_IMAGE" id -u 2>>"$LOG") || die "root: podman run $BUSYBOX_IMAGE fails"
[ "$out" = 0 ] || die "root: podman run printed '$out'"
# The shape of `isolation: strict` under rootless podman.
out=$(as_user podman run --rm --pull=never --network=none --uidmap 0:1:65536 --gidmap 0:1:65536 \
    "$BUSYBOX_IMAGE" sh -c 'id -u; cat /proc/self/uid_map' 2>>"$LOG") ||
    die "$TEST_USER: rootless podman run --uidmap 0:1:65536 fails"
[ "$(printf '%s' "$out" | tr -s ' \t\n' ' ')" = "0 0 1 65536" ] || die "$TEST_USER: unexpected strict mapping: $out"

# ---------------------------------------------------------------- environment for the tests
exports="export CONTAINERS_CONF=$CONF
export BLUEBOX_TEST_IMAGE=$BUSYBOX_IMAGE
export BLUEBOX_TEST_USER=$TEST_USER
export BLUEBOX_TEST_USER_HOME=$USER_HOME
export BLUEBOX_TEST_USER_RUNTIME_DIR=$USER_RUN"
if [ "$want_debian" = 1 ] || [ -n "$(image_stamp podman "$DEBIAN_IMAGE")" ]; then
    exports="$exports
export BLUEBOX_TEST_DEBIAN_IMAGE=$DEBIAN_IMAGE"
fi
put "$ENV_FILE" 0644 root:root <<EOF
# Written by bluebox tests/integration/setup.sh; source it, or eval the script's stdout.
$exports
EOF
printf '%s\n' "$exports"

ms=$((($(date +%s%N) - T0) / 1000000))
if [ ${#did[@]} -eq 0 ]; then
    echo "setup.sh: ready (nothing to do, $((ms / 1000)).$(printf %03d $((ms % 1000))) s)" >&2
else
    n=${#did[@]}
    echo "setup.sh: ready in $((ms / 1000)).$(printf %03d $((ms % 1000))) s ($n change(s); --verbose lists them)" >&2
    if [ "$verbose" = 1 ]; then printf 'setup.sh:   %s\n' "${did[@]}" >&2; fi
fi
