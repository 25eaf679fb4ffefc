"""`bluebox build` on backend: uml runs every RUN step in a uml guest, on backend: qemu in a
qemu microVM: the step
sees the guest's kernel and the build's capabilities, cannot reach the host (its loopback,
the podman gateway), and what it writes (owners, setuid bits, file capabilities, the files
a non-root user makes, from a package's files and maintainer scripts too) comes out in the
image as the step left it: the step's root is bluebox's file server's, with real owners.
Strict and rootless builds run in the guest too. A cached rebuild boots
nothing; --host-kernel is the explicit fallback, and --dry-run still prints the Containerfile.

Builds boot one uml guest per RUN step (~0.5 s each); the module keeps them few. qemu runs
with TCG (BLUEBOX_TEST_QEMU_ACCEL as test_qemu.py), ~3 s a step, so its cases are fewer still:
one build checks the guest's kernel and capabilities, the host out of reach, and owners and
setuid bits in the image.
"""
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from homeid import home_id
from test_netpolicy import Listener
from test_podman_build import env, podman  # noqa: F401  (session fixture + helper)
from test_qemu import ACCEL as QEMU_ACCEL, pytestmark as QEMU_MARKS

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("podman") is None
    or not os.path.exists("/usr/bin/linux.uml"),
    reason="integration tests need root, podman and user-mode-linux",
)

BUSYBOX = "localhost/bluebox-test/busybox:latest"
STEP_LINE = "bluebox: step in uml guest "
QEMU_STEP_LINE = "bluebox: step in qemu guest "
# CHOWN DAC_OVERRIDE FOWNER FSETID SETGID SETUID SETFCAP: runtime/build.c's BUILD_CAPS.
BUILD_CAPEFF = "00000000800000db"


