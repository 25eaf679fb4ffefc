"""The uml guest's private root layer, on real podman and a real guest kernel: the image
read-only under a writable layer in guest RAM. What a run writes to /, /tmp, /home, /var or
/root is gone after the run and never reaches the host's disk (the container's overlay does
not grow), a write larger than the layer fails with ENOSPC, guest root cannot reach the host
disk by mounting hostfs by hand, /data and rw mounts still persist and ro mounts stay
read-only, a non-root guest user works in /tmp and its home as on a real machine, and the
guest's /etc/hosts and /etc/resolv.conf carry nothing of the host's. Needs root, podman,
user-mode-linux and build/bluebox-vmm."""
import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from test_podman_build import env, podman  # noqa: F401  (session fixture + helper)
from test_runtime import IMAGE, UML, Home, containers_of, upper_dir_of

MiB = 1 << 20


@pytest.fixture
def home(env, bluebox_bin):  # noqa: F811
    h = Home(bluebox_bin)
    yield h
    h.close()


def box(home, extra="", ram=256, network="none"):
    name = home.sandbox(f"root-{os.getpid()}-{len(home.names)}",
                        f"base: {IMAGE}\nbackend: uml\nram_mib: {ram}\n"
                        f"network: {network}\n{extra}")
    r = home("build", name)
    assert r.returncode == 0, r
    return name


def du(path):
    """Bytes in use under path (the container's overlay upper directory)."""
    out = subprocess.run(["du", "-sb", "--", path], capture_output=True, text=True, check=True)
    return int(out.stdout.split()[0])


