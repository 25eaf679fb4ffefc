"""The runtime on real podman: the isolation check refusing a "krun" that is a plain OCI
runtime, and — on the uml backend — build, run, the confinement read back from the running
VMM process, timeouts, and strict sandboxes under rootless podman. Needs root; the uml tests
need build/bluebox-vmm and user-mode-linux."""
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import pytest
from backends import kvm_openable

from test_podman_build import env, podman  # noqa: F401  (session fixture + helper)
from test_uml_boot import apt_mirror

REPO = Path(__file__).resolve().parents[2]
IMAGE = "localhost/bluebox-test/busybox:latest"

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("podman") is None,
    reason="integration tests need root and podman",
)


class Home:
    """A throwaway BLUEBOX_HOME (under /var/tmp so the rootless user can reach it)."""

    def __init__(self, binary, user=None):
        self.bin = binary
        self.user = user
        self.dir = Path(tempfile.mkdtemp(prefix="bluebox-it-rt-", dir="/var/tmp"))
        self.dir.chmod(0o755)
        self.names = []
        self.env = dict(os.environ, BLUEBOX_HOME=str(self.dir / "home"))
        # as the user, the only variables besides the ones cmd() sets (and a qemu test's
        # acceleration, which conftest's `backend` puts in the environment)
        self.user_env = {k: os.environ[k] for k in ("BLUEBOX_QEMU_ACCEL",) if k in os.environ}
        if user:
            shutil.chown(self.dir, user)
            # the checkout may sit where the test user cannot reach (a 0700 temp dir): run
            # copies of bluebox and bluebox-vmm (found beside it) from this world-readable dir
            bindir = self.dir / "bin"
            bindir.mkdir(mode=0o755)
            for prog in (Path(binary), Path(binary).parent / "bluebox-vmm",
                         Path(binary).parent / "bluebox-xstate.so",
                         Path(binary).parent / "bluebox-uname.so"):
                if prog.exists():
                    shutil.copy2(prog, bindir / prog.name)
            self.bin = str(bindir / Path(binary).name)

    def cmd(self, *args):
        argv = [self.bin, *map(str, args)]
        if not self.user:
            return argv
        e = os.environ
        return ["runuser", "-u", self.user, "--", "env", "-i",
                "PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + e["BLUEBOX_TEST_USER_HOME"],
                "USER=" + self.user, "XDG_RUNTIME_DIR=" + e["BLUEBOX_TEST_USER_RUNTIME_DIR"],
                "CONTAINERS_CONF=" + e["CONTAINERS_CONF"],
                "BLUEBOX_HOME=" + str(self.dir / "home"),
                *(f"{k}={v}" for k, v in self.user_env.items()), *argv]

    def __call__(self, *args, input=None, env=None, timeout=300):
        return subprocess.run(self.cmd(*args), env=dict(self.env, **(env or {})), input=input,
                              capture_output=True, timeout=timeout, cwd="/",
                              stdin=None if input is not None else subprocess.DEVNULL)

    def sandbox(self, name, bluefile):
        r = self("new", name)
        assert r.returncode == 0, r
        self.names.append(name)
        (self.dir / "home" / "sandboxes" / name / "Bluefile").write_text(bluefile)
        return name

    def data(self, name):
        return self.dir / "home" / "data" / name

    def close(self):
        for n in self.names:
            self("destroy", n, "--data", "-y")
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def home(env, bluebox_bin):  # noqa: F811
    h = Home(bluebox_bin)
    yield h
    h.close()


# The direct launch (runc without podman, the default for uml run/shell as root,
# src/launch/direct.h): one bundle directory per live run, its runc state beside.
DIRECT_RUNS = Path("/run/bluebox-direct/runs")
DIRECT_RUNC_ROOT = "/run/bluebox-direct/runc"


def direct_containers_of(name):
    """The live direct launches of sandbox `name` (any home; test names are unique)."""
    out = []
    for d in (DIRECT_RUNS.iterdir() if DIRECT_RUNS.is_dir() else []):
        try:
            owner = (d / "sandbox").read_text()
        except OSError:
            continue
        if owner.split(" ", 1)[-1] == name:
            out.append(d.name)
    return out