@pytest.fixture
def home(env):  # noqa: F811
    d = Path(tempfile.mkdtemp(prefix="bluebox-it-buildvm-", dir="/var/tmp"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


def bb(bluebox_bin, home, *args):
    e = dict(os.environ, BLUEBOX_HOME=str(home), BLUEBOX_QEMU_ACCEL=QEMU_ACCEL)
    e.pop("BLUEBOX_BACKEND", None)
    return subprocess.run([bluebox_bin, *args], env=e, capture_output=True, text=True,
                          timeout=900)


def image_of(home, name):
    return f"localhost/bluebox/{name}:{home_id(home)}"


def new(bluebox_bin, home, name, bluefile):
    assert bb(bluebox_bin, home, "new", name).returncode == 0
    (home / "sandboxes" / name / "Bluefile").write_text(bluefile)


def guest_steps(out, step_line=STEP_LINE):
    """(RUN steps podman ran, not from its cache; guest lines printed)."""
    ran, last_run = 0, False
    for line in out.splitlines():
        if line.startswith("STEP "):
            last_run = ": RUN " in line
            ran += last_run
        elif line.startswith("--> Using cache") and last_run:
            ran -= 1
            last_run = False
    return ran, out.count(step_line)


def built_in_guest_then_cached(bluebox_bin, home, name, img, label, step_line):
    """The image says which guest built it; built again unchanged, every step comes from
    podman's cache and no guest boots. Returns the second build."""
    got = podman("image", "inspect", "--format", '{{index .Labels "bluebox.build"}}',
                 img).stdout.strip()
    assert got == label
    r = bb(bluebox_bin, home, "build", name)
    assert f"built {img}" in r.stdout, r
    assert step_line not in r.stdout + r.stderr
    return r


def gateway():
    out = podman("network", "inspect", "podman", "--format",
                 "{{range .Subnets}}{{.Gateway}} {{end}}", check=False).stdout.split()
    return out[0] if out else "10.88.0.1"


def test_steps_run_in_the_guest_and_a_rebuild_is_cached(bluebox_bin, home):
    name = f"bvm-{os.getpid()}-a"
    new(bluebox_bin, home, name, f"""\
base: {BUSYBOX}
backend: uml
run:
  - echo "release=$(uname -r)"; grep CapEff /proc/self/status
  - cp /bin/busybox /suidbin && chmod 4755 /suidbin && mkdir -m 2775 /sgid && chown 1234:5678 /sgid
""")
    img = image_of(home, name)
    try:
        r = bb(bluebox_bin, home, "build", name)
        assert f"built {img}" in r.stdout, r
        out = r.stdout + r.stderr
        assert "build: each RUN step runs in a uml guest" in out
        assert guest_steps(out) == (2, 2), out
        release = next(l.split("=", 1)[1] for l in out.splitlines() if l.startswith("release="))
        assert release != os.uname().release
        assert f"{STEP_LINE}{release}," in out
        assert f"CapEff:\t{BUILD_CAPEFF}" in out
        # What the guest wrote is in the image, owners and privileged modes as it set them.
        got = podman("run", "--rm", img, "sh", "-c",
                     "stat -c '%a %u %g' /suidbin /sgid; ls -a /").stdout.split("\n")
        assert got[0] == "4755 0 0" and got[1] == "2775 1234 5678", got
        assert ".bluebox" not in got[2:], "bluebox's mount points leaked into the image"
        r = built_in_guest_then_cached(bluebox_bin, home, name, img, "uml guest", STEP_LINE)
        assert (r.stdout + r.stderr).count("Using cache") >= 3
        # --dry-run prints the Containerfile as kept beside the sandbox, without the label.
        dry = bb(bluebox_bin, home, "build", "--dry-run", name).stdout
        assert dry == (home / "sandboxes" / name / "Containerfile").read_text()
        assert "LABEL" not in dry
        # The fallback is explicit, says so, and never reuses the guest's layers.
        r = bb(bluebox_bin, home, "build", "--host-kernel", name)
        out = r.stdout + r.stderr
        assert "steps run on the host's kernel" in out and "--host-kernel" in out, out
        assert STEP_LINE not in out
        assert f"release={os.uname().release}" in out
    finally:
        podman("rmi", "-f", img, check=False)


def test_files_a_user_makes_in_a_step_are_that_users(bluebox_bin, home):
    """The step's root is served by bluebox's file server with its real owners: what a
    non-root user makes (through su, or as the base image's USER) is that user's in the image,
    not root's (hostfs made every new file UML's uid's)."""
    base = f"localhost/bluebox-test/bvm-user-{os.getpid()}:latest"
    ctx = Path(tempfile.mkdtemp(prefix="bluebox-it-buildvm-base-", dir="/var/tmp"))
    (ctx / "Containerfile").write_text(f"FROM {BUSYBOX}\nUSER 1234:1234\n")
    podman("build", "-q", "-t", base, str(ctx))
    shutil.rmtree(ctx, ignore_errors=True)
    su_name, user_name = f"bvm-{os.getpid()}-u", f"bvm-{os.getpid()}-v"
    new(bluebox_bin, home, su_name, f"""\
base: {BUSYBOX}
backend: uml
run:
  - echo 'u:x:1234:1234::/home/u:/bin/sh' >> /etc/passwd && mkdir -p /home/u && chown 1234:1234 /home/u
  - su u -c 'echo hi > /home/u/f && mkdir /home/u/d && ln -s f /home/u/l' && su -s /bin/sh nobody -c 'touch /tmp/bynobody'
""")
    new(bluebox_bin, home, user_name, f"""\
base: {base}
backend: uml
run:
  - id -u > /tmp/byuser
""")
    imgs = [image_of(home, su_name), image_of(home, user_name)]
    try:
        for name, img in zip((su_name, user_name), imgs):
            r = bb(bluebox_bin, home, "build", name)
            assert f"built {img}" in r.stdout, r
            assert STEP_LINE in r.stdout + r.stderr
        got = podman("run", "--rm", "--user", "0", imgs[0], "stat", "-c", "%u:%g %A %n",
                     "/home/u/f", "/home/u/d", "/home/u/l", "/tmp/bynobody").stdout.split("\n")
        assert got[:4] == ["1234:1234 -rw-r--r-- /home/u/f", "1234:1234 drwxr-xr-x /home/u/d",
                           "1234:1234 lrwxrwxrwx /home/u/l", "65534:65534 -rw-r--r-- /tmp/bynobody"
                           ], got
        got = podman("run", "--rm", "--user", "0", imgs[1], "sh", "-c",
                     "stat -c '%u:%g' /tmp/byuser; cat /tmp/byuser").stdout.split()
        assert got == ["1234:1234", "1234"], got
    finally:
        for img in imgs:
            podman("rmi", "-f", img, check=False)
        podman("rmi", "-f", base, check=False)


OWNERS_STEP = ("echo 'u:x:1234:1234::/home/u:/bin/sh' >> /etc/passwd && mkdir -p /home/u && "
               "chown 1234:1234 /home/u && su u -c 'touch /home/u/f' && cp /bin/busybox /suidbin "
               "&& chmod 4755 /suidbin")
OWNERS_SEEN = ["1234:1234 /home/u/f", "0:0 4755 /suidbin"]


def owners_in(img, user=False):
    return podman("run", "--rm", img, "sh", "-c",
                  "stat -c '%u:%g %n' /home/u/f; stat -c '%u:%g %a %n' /suidbin",
                  user=user).stdout.splitlines()


def test_strict_and_rootless_builds_run_in_the_guest(bluebox_bin, home):
    """`isolation: strict` (root podman) and a rootless user's build: the steps boot the
    guest all the same, and owners and setuid bits come out right."""
    name = f"bvm-{os.getpid()}-s"
    new(bluebox_bin, home, name, f"""\
base: {BUSYBOX}
backend: uml
isolation: strict
run:
  - {OWNERS_STEP}
""")
    img = image_of(home, name)
    try:
        r = bb(bluebox_bin, home, "build", name)
        assert f"built {img}" in r.stdout, r
        assert guest_steps(r.stdout + r.stderr) == (1, 1), r
        assert owners_in(img) == OWNERS_SEEN
    finally:
        podman("rmi", "-f", img, check=False)

    user = os.environ.get("BLUEBOX_TEST_USER")
    if not user:
        pytest.skip("rootless: needs BLUEBOX_TEST_USER (/etc/bluebox-test/env)")
    # The checkout may sit where the test user cannot reach: copies of the binaries.
    rl = Path(tempfile.mkdtemp(prefix="bluebox-it-buildvm-rl-", dir="/var/tmp"))
    try:
        rl.chmod(0o755)
        (rl / "bin").mkdir(mode=0o755)
        src = Path(bluebox_bin).parent
        for prog in ("bluebox", "bluebox-vmm", "bluebox-xstate.so", "bluebox-uname.so"):
            if (src / prog).exists():
                shutil.copy2(src / prog, rl / "bin" / prog)
        (rl / "home").mkdir()
        shutil.chown(rl / "home", user)
        e = os.environ
        argv = ["runuser", "-u", user, "--", "env", "-i", "PATH=/usr/local/bin:/usr/bin:/bin",
                "HOME=" + e["BLUEBOX_TEST_USER_HOME"], "USER=" + user,
                "XDG_RUNTIME_DIR=" + e["BLUEBOX_TEST_USER_RUNTIME_DIR"],
                "CONTAINERS_CONF=" + e["CONTAINERS_CONF"], f"BLUEBOX_HOME={rl}/home",
                str(rl / "bin" / "bluebox")]

        def as_user(*args):
            return subprocess.run([*argv, *args], capture_output=True, text=True, cwd="/",
                                  timeout=900)

        name = f"bvm-{os.getpid()}-r"
        assert as_user("new", name).returncode == 0
        (rl / "home" / "sandboxes" / name / "Bluefile").write_text(f"""\
base: {BUSYBOX}
backend: uml
run:
  - {OWNERS_STEP}
""")
        r = as_user("build", name)
        img = f"localhost/bluebox/{name}:{home_id(rl / 'home')}"
        assert f"built {img}" in r.stdout, r
        assert guest_steps(r.stdout + r.stderr) == (1, 1), r
        assert owners_in(img, user=True) == OWNERS_SEEN
        podman("rmi", "-f", img, user=True, check=False)
    finally:
        shutil.rmtree(rl, ignore_errors=True)


def probe_script(port, gw):
    return " ; ".join(
        f"(timeout 5 nc -w 3 {a} {port} </dev/null && echo REACHED-{n} || echo refused-{n})"
        for n, a in (("loopback", "127.0.0.1"), ("slirp-host", "10.0.2.2"), ("gateway", gw)))


def test_a_step_cannot_reach_the_host(bluebox_bin, home):
    name = f"bvm-{os.getpid()}-b"
    lis = Listener("0.0.0.0")
    gw = gateway()
    new(bluebox_bin, home, name, f"""\
base: {BUSYBOX}
backend: uml
network: bridge
run:
  - '{probe_script(lis.port, gw)}'
""")
    img = image_of(home, name)
    try:
        r = bb(bluebox_bin, home, "build", name)
        out = r.stdout + r.stderr
        assert f"built {img}" in r.stdout, r
        assert STEP_LINE in out
        for n in ("loopback", "slirp-host", "gateway"):
            assert f"refused-{n}" in out, out
        assert not [l for l in out.splitlines() if l.startswith("REACHED-")], out
        assert lis.seen == []
        # The same step on the host's kernel reaches the listener through the gateway: the
        # check above can fail.
        r = bb(bluebox_bin, home, "build", "--host-kernel", name)
        assert "REACHED-gateway" in (r.stdout + r.stderr).splitlines(), r
        assert len(lis.seen) >= 1
    finally:
        lis.close()
        podman("rmi", "-f", img, check=False)


def debian_image():
    image = os.environ.get("BLUEBOX_TEST_DEBIAN_IMAGE")
    if not image or podman("image", "exists", image, check=False).returncode != 0:
        pytest.skip("needs the debian test image (tests/integration/setup.sh --debian) and "
                    "the Debian mirror apt uses here")
    return image


# The distribution's sudo from the mirror (apt in the guest, setuid root in the image), then a
# package made in one step and installed by dpkg in the next: it ships a setuid-root program
# and a directory of another owner, and its postinst tries the host.
MAKE_DEB = r"""
set -e; d=/tmp/pkg; mkdir -p $d/DEBIAN $d/usr/local/bin $d/var/lib/bbtest
cp /bin/true $d/usr/local/bin/bbsuid; chmod 4755 $d/usr/local/bin/bbsuid
printf 'Package: bbtest\nVersion: 1\nArchitecture: all\nMaintainer: t <t@t>\nDescription: t\n' > $d/DEBIAN/control
printf '#!/bin/bash\nfor a in 127.0.0.1 10.0.2.2 GW; do if timeout 5 bash -c "echo > /dev/tcp/$a/PORT"; then echo REACHED-$a; else echo refused-$a; fi; done\nuseradd -r -M bbsvc; chown bbsvc:bbsvc /var/lib/bbtest\n' > $d/DEBIAN/postinst
chmod 755 $d/DEBIAN/postinst; dpkg-deb --root-owner-group -b $d /tmp/bbtest.deb
"""


def test_a_package_installs_with_its_owners_and_cannot_reach_the_host(bluebox_bin, home):
    image = debian_image()
    name = f"bvm-{os.getpid()}-c"
    lis = Listener("0.0.0.0")
    script = MAKE_DEB.replace("GW", gateway()).replace("PORT", str(lis.port))
    content = "\n".join(f"          {line}" for line in script.strip().splitlines())
    new(bluebox_bin, home, name, f"""\
base: {image}
backend: uml
network: bridge
pkgmgr: apt
packages: [sudo, libcap2-bin]
blueprint:
  write_files:
    - path: /tmp/mkdeb.sh
      content: |
{content}
  runcmd:
    - bash /tmp/mkdeb.sh
    - dpkg -i /tmp/bbtest.deb && rm -rf /tmp/bbtest.deb /tmp/mkdeb.sh /tmp/pkg
    - cp /bin/true /usr/local/bin/bbcap && setcap cap_net_raw+ep /usr/local/bin/bbcap
""")
    img = image_of(home, name)
    try:
        r = bb(bluebox_bin, home, "build", name)
        out = r.stdout + r.stderr
        assert f"built {img}" in r.stdout, r
        ran, printed = guest_steps(out)
        assert ran >= 2 and printed == ran, out
        lines = out.splitlines()
        assert not [l for l in lines if l.startswith("REACHED-")], out
        assert len([l for l in lines if l.startswith("refused-")]) == 3, out
        assert lis.seen == []
        got = podman("run", "--rm", img, "sh", "-c",
                     "stat -c '%a %U %G' /usr/local/bin/bbsuid /var/lib/bbtest "
                     "/usr/bin/sudo; ls -A /tmp").stdout.split("\n")
        assert got[:3] == ["4755 root root", "755 bbsvc bbsvc", "4755 root root"], got
        assert got[3:] == [""], "the build left files in /tmp: " + repr(got)
        # A file capability set in a step is in the image (security.capability, written by
        # the file server; hostfs had no xattrs, so setcap failed).
        got = podman("run", "--rm", img, "getcap", "/usr/local/bin/bbcap").stdout.strip()
        assert got == "/usr/local/bin/bbcap cap_net_raw=ep", got
    finally:
        lis.close()
        podman("rmi", "-f", img, check=False)


def qemu_case(f):
    """Skipped where test_qemu.py is (no qemu, no cloud kernel, no bluebox-vmm)."""
    for m in QEMU_MARKS:
        f = m(f)
    return f


@qemu_case
def test_qemu_steps_run_in_its_vm_cannot_reach_the_host_and_keep_owners(bluebox_bin, home):
    """backend: qemu: each RUN step boots a qemu microVM (the guest's kernel, the build's
    capabilities), the host's loopback, slirp's host address and the podman gateway are out of
    its reach, and what the steps write keeps its owners and setuid bits in the image."""
    name = f"bvm-{os.getpid()}-q"
    lis = Listener("0.0.0.0")
    new(bluebox_bin, home, name, f"""\
base: {BUSYBOX}
backend: qemu
network: bridge
run:
  - echo "release=$(uname -r)"; grep CapEff /proc/self/status; true {name}
  - '{probe_script(lis.port, gateway())}'
  - {OWNERS_STEP}
""")
    img = image_of(home, name)
    try:
        r = bb(bluebox_bin, home, "build", name)
        out = r.stdout + r.stderr
        assert f"built {img}" in r.stdout, r
        assert "build: each RUN step runs in a qemu guest" in out
        assert guest_steps(out, QEMU_STEP_LINE) == (3, 3), out
        release = next(l.split("=", 1)[1] for l in out.splitlines() if l.startswith("release="))
        assert release != os.uname().release
        assert f"{QEMU_STEP_LINE}{release}," in out
        assert f"CapEff:\t{BUILD_CAPEFF}" in out
        for n in ("loopback", "slirp-host", "gateway"):
            assert f"refused-{n}" in out, out
        assert not [l for l in out.splitlines() if l.startswith("REACHED-")], out
        assert lis.seen == []
        assert owners_in(img) == OWNERS_SEEN
        got = podman("run", "--rm", img, "ls", "-a", "/").stdout.split()
        assert ".bluebox" not in got, "bluebox's mount points leaked into the image"
        built_in_guest_then_cached(bluebox_bin, home, name, img, "qemu guest", QEMU_STEP_LINE)
    finally:
        lis.close()
        podman("rmi", "-f", img, check=False)


@pytest.mark.parametrize("kind", ["uml", pytest.param("qemu", marks=QEMU_MARKS)])
def test_a_run_never_takes_the_build_steps_writable_root(bluebox_bin, home, kind):
    """BLUEBOX_BUILD=1 in a base image's ENV does not make a run a build step: the run's root
    is the image under a RAM layer (overlay), never the container's root served written with
    real owners (the launch pins BLUEBOX_BUILD=0)."""
    base = f"localhost/bluebox-test/bvm-env-{os.getpid()}-{kind}:latest"
    ctx = Path(tempfile.mkdtemp(prefix="bluebox-it-buildvm-base-", dir="/var/tmp"))
    (ctx / "Containerfile").write_text(f"FROM {BUSYBOX}\nENV BLUEBOX_BUILD=1\n")
    podman("build", "-q", "-t", base, str(ctx))
    shutil.rmtree(ctx, ignore_errors=True)
    name = f"bvm-{os.getpid()}-e{kind}"
    new(bluebox_bin, home, name, f"base: {base}\nbackend: {kind}\n")
    img = image_of(home, name)
    try:
        r = bb(bluebox_bin, home, "build", name)
        assert f"built {img}" in r.stdout, r
        r = bb(bluebox_bin, home, "run", name, "--", "sh", "-c",
               "awk '$2 == \"/\" {print $3}' /proc/mounts")
        assert r.returncode == 0, r
        assert r.stdout.split() == ["overlay"], r
    finally:
        podman("rmi", "-f", img, check=False)
        podman("rmi", "-f", base, check=False)