def while_running(home, name, script, measure):
    """Run script in the sandbox; once it prints READY, call measure(upper_dir) with the
    running container's overlay upper directory, then let the guest finish (it waits for
    /data/.go). Returns (the run's result, what measure returned)."""
    go = home.data(name) / ".go"
    go.unlink(missing_ok=True)
    wrapped = f"{script}\necho READY\nwhile [ ! -e /data/.go ]; do sleep 0.2; done\n"
    p = subprocess.Popen(home.cmd("run", name, "--", "sh", "-c", wrapped), env=home.env,
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        lines = []
        for line in p.stdout:
            lines.append(line)
            if line == "READY\n":
                break
        assert lines and lines[-1] == "READY\n", (lines, p.stderr.read() if p.poll() else "")
        ids = containers_of(name)
        assert len(ids) == 1, ids
        measured = measure(upper_dir_of(ids[0]))
    finally:
        go.touch()
    out, err = p.communicate(timeout=120)
    return subprocess.CompletedProcess(p.args, p.returncode, "".join(lines) + out, err), measured


@UML
def test_root_writes_stay_in_guest_ram_and_vanish(home):
    name = box(home, ram=512)
    upper_before = {}

    def measure(upper):
        upper_before["files"] = sorted(str(p.relative_to(upper)) for p in Path(upper).rglob("*"))
        return du(upper)

    marks = " ".join(f"{d}/bb-mark" for d in ("", "/tmp", "/home", "/var", "/root"))
    script = ("mkdir -p /home /var /root; "
              f"for f in {marks}; do echo written > $f || exit 1; done; "
              "dd if=/dev/zero of=/root/big bs=1M count=200 2>/dev/null || exit 2; "
              "ls -l /root/big")
    r, used = while_running(home, name, script, measure)
    assert r.returncode == 0, r
    assert str(200 * MiB) in r.stdout, r
    # the container's overlay on the host holds the mount points podman made, not 200 MiB
    assert used < 8 * MiB, (used, upper_before)
    assert not any("bb-mark" in f or "big" in f for f in upper_before["files"]), upper_before
    r = home("run", name, "--", "sh", "-c",
             f"for f in {marks} /root/big; do test -e $f && echo LEFT $f; done; true")
    assert (r.returncode, r.stdout) == (0, b""), r


@UML
def test_root_layer_is_bounded_by_guest_ram(home):
    name = box(home, ram=256)

    def measure(upper):
        return du(upper)

    script = ("dd if=/dev/zero of=/big bs=1M count=400 2>&1 | tail -n 3; "
              "df -k / | tail -n 1; rm -f /big; echo x > /after && echo still-writable")
    r, used = while_running(home, name, script, measure)
    assert r.returncode == 0, r
    assert "No space left on device" in r.stdout, r
    # the layer is half the guest's RAM: well under 256 MiB
    layer = [ln for ln in r.stdout.splitlines() if ln.startswith("overlay")]
    assert layer and int(layer[0].split()[1]) * 1024 <= 160 * MiB, r.stdout
    assert "still-writable" in r.stdout, r
    assert used < 8 * MiB, used


@UML
def test_hostfs_by_hand_cannot_write_the_host(home):
    """Guest root mounting hostfs itself reaches the container's files read-only: the jail
    binds everything but the exec tmpfs read-only for UML, and /data (served by the file
    server, src/fsd) is not in UML's view at all: through hostfs it is the root's empty,
    read-only mount point."""
    name = box(home)
    script = ("mkdir -p /tmp/h && mount -t hostfs none /tmp/h -o / || exit 3; "
              "for f in /tmp/h/esc /tmp/h/etc/esc /tmp/h/usr/esc /tmp/h/.bluebox/esc; do "
              "  (echo x > $f) 2>/dev/null && echo WROTE $f; done; "
              "(echo x >> /tmp/h/etc/passwd) 2>/dev/null && echo WROTE passwd; "
              "(echo x > /tmp/h/esc) 2>&1 | sed 's/.*: //'; "
              "(echo d > /tmp/h/data/via-hostfs) 2>/dev/null && echo data-WROTE; "
              "ls -A /tmp/h/data | wc -l")

    def measure(upper):
        return sorted(str(p.relative_to(upper)) for p in Path(upper).rglob("*esc*"))

    r, found = while_running(home, name, script, measure)
    assert r.returncode == 0, r
    assert "WROTE" not in r.stdout, r
    assert "Read-only file system" in r.stdout, r
    assert found == [], found
    # /data is the guest's through its own mount only
    assert "data-WROTE" not in r.stdout and not (home.data(name) / "via-hostfs").exists(), r
    assert r.stdout.splitlines()[-2:] == ["0", "READY"], r


@UML
def test_data_and_mounts_persist_ro_stays_ro(home):
    ro = Path(tempfile.mkdtemp(prefix="bluebox-it-ro-", dir="/var/tmp"))
    rw = Path(tempfile.mkdtemp(prefix="bluebox-it-rw-", dir="/var/tmp"))
    one = Path(tempfile.mkdtemp(prefix="bluebox-it-file-", dir="/var/tmp"))
    try:
        (ro / "in").write_text("host file\n")
        rw.chmod(0o777)
        (one / "one-file").write_text("file\n")
        name = box(home, "mounts:\n"
                   f"  - {{host: {ro}, guest: /ro, mode: ro}}\n"
                   f"  - {{host: {rw}, guest: /src/rw, mode: rw}}\n"
                   f"  - {{host: {one / 'one-file'}, guest: /opt/one, mode: rw}}\n"
                   f"  - {{host: {ro / 'in'}, guest: /opt/ro-one, mode: ro}}\n")
        r = home("run", name, "--", "sh", "-c",
                 "cat /ro/in; grep -E ' /(data|ro|src/rw) ' /proc/mounts | cut -d' ' -f2-4; "
                 "(echo x > /ro/new) 2>/dev/null && echo RO-WRITABLE; "
                 "mount -o remount,rw /ro 2>/dev/null; (echo y >> /ro/in) 2>/dev/null && "
                 "echo RO-WRITABLE-AFTER-REMOUNT; echo out > /src/rw/out; echo d > /data/d; "
                 "echo more >> /opt/one; (echo x >> /opt/ro-one) 2>/dev/null && echo RO-FILE; true")
        assert r.returncode == 0, r
        out = r.stdout.decode()
        assert out.startswith("host file\n") and "RO-WRITABLE" not in out, out
        # ro mounts stay hostfs; /data and rw directories come from the file server
        assert "/ro hostfs ro," in out and "/src/rw virtiofs rw," in out, out
        assert "/data virtiofs rw," in out, out
        assert (rw / "out").read_text() == "out\n"
        assert (one / "one-file").read_text() == "file\nmore\n" and "RO-FILE" not in out
        assert (home.data(name) / "d").read_text() == "d\n"
        assert (ro / "in").read_text() == "host file\n" and not (ro / "new").exists()
        r = home("run", name, "--", "cat", "/data/d", "/src/rw/out")
        assert (r.returncode, r.stdout) == (0, b"d\nout\n"), r
    finally:
        for d in (ro, rw, one):
            shutil.rmtree(d, ignore_errors=True)


@UML
def test_readonly_root_still_refuses_writes(home):
    name = box(home, "readonly: true\n")
    r = home("run", name, "--", "sh", "-c",
             "for f in /esc /etc/esc /usr/esc /root/esc /home/esc; do "
             "  (echo x > $f) 2>/dev/null && echo WROTE $f; done; "
             "mount -o remount,rw / 2>/dev/null; (echo x > /esc2) 2>/dev/null && echo WROTE /esc2; "
             "echo t > /tmp/t && echo tmp-ok; echo r > /run/r && echo run-ok; "
             "echo d > /data/d && echo data-ok; grep -c . /etc/hosts")
    assert r.returncode == 0, r
    out = r.stdout.decode()
    assert "WROTE" not in out, out
    for good in ("tmp-ok", "run-ok", "data-ok"):
        assert good in out, out


@UML
def test_non_root_user_works_like_a_real_machine(home):
    """A guest user (uid 1000) creates, appends, chmods and makes directories in /tmp and
    its home; the files are its own. On hostfs they came out root-owned and chmod failed."""
    name = box(home)
    user = ("set -e; echo hi > /tmp/u; echo more >> /tmp/u; chmod 600 /tmp/u; "
            "echo hi > ~/f; chmod 640 ~/f; mkdir -m 700 ~/d; echo in > ~/d/x; "
            "touch -d 2001-01-01 ~/d/x; cp -p ~/d/x ~/y; "
            "stat -c '%U %a %n' /tmp/u ~/f ~/d ~/d/x; stat -c %y ~/y | cut -c1-10")
    script = ("echo 'u:x:1000:1000::/home/u:/bin/sh' >> /etc/passwd; "
              "echo 'u:x:1000:' >> /etc/group; "
              f"mkdir -p /home/u && chown u:u /home/u && su u -c \"{user}\"")
    r = home("run", name, "--", "sh", "-c", script)
    assert r.returncode == 0, r
    assert r.stdout.decode().splitlines() == [
        "u 600 /tmp/u", "u 640 /home/u/f", "u 700 /home/u/d", "u 644 /home/u/d/x",
        "2001-01-01"], r
    # and none of it is left for the next run
    r = home("run", name, "--", "sh", "-c", "test -e /home/u || test -e /tmp/u || echo clean")
    assert r.stdout == b"clean\n", r


def _names(text):
    """Host names in an /etc/hosts text, without comments."""
    out = set()
    for line in text.splitlines():
        fields = line.split("#", 1)[0].split()
        out.update(fields[1:])
    return out


@UML
@pytest.mark.parametrize("network,readonly", [("none", False), ("bridge", False),
                                              ("bridge", True), ("none", True)])
def test_etc_files_carry_nothing_of_the_host(home, network, readonly):
    name = box(home, f"readonly: {str(readonly).lower()}\n", network=network)
    r = home("run", name, "--", "sh", "-c",
             "cat /etc/hosts; echo ==; cat /etc/resolv.conf; echo ==; hostname; "
             "ping -c1 -W1 localhost >/dev/null 2>&1 && echo localhost-ok")
    assert r.returncode == 0, r
    hosts, resolv, rest = r.stdout.decode().split("==\n")
    hostname = rest.splitlines()[0]
    assert _names(hosts) <= {"localhost", "ip6-localhost", "ip6-loopback", hostname}, hosts
    host_names = _names(Path("/etc/hosts").read_text()) - {"localhost", "ip6-localhost",
                                                           "ip6-loopback"}
    assert not (_names(hosts) & host_names), hosts
    assert "localhost-ok" in rest, r
    want = "nameserver 10.0.2.3\n" if network == "bridge" else "# network: none\n"
    assert resolv == want, resolv
    assert not re.search(r"^\s*(search|domain)\b", resolv, re.M), resolv