def podman_containers_of(name, user=False):
    r = podman("ps", "-aq", "--filter", f"label=bluebox.sandbox={name}", user=user)
    return r.stdout.split()


def containers_of(name, user=False):
    """Every container of sandbox `name`: podman's and (as root) direct launches."""
    return podman_containers_of(name, user) + ([] if user else direct_containers_of(name))


def upper_dir_of(cid, user=False):
    """The host directory that holds what container `cid` wrote to its root: podman's
    overlay upper, or a direct launch's throwaway one."""
    scratch = DIRECT_RUNS / cid / "scratch"
    if not user and scratch.exists():
        return scratch.read_text() + "/upper"
    return podman("inspect", "--format", "{{.GraphDriver.Data.UpperDir}}", cid,
                  user=user).stdout.strip()


def running_container(name, user=False):
    """(id, host pid of its init (bluebox-vmm), limits) of the sandbox's running container,
    whichever way it was launched; None while there is none. limits: PidsLimit, Memory,
    Privileged, as podman inspect's HostConfig has them."""
    for cid in ([] if user else direct_containers_of(name)):
        r = subprocess.run(["runc", "--root", DIRECT_RUNC_ROOT, "state", cid],
                           capture_output=True, text=True)
        st = json.loads(r.stdout) if r.returncode == 0 else {}
        if st.get("status") != "running" or not st.get("pid"):
            continue
        try:
            cfg = json.loads((DIRECT_RUNS / cid / "config.json").read_text())
        except OSError:
            continue
        lx = cfg["linux"]
        res = lx.get("resources", {})
        # podman's --privileged: no seccomp profile and no masked paths
        return cid, st["pid"], {"PidsLimit": res.get("pids", {}).get("limit"),
                                "Memory": res.get("memory", {}).get("limit"),
                                "Privileged": not (lx.get("seccomp") and lx.get("maskedPaths"))}
    for cid in podman_containers_of(name, user):
        r = podman("inspect", cid, check=False, user=user)
        info = json.loads(r.stdout)[0] if r.returncode == 0 else {}
        if info.get("State", {}).get("Running") and info["State"].get("Pid"):
            return cid, info["State"]["Pid"], info["HostConfig"]
    return None


# ---- krun: a "krun" that is really runc is refused, for real ------------------------------

@pytest.mark.skipif(not kvm_openable(), reason="krun's preflight needs an openable /dev/kvm")
def test_krun_that_is_runc_is_refused(home, tmp_path):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "krun").symlink_to(shutil.which("runc"))
    path = {"PATH": f"{bindir}:{os.environ['PATH']}", "BLUEBOX_BACKEND": "krun"}
    name = home.sandbox(f"krunfake-{os.getpid()}", f"base: {IMAGE}\n")
    for args in (["build", name], ["verify", name], ["run", name, "--", "true"]):
        r = home(*args, env=path)
        assert r.returncode == 1, r
        err = r.stderr.decode()
        assert "not isolated" in err and "This is a container, not a microVM" in err, r
        assert "+LIBKRUN" in err
    # nothing was remembered as verified, and nothing was left running
    cache = home.dir / "home" / "verify.json"
    assert not cache.exists() or "krun" not in json.loads(cache.read_text())["backends"]
    assert containers_of(name) == []
    # re-pointing the symlink is a runtime change; it is still refused
    (bindir / "krun").unlink()
    shutil.copy(shutil.which("runc"), bindir / "runc-copy")
    (bindir / "krun").symlink_to(bindir / "runc-copy")
    r = home("run", name, "--", "true", env=path)
    assert r.returncode == 1 and b"not isolated" in r.stderr, r


# ---- uml: end to end ----------------------------------------------------------------------

UML = pytest.mark.skipif(
    not (REPO / "build" / "bluebox-vmm").exists() or not Path("/usr/bin/linux.uml").exists(),
    reason="needs build/bluebox-vmm and user-mode-linux")


def built_box(home, backend):
    name = home.sandbox(f"{backend}-{os.getpid()}",
                        f"base: {IMAGE}\nbackend: {backend}\nram_mib: 256\n")
    r = home("build", name)
    assert r.returncode == 0, r
    out = r.stdout.decode()
    assert "isolated: host " in out and f"({backend})" in out, r
    return name


@pytest.fixture
def uml_box(home):
    return built_box(home, "uml")


@pytest.fixture
def vm_box(home, backend):
    """A sandbox of the test's backend (conftest.py: uml and qemu)."""
    return built_box(home, backend)


@UML
def test_uml_guest_has_its_own_kernel(home, uml_box):
    r = home("run", uml_box, "--", "cat", "/proc/sys/kernel/random/boot_id", "/proc/version")
    assert r.returncode == 0, r
    boot_id, version = r.stdout.decode().split("\n", 1)
    assert boot_id != Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    assert os.uname().release not in version
    r = home("verify", uml_box)
    assert r.returncode == 0 and b"isolated: host " + os.uname().release.encode() in r.stdout, r


def test_uml_run_plumbing(home, vm_box, backend):
    r = home("run", vm_box, "--", "sh", "-c", "echo out; echo err >&2; exit 3")
    assert (r.returncode, r.stdout, r.stderr) == (3, b"out\n", b"err\n"), r
    # stdin byte-exact and a missing command's 127 on qemu: test_direct_qemu.py's
    # test_qemu_direct_run_semantics, on the same (direct, default) launch; two TCG boots less
    if backend != "qemu":
        blob = os.urandom(300000) + b"\0end"
        r = home("run", vm_box, "--", "cat", input=blob)
        assert r.returncode == 0 and r.stdout == blob, (r.returncode, len(r.stdout), r.stderr)
        r = home("run", vm_box, "--", "no-such-command")
        assert r.returncode == 127, r
    # /data persists, the rest of the root does not
    r = home("run", vm_box, "--", "sh", "-c", "echo kept > /data/f; echo gone > /root-file")
    assert r.returncode == 0, r
    assert (home.data(vm_box) / "f").read_text() == "kept\n"
    r = home("run", vm_box, "--", "sh", "-c", "cat /data/f; test ! -e /root-file")
    assert (r.returncode, r.stdout) == (0, b"kept\n"), r
    log = (home.dir / "home" / "logs" / f"{vm_box}.log").read_bytes().decode(errors="replace")
    # both streams, in either order: stdout and stderr come over separate channels, and a
    # loaded host may deliver the later line first
    assert re.search(r"run: 'sh' '-c' 'echo out; echo err >&2; exit 3'\n(\| out\n\| err|\| err\n\| out)\n"
                     r"=== exit 3 \(", log), log
    # 50 MB of output: the terminal gets it all; the run log (64 KiB at each end) and
    # podman's own container log (none for an attached run) do not.
    # (qemu: 4 MiB; its console is a serial line, which carries 50 MiB under TCG only in
    # minutes)
    n = (4 if backend == "qemu" else 50) << 20
    r = home("run", vm_box, "--", "sh", "-c", f"head -c {n} /dev/zero; exit 4", timeout=300)
    assert r.returncode == 4 and len(r.stdout) == n, (r.returncode, len(r.stdout))
    log = (home.dir / "home" / "logs" / f"{vm_box}.log").read_bytes()
    assert len(log) < 1 << 20, len(log)
    assert b" bytes clipped \xe2\x80\xa6]\n" in log and re.search(rb"=== exit 4 \(", log)


@UML
def test_uml_timeout_kills_and_removes(home):
    name = home.sandbox(f"umlto-{os.getpid()}",
                        f"base: {IMAGE}\nbackend: uml\nram_mib: 256\ntimeout_seconds: 2\n")
    assert home("build", name).returncode == 0
    t = time.monotonic()
    r = home("run", name, "--", "sleep", "60")
    assert r.returncode == 124, r
    assert b"bluebox: killed after 2s (timeout_seconds)" in r.stderr
    assert time.monotonic() - t < 30
    assert containers_of(name) == []


@UML
def test_uml_confinement_read_back(home, uml_box):
    """The VMM process of a running sandbox, read from the host: capabilities, no_new_privs,
    seccomp, its own network namespace, pids and memory limits."""
    p = subprocess.Popen(home.cmd("run", uml_box, "--", "sh", "-c", "echo ready; sleep 20"),
                         env=home.env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    try:
        # the guest runs: bluebox-vmm has dropped the two capabilities its setup needs
        assert p.stdout.readline() == b"ready\n"
        found = None
        for _ in range(200):
            found = running_container(uml_box)
            if found:
                break
            time.sleep(0.1)
        assert found, "the sandbox's container never ran"
        _, pid, info = found
        status = dict(line.split(":\t", 1) for line in
                      Path(f"/proc/{pid}/status").read_text().splitlines() if ":\t" in line)
        assert status["CapEff"].strip() == "00000000000004cb"
        assert status["NoNewPrivs"].strip() == "1"
        assert status["Seccomp"].strip() == "2"
        assert os.readlink(f"/proc/{pid}/ns/net") != os.readlink("/proc/self/ns/net")
        assert info["PidsLimit"] == 512
        assert info["Memory"] == (256 + 256) * 1024 * 1024
        assert not info["Privileged"]
    finally:
        p.terminate()
        p.communicate(timeout=60)
    assert p.returncode == 128 + 15
    for _ in range(50):
        if not containers_of(uml_box):
            break
        time.sleep(0.2)
    assert containers_of(uml_box) == []


def test_strict_rootless(env, bluebox_bin, backend):  # noqa: F811
    user = env["BLUEBOX_TEST_USER"]
    h = Home(bluebox_bin, user=user)
    try:
        name = h.sandbox(f"strict-{os.getpid()}",
                         f"base: {IMAGE}\nbackend: {backend}\nram_mib: 256\nisolation: strict\n")
        r = h("build", name)
        assert r.returncode == 0, r
        r = h("run", name, "--", "sh", "-c", "id -u; echo x > /data/f")
        assert (r.returncode, r.stdout) == (0, b"0\n"), r
        sub = int(next(line.split(":")[1] for line in open("/etc/subuid")
                       if line.startswith(user + ":")))
        assert (h.data(name) / "f").stat().st_uid == sub
        assert h.data(name).stat().st_uid == sub
    finally:
        h.close()


def test_mounts_readonly_root_and_guest_only_state(home, tmp_path, backend):
    """ro mounts refuse writes (also after a remount inside the guest), rw mounts write
    through, a read-only root refuses writes while /tmp and /data stay writable, and mount
    and sysctl act on the guest's kernel only."""
    ro = Path(tempfile.mkdtemp(prefix="bluebox-it-ro-", dir="/var/tmp"))
    rw = Path(tempfile.mkdtemp(prefix="bluebox-it-rw-", dir="/var/tmp"))
    try:
        (ro / "in").write_text("host file\n")
        name = home.sandbox(
            f"umlmnt-{os.getpid()}",
            f"base: {IMAGE}\nbackend: {backend}\nram_mib: 256\nreadonly: true\nmounts:\n"
            f"  - {{host: {ro}, guest: /ro, mode: ro}}\n  - {{host: {rw}, guest: /rw, mode: rw}}\n")
        assert home("build", name).returncode == 0
        script = (
            "cat /ro/in; "
            "echo x > /ro/new 2>/dev/null && echo RO-WRITABLE; "
            "mount -o remount,rw /ro 2>/dev/null; echo y > /ro/new2 2>/dev/null; "
            "echo out > /rw/out; "
            "echo z > /root-file 2>/dev/null && echo ROOT-WRITABLE; "
            "echo t > /tmp/t && echo tmp-ok; echo d > /data/d && echo data-ok; "
            "test -e /dev/kvm && echo HAS-KVM; "
            "mkdir -p /tmp/m && mount -t tmpfs none /tmp/m && echo mount-ok; "
            "echo 7 > /proc/sys/kernel/domainname 2>/dev/null; sysctl -n kernel.hostname; "
            "true")
        host_hostname = Path("/proc/sys/kernel/hostname").read_text()
        r = home("run", name, "--", "sh", "-c", script)
        out = r.stdout.decode()
        assert r.returncode == 0, r
        assert out.startswith("host file\n"), out
        for bad in ("RO-WRITABLE", "ROOT-WRITABLE", "HAS-KVM"):
            assert bad not in out, out
        for good in ("tmp-ok", "data-ok", "mount-ok"):
            assert good in out, out
        assert not (ro / "new").exists() and not (ro / "new2").exists()
        assert (rw / "out").read_text() == "out\n"
        # the guest's mount and sysctl touched the guest's kernel, not the host's
        assert Path("/proc/sys/kernel/hostname").read_text() == host_hostname
        assert "/tmp/m" not in Path("/proc/self/mounts").read_text()
    finally:
        shutil.rmtree(ro, ignore_errors=True)
        shutil.rmtree(rw, ignore_errors=True)


def _bridge_mirror_or_skip(user=False):
    m = apt_mirror()
    if m is None:
        pytest.skip("apt has no http:// Debian mirror configured on this machine")
    r = podman("run", "--rm", "--pull=never", "--network=bridge", IMAGE, "timeout", "20", "wget",
               "-q", "-O", "/dev/null", m[1], check=False, user=user)
    if r.returncode != 0:
        pytest.skip(f"environmental limit: plain `podman run --network=bridge` cannot fetch "
                    f"{m[1]} here (exit {r.returncode})")
    return m


@UML
@pytest.mark.parametrize("strict", [False, True], ids=["standard", "strict"])
def test_uml_network_bridge(env, bluebox_bin, strict):  # noqa: F811
    """network: bridge through bluebox: the guest resolves and fetches from apt's mirror; a
    sandbox of the same image with network: none cannot."""
    user = env["BLUEBOX_TEST_USER"] if strict else None
    host, url = _bridge_mirror_or_skip(user=bool(user))
    h = Home(bluebox_bin, user=user)
    try:
        iso = "isolation: strict\n" if strict else ""
        script = (f"nslookup {host} >/dev/null && echo resolved; "
                  f"timeout 20 wget -q -O- {url} | head -1")
        for net, want in (("bridge", b"resolved\n-----BEGIN PGP SIGNATURE-----\n"), ("none", b"")):
            name = h.sandbox(f"net{net}{'s' if strict else ''}-{os.getpid()}",
                             f"base: {IMAGE}\nbackend: uml\nram_mib: 256\nnetwork: {net}\n{iso}")
            r = h("build", name)
            assert r.returncode == 0, r
            assert f"network {net}".encode() in r.stdout + r.stderr, r
            r = h("run", name, "--", "sh", "-c", script)
            assert r.stdout == want, r
    finally:
        h.close()


@UML
@pytest.mark.skipif(os.environ.get("BLUEBOX_TEST_DEBIAN") != "1",
                    reason="set BLUEBOX_TEST_DEBIAN=1 (debootstrap image, ~90 s once)")
def test_uml_blueprint_user_on_debian(home):
    """A blueprint user, file and command, built on a real Debian base, used in the guest.
    (hostfs keeps no guest ownership: what the user creates belongs to the VMM's user on the
    host, and so to root in the guest — docs/backends.md, the uml backend.)"""
    name = home.sandbox(f"uml-bp-{os.getpid()}", f"""\
base: {os.environ['BLUEBOX_TEST_DEBIAN_IMAGE']}
backend: uml
ram_mib: 256
blueprint:
  users:
    - name: agent
      shell: /bin/bash
  write_files:
    - path: /etc/agent-note
      content: "it's $HOME \\"quoted\\"\\n"
      mode: "0640"
  runcmd:
    - echo provisioned > /etc/stamp
""")
    r = home("build", name)
    assert r.returncode == 0, r
    r = home("run", name, "--", "sh", "-c",
             "su -s /bin/sh agent -c 'id -un; echo $HOME; getent passwd agent | cut -d: -f7; "
             "echo hi > ~/mine && cat ~/mine; touch /data/agent 2>/dev/null || echo data-root-only'; "
             "cat /etc/agent-note; stat -c %a /etc/agent-note; cat /etc/stamp")
    assert r.returncode == 0, r
    assert r.stdout.decode().splitlines() == [
        "agent", "/home/agent", "/bin/bash", "hi", "data-root-only",
        "it's $HOME \"quoted\"", "640", "provisioned"], r


# ---- guest-written host files carry no privilege -----------------

# What a hostile guest root tries through hostfs, in /data and an rw mount. Each line that
# gets through prints SET; each refusal prints the guest's error.
PLANT = """
for d in /data /rw; do
    [ -d $d ] || continue
    cp /bin/busybox $d/suid && chown 0:0 $d/suid && chmod 4755 $d/suid && echo SET $d/suid
    cp /bin/busybox $d/sgid && chmod 2755 $d/sgid && echo SET $d/sgid
    touch $d/owner && chown 1234:1234 $d/owner && echo SET $d/owner
    touch $d/group && chgrp 1234 $d/group && echo SET $d/group
    mkdir $d/dir && chmod g+s $d/dir && echo SET $d/dir
done
"""


def privileged(paths):
    """Files under paths with a setuid/setgid bit or an owner other than the data dir's."""
    bad = []
    for top in paths:
        want = (top.stat().st_uid, top.stat().st_gid)
        for p in [top, *top.rglob("*")]:
            st = p.lstat()
            if st.st_mode & 0o6000 or (st.st_uid, st.st_gid) != want:
                bad.append(f"{p} {oct(st.st_mode)} {st.st_uid}:{st.st_gid}")
    return bad


@pytest.mark.parametrize("isolation", ["standard", "strict"])
def test_guest_cannot_plant_privileged_host_files(home, isolation, backend):
    """Guest root's chown 0:0 + chmod 4755, chmod 2755, chown/chgrp to another id and a
    setgid directory, in /data and (standard) an rw mount: each works in the guest's view
    (the file server keeps it in an xattr, and the next boot sees it), nothing privileged
    and no foreign owner on the host; the guest's ordinary chmod and chown still work."""
    rw = Path(tempfile.mkdtemp(prefix="bluebox-it-rw-", dir="/var/tmp"))
    try:
        mounts = f"mounts:\n  - {{host: {rw}, guest: /rw, mode: rw}}\n" if isolation == "standard" else ""
        name = home.sandbox(f"umlsuid-{isolation}-{os.getpid()}",
                            f"base: {IMAGE}\nbackend: {backend}\nram_mib: 256\nisolation: {isolation}\n"
                            + mounts)
        assert home("build", name).returncode == 0
        r = home("run", name, "--", "sh", "-c", PLANT)
        out, err = r.stdout.decode(), r.stderr.decode()
        assert out.count("SET") == (10 if mounts else 5), r
        assert "Operation not permitted" not in err, r
        tops = [home.data(name)] + ([rw] if mounts else [])
        assert (home.data(name) / "suid").is_file()
        assert privileged(tops) == []
        r = home("run", name, "--", "sh", "-c", "cd /data && stat -c '%u:%g %a %n' suid sgid "
                 "owner group dir")
        assert r.stdout.decode().splitlines() == [
            "0:0 4755 suid", "0:0 2755 sgid", "1234:1234 644 owner", "0:1234 644 group",
            "0:0 2755 dir"], r
        # what a package manager does to its own files still works
        r = home("run", name, "--", "sh", "-c",
                 "touch /data/f && chown 0:0 /data/f && chown 0 /data/f && chmod 1777 /data/f"
                 " && chmod 0640 /data/f && mkdir -m 0750 /data/d && stat -c %a /data/f /data/d")
        assert (r.returncode, r.stdout) == (0, b"640\n750\n"), r
    finally:
        shutil.rmtree(rw, ignore_errors=True)


USER_IMAGE = "localhost/bluebox-test/uml-user:latest"


@pytest.fixture
def user_image(env):  # noqa: F811
    """A base image whose USER is app (uid 1000, in group extra as well)."""
    with tempfile.TemporaryDirectory(dir="/var/tmp") as ctx:
        Path(ctx, "Containerfile").write_text(
            f"FROM {IMAGE}\n"
            "RUN echo 'app:x:1000:1000::/home/app:/bin/sh' >> /etc/passwd && "
            "echo 'app:x:1000:' >> /etc/group && echo 'extra:x:1500:app' >> /etc/group && "
            "mkdir -p /home/app && chown 1000:1000 /home/app\n"
            "USER app\n")
        podman("build", "-q", "--pull=never", "-t", USER_IMAGE, ctx)
    yield USER_IMAGE
    podman("rmi", "-f", USER_IMAGE, check=False)


def _vmm_uids(name):
    """Host uids of the running container of sandbox `name` (bluebox-vmm and UML)."""
    for _ in range(300):
        found = running_container(name)
        if found:
            pid = str(found[1])
            kids = subprocess.run(["pgrep", "-P", pid], capture_output=True,
                                  text=True).stdout.split()
            if kids:
                return {os.stat(f"/proc/{p}").st_uid for p in [pid, *kids]}
        time.sleep(0.1)
    pytest.fail("the sandbox's VMM never ran")


@UML
def test_uml_vmm_is_the_sandbox_identity_whatever_the_image_user(home, user_image):
    """An image whose USER is uid 1000: before, podman started bluebox-vmm (and UML, which
    writes guest files on the host) as host uid 1000, so files the guest wrote in /data and rw
    mounts belonged to host uid 1000, possibly another user of the machine. Now the VMM is the
    sandbox's identity (root under root podman, standard) and the workload is still app, with
    its groups and home; run, exec into an up VM and a sandbox built before bluebox recorded
    the image's USER all agree."""
    rw = Path(tempfile.mkdtemp(prefix="bluebox-it-rw-", dir="/var/tmp"))
    rw.chmod(0o777)
    try:
        name = home.sandbox(f"umluser-{os.getpid()}",
                            f"base: {user_image}\nbackend: uml\nram_mib: 256\n"
                            f"mounts:\n  - {{host: {rw}, guest: /rw, mode: rw}}\n")
        r = home("build", name)
        assert r.returncode == 0, r
        recorded = home.dir / "home" / "sandboxes" / name / "image-user"
        assert recorded.read_text() == "app\n"
        home.data(name).chmod(0o777)
        script = 'echo $(id -u) $(id -g) $(id -G) $HOME; touch /data/f /rw/g; sleep 3'
        p = subprocess.Popen(home.cmd("run", name, "--", "sh", "-c", script), env=home.env,
                             stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
        try:
            uids = _vmm_uids(name)
            out, err = p.communicate(timeout=120)
        finally:
            if p.poll() is None:
                p.kill()
                p.communicate()
        assert (p.returncode, out) == (0, b"1000 1000 1000 1500 /home/app\n"), err
        assert uids == {0}, uids
        assert (home.data(name) / "f").stat().st_uid == 0
        assert (rw / "g").stat().st_uid == 0
        # built before image-user was recorded: asked of podman once, then recorded
        recorded.unlink()
        r = home("run", name, "--", "id", "-un")
        assert (r.returncode, r.stdout) == (0, b"app\n"), r
        assert recorded.read_text() == "app\n"
        # exec into an up VM runs as the same user
        r = home("up", name)
        try:
            assert r.returncode == 0, r
            r = home("exec", name, "--", "sh", "-c", "id -u; id -G")
            assert (r.returncode, r.stdout) == (0, b"1000\n1000 1500\n"), r
        finally:
            home("down", name)
    finally:
        shutil.rmtree(rw, ignore_errors=True)


@UML
def test_uml_home_directories_are_owner_only(home, uml_box):
    r = home("run", uml_box, "--", "true")
    assert r.returncode == 0, r
    r = home("snapshot", uml_box, "s1", "-y")
    assert r.returncode == 0, r
    root = home.dir / "home"
    for d in (root, root / "data", root / "logs", root / "snapshots", root / "sandboxes"):
        assert d.stat().st_mode & 0o777 == 0o700, d


def test_build_refuses_a_mount_of_the_host_root(home):
    name = home.sandbox(f"rootmnt-{os.getpid()}",
                        f"base: {IMAGE}\nmounts:\n  - {{host: /, guest: /host}}\n")
    r = home("build", name)
    assert r.returncode == 1, r
    assert b"mount / -> /host is refused: it is the host's whole filesystem" in r.stderr, r
    assert podman("image", "exists", f"localhost/bluebox/{name}", check=False).returncode != 0
