"""The escape suite, security/escape-test.sh, on the uml and qemu backends (qemu with
BLUEBOX_QEMU_ACCEL=tcg here, set by the test): `standard` as root and `strict` as the rootless
test user must print `no escapes.`; and each check must FAIL when the protection it tests is
removed on purpose (security/weaken/: a weakened podman or bluebox on PATH), so no check
passes because it cannot fail. Needs root, podman, build/bluebox-vmm, and user-mode-linux or
qemu-system-x86 with a guest kernel (tests/integration/backends.py)."""
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

import backends
from test_podman_build import env  # noqa: F401  (session fixture)

REPO = Path(__file__).resolve().parents[2]
SUITE = REPO / "security" / "escape-test.sh"
WEAKEN = REPO / "security" / "weaken"

# Checks that fail on this branch for a known, tracked reason. Remove an entry once the fix
# is in: the suite then has to say `no escapes.`.
KNOWN_OPEN: dict[str, str] = {}

# The checks the suite skips on qemu for now, each quoting bluebox's refusal of what it needs
# (the suite asks bluebox, so a check runs as soon as qemu has it; then drop it here).
QEMU_NOT_YET = {
    "loopback": "network: bridge", "host-gateway": "network: bridge", "lan": "network: bridge",
    "metadata": "network: bridge", "dns-exfil": "network: bridge with allow:",
    "sni-fronting": "network: bridge with allow:", "secret-in-guest": "secrets:",
    "secret-cleartext": "secrets:",
    "token": "up (the agent)", "home-isolation": "up (the agent)", "pool": "up (the agent)",
    "fork": "forks", "data-limit": "data_limit",
}
# Skipped on qemu for good: the check is about uml's own console log.
QEMU_NEVER = {"vmm-log"}

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0 or shutil.which("podman") is None,
                       reason="the escape suite's integration tests need root and podman"),
]
UML = backends.skip_unless("uml")
# Each test is a whole run of the suite with fixtures of its own and its own sandbox names
# (BLUEBOX_ESCAPE_NAME), so xdist spreads them over the workers (conftest.py).
XDIST_SPREAD = True

LINE = re.compile(r"^(PASS|FAIL|WARN|SKIP)\s+(\S+)\s+(.*)$", re.M)


class Suite:
    """Runs escape-test.sh as root or as the rootless test user, from a world-readable
    copy of the binaries (the checkout may sit in a 0700 directory)."""

    def __init__(self, binary, user=None):
        self.user = user
        self.dir = Path(tempfile.mkdtemp(prefix="bluebox-it-esc-", dir="/var/tmp"))
        self.dir.chmod(0o755)
        self.tmp = self.dir / "tmp"
        self.tmp.mkdir(mode=0o755)
        bindir = self.dir / "bin"
        shutil.copytree(WEAKEN, bindir / "weaken")
        for prog in (Path(binary), Path(binary).parent / "bluebox-vmm",
                     Path(binary).parent / "bluebox-xstate.so",
                     Path(binary).parent / "bluebox-uname.so",
                     Path(binary).parent / "bluebox-vmm-weak",
                     Path(binary).parent / "bluebox-weak-peercred", SUITE):
            shutil.copy2(prog, bindir / prog.name)
        bindir.chmod(0o755)
        self.bin = bindir / "bluebox"
        self.suite = bindir / SUITE.name
        self.weaken = bindir / "weaken"
        if user:
            for p in (self.dir, self.tmp):
                shutil.chown(p, user)

    def __call__(self, mode, only=None, weaken=None, weak_bluebox=False, timeout=600,
                 backend="uml", launch=None):
        path = "/usr/local/bin:/usr/bin:/bin"
        extra = {"TMPDIR": str(self.tmp)}
        if launch:
            extra["BLUEBOX_LAUNCH"] = launch
        if backend == "qemu":
            extra["BLUEBOX_QEMU_ACCEL"] = backends.QEMU_ACCEL
            timeout = max(timeout, 1500)  # every check boots afresh (no up yet), under TCG
        if only:
            extra["BLUEBOX_ESCAPE_ONLY"] = only
        self.name = "esc-" + os.urandom(5).hex()  # this run's sandboxes: no_leftovers(self)
        extra["BLUEBOX_ESCAPE_NAME"] = self.name
        binary = self.bin
        if weaken:
            path = f"{self.weaken}:{path}"
            extra["BLUEBOX_WEAKEN"] = weaken
            extra["BLUEBOX_WEAKEN_VMM"] = str(self.dir / "bin" / "bluebox-vmm-weak")
        if weak_bluebox:
            binary = self.weaken / "bluebox"
            extra["BLUEBOX_WEAKEN_BLUEBOX"] = str(self.bin)
        e = os.environ
        if self.user:
            cmd = ["runuser", "-u", self.user, "--", "env", "-i", "PATH=" + path,
                   "HOME=" + e["BLUEBOX_TEST_USER_HOME"], "USER=" + self.user,
                   "LOGNAME=" + self.user,
                   "XDG_RUNTIME_DIR=" + e["BLUEBOX_TEST_USER_RUNTIME_DIR"],
                   "CONTAINERS_CONF=" + e["CONTAINERS_CONF"],
                   *(f"{k}={v}" for k, v in extra.items())]
            env = None
        else:
            cmd = []
            env = dict(e, PATH=f"{path}:{e.get('PATH', '')}", **extra)
        cmd += [str(self.suite), str(binary), mode, backend]
        r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout,
                           cwd="/", stdin=subprocess.DEVNULL)
        results = {}
        for status, check, msg in LINE.findall(r.stdout):
            results.setdefault(check, (status, msg))
        return r, results

    def close(self):
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def root_suite(env, bluebox_bin):  # noqa: F811
    s = Suite(bluebox_bin)
    yield s
    s.close()


@pytest.fixture
def user_suite(env, bluebox_bin):  # noqa: F811
    s = Suite(bluebox_bin, user=env["BLUEBOX_TEST_USER"])
    yield s
    s.close()


DIRECT_RUNC_ROOT = "/run/bluebox-direct/runc"


def no_leftovers(suite):
    """The containers the suite's last run left: podman's, and direct ones (runc without
    podman). Only that run's (its name prefix): other suites may run beside it."""
    r = subprocess.run(["podman", "ps", "-a", "--format", "{{.Names}}", "--filter",
                        "label=bluebox.sandbox"], capture_output=True, text=True)
    names = r.stdout.split()
    if shutil.which("runc"):
        r = subprocess.run(["runc", "--root", DIRECT_RUNC_ROOT, "list", "-q"],
                           capture_output=True, text=True)
        names += r.stdout.split()
    return [n for n in names if f"-{suite.name}-" in n]


def assert_no_escapes(r, results):
    out = r.stdout + r.stderr
    assert r.returncode in (0, 1), f"setup error (exit {r.returncode}):\n{out}"
    assert sum(s == "PASS" for s, _ in results.values()) >= 12, out
    fails = {c for c, (s, _) in results.items() if s == "FAIL"}
    assert fails <= KNOWN_OPEN.keys(), out
    if fails:
        assert r.returncode == 1 and f"{len(fails)} check(s) failed." in r.stdout, out
        pytest.xfail("; ".join(f"{c}: {KNOWN_OPEN[c]}" for c in sorted(fails)))
    assert r.returncode == 0 and r.stdout.rstrip().endswith("no escapes."), out


# What must run for real (not SKIP) in `standard` as root on every backend, with `run`.
MUST_RUN = ("kernel", "host-files", "symlinks", "dotdot", "setuid", "ro-root", "ro-mount",
            "vmm-fs", "agent-binary", "dev-kvm", "vmm-nnp", "vmm-seccomp", "vmm-caps",
            "vmm-netns", "vmm-limits", "vmm-uid", "fork-bomb", "data-snapshot", "data-export",
            "data-restore", "data-reset", "data-destroy", "root-disk", "hosts", "host-kernel",
            "image-user", "data-inuse", "tty-escape", "sparse", "run-log", "run-log-forge",
            "sdk-socket", "run-vmm", "lifeline")


# The checks a run's launch path (direct or podman) can change: how the VMM is started and
# confined, what it mounts, its network, what the guest sees of the host. The rest (the data
# commands, up and its agent, forks, the pool) do not go through a run's launch; the podman
# path's suite runs these, the direct launch's the whole suite.
# Both lists start from the VMM's confinement and what the guest reaches of the host's files.
VMM_AND_FILES = ("kernel", "host-files", "symlinks", "dotdot", "setuid", "ro-root", "ro-mount",
                 "vmm-fs", "agent-binary", "vmm-nnp", "vmm-seccomp", "vmm-caps", "vmm-netns",
                 "vmm-uid", "run-vmm", "root-disk")
LAUNCH_CHECKS = VMM_AND_FILES + ("dev-kvm", "vmm-limits", "fork-bomb", "hosts", "host-kernel",
                                 "image-user", "tty-escape", "run-log", "loopback",
                                 "host-gateway", "lan", "metadata", "secret-in-guest",
                                 "secret-cleartext", "vmm-log")
# The podman path on qemu leaves out the three longest checks under TCG, each about a part a
# launch path does not change on qemu, and each run on qemu in the direct launch's whole suite
# and through podman on uml:
# - fork-bomb (a sandbox of its own and 12 s of bomb): qemu's guest processes are its
#   kernel's, so a launch path changes only the VMM's cgroup limits, which vmm-limits reads
#   back from podman's container;
# - secret-in-guest (a 10 MiB dump of guest memory): what the guest holds is the VMM's and
#   the guest's doing; the launch-path part, the container's environment and argv as podman
#   shows them, is read on uml's podman path;
# - run-log (4 MiB through the serial line): the relay and the log are bluebox-vmm's and
#   bluebox's, the same under either launcher.
QEMU_LAUNCH_CHECKS = tuple(c for c in LAUNCH_CHECKS
                           if c not in ("fork-bomb", "secret-in-guest", "run-log"))
# What strict changes for a rootless user, on qemu (whose checks each boot afresh under TCG
# here); uml's strict suite runs whole.
STRICT_CHECKS = VMM_AND_FILES + ("data-export", "data-restore")


def assert_ran(backend, r, results, must_run):
    """Every check in must_run ran; on qemu, what was skipped is only what qemu does not have
    yet, and the skip quotes bluebox's refusal (or says it is uml's own)."""
    for c in must_run:
        assert c in results and results[c][0] != "SKIP", r.stdout
    if backend == "qemu":
        skipped = {c: msg for c, (s, msg) in results.items() if s == "SKIP"}
        assert set(skipped) <= QEMU_NOT_YET.keys() | QEMU_NEVER, r.stdout
        for c, msg in skipped.items():
            assert c in QEMU_NEVER or "qemu backend" in msg or "backend: uml" in msg, r.stdout


def test_escape_suite_standard_as_root(root_suite, backend):
    """The default launch: on uml and qemu the direct one (runc without podman,
    src/launch/direct.h), which the suite must have seen the VMM's container come from. A
    test run under BLUEBOX_LAUNCH=podman (the whole suite on the podman path) takes the whole
    escape suite there instead."""
    r, results = root_suite("standard", backend=backend)
    must_run = MUST_RUN + (("loopback", "secret-in-guest", "secret-cleartext")
                           if backend == "uml" else ())
    assert_ran(backend, r, results, must_run)
    assert results["fork-bomb"][0] == "PASS", r.stdout
    # a run's VMM came from the launch path this test run uses
    path = os.environ.get("BLUEBOX_LAUNCH") or "direct"
    assert f"({path} launch" in results["run-vmm"][1], r.stdout
    assert not no_leftovers(root_suite)
    assert_no_escapes(r, results)


def test_escape_suite_standard_as_root_through_podman(root_suite, backend):
    """The same suite with BLUEBOX_LAUNCH=podman: the podman path, kept for comparison and
    fallback, must hold the same line in every check a launch path can change (on qemu, all
    but the fork bomb: QEMU_LAUNCH_CHECKS)."""
    checks = LAUNCH_CHECKS if backend == "uml" else QEMU_LAUNCH_CHECKS
    r, results = root_suite("standard", backend=backend, launch="podman",
                            only=",".join(checks))
    must_run = MUST_RUN + (("loopback", "secret-in-guest", "secret-cleartext")
                           if backend == "uml" else ())
    assert_ran(backend, r, results, [c for c in must_run if c in checks])
    if backend == "uml":
        assert results["fork-bomb"][0] == "PASS", r.stdout
    assert "(podman launch" in results["run-vmm"][1], r.stdout
    assert not no_leftovers(root_suite)
    assert_no_escapes(r, results)


def test_escape_suite_strict_as_rootless_user(user_suite, backend):
    r, results = user_suite("strict", backend=backend,
                            only=",".join(STRICT_CHECKS) if backend == "qemu" else None)
    assert results.get("vmm-uid", ("?",))[0] == "PASS", r.stdout
    assert_ran(backend, r, results, ("kernel", "host-files", "symlinks", "dotdot", "ro-root",
                                     "ro-mount", "vmm-fs", "agent-binary", "vmm-uid"))
    assert_no_escapes(r, results)


# (BLUEBOX_WEAKEN, checks that must FAIL under it)
WEAKENED = [
    ("caps", "vmm-caps,run-vmm"),
    ("nnp", "vmm-nnp,run-vmm"),
    ("seccomp", "vmm-seccomp,run-vmm"),
    ("network", "vmm-netns,run-vmm"),
    # the host's loopback takes both: the VMM in the host's netns (bluebox-vmm's slirp also
    # refuses 10.0.2.2 -> 127.0.0.1) and the workload outside the VM
    ("native,network", "kernel,loopback"),
    ("pids", "vmm-limits,fork-bomb,run-vmm"),
    ("memory", "vmm-limits,run-vmm"),
    ("readonly", "ro-root"),
    ("ro-mounts", "ro-mount"),
    # the jail binds /.bluebox and the container's root read-only for UML, a second layer
    # under podman's :ro; jail-rw swaps in bluebox-vmm-weak, whose jail keeps podman's flags
    ("guest-rw,jail-rw", "agent-binary,root-disk"),
    ("kvm", "dev-kvm"),
    ("mount=TMP", "host-files,symlinks,dotdot"),
    # the data_limit image is still bound, but the VMM neither attaches nor caps it
    ("disk-cap", "data-limit"),
    # podman starts the uml VMM as the image's USER (4242): guest files in /data are its
    ("user", "image-user"),
    # the bundle without bluebox-uname.so: UML prints the host's uname in /proc/cpuinfo
    ("uname", "host-kernel"),
    # bluebox-vmm-weak without its network policy: bridge reaches the host, LAN and metadata
    ("net-open", "host-gateway,lan,metadata"),
    # bluebox-vmm-weak forwarding names the allowlist lacks upstream / not comparing SNI/Host
    ("dns-open", "dns-exfil"),
    ("sni-open", "sni-fronting"),
    # bluebox-vmm-weak putting each secret's real value in the guest's environment
    ("secret-env", "secret-in-guest"),
    # bluebox-vmm-weak putting a secret's value into plain HTTP to its host
    ("secret-cleartext", "secret-cleartext"),
    # bluebox-vmm-weak ignoring its lifeline: the killed run's VM runs on
    ("lifeline", "lifeline"),
]


@UML
@pytest.mark.parametrize("weaken,checks", WEAKENED, ids=[w for w, _ in WEAKENED])
def test_each_check_fails_without_its_protection(root_suite, weaken, checks):
    weaken = weaken.replace("TMP", str(root_suite.tmp))
    # On the direct launch these weakenings stop the suite's setup instead: its bridge
    # sandboxes are refused (direct_net: podman's config.json has no network namespace) and a
    # native entrypoint leaves the template's placeholder as the command. So that every check
    # can be seen failing they go through podman; run-vmm fails on the direct launch too
    # (test_run_vmm_fails_on_the_direct_launch_in_the_hosts_network below).
    refused = any(w in ("network", "native") for w in weaken.split(","))
    r, results = root_suite("standard", only=checks, weaken=weaken,
                            launch="podman" if refused else None)
    out = r.stdout + r.stderr
    assert r.returncode == 1, out
    for c in checks.split(","):
        assert results.get(c, ("missing",))[0] == "FAIL", out
    assert not no_leftovers(root_suite)


@UML
def test_run_vmm_fails_on_the_direct_launch_in_the_hosts_network(root_suite):
    """A podman that puts the container in the host's network namespace: a direct run takes
    podman's config.json as it is, and run-vmm, reading that run's VMM, fails."""
    r, results = root_suite("standard", only="run-vmm", weaken="network", launch="direct")
    out = r.stdout + r.stderr
    assert r.returncode == 1, out
    status, msg = results.get("run-vmm", ("missing", ""))
    assert status == "FAIL" and "direct launch" in msg and "network-namespace" in msg, out
    assert not no_leftovers(root_suite)


# qemu: the checks whose protection a weakened podman can remove, all in one run (a TCG boot
# is slow), must each FAIL there too. (The guest-side checks that stand on the file server
# alone on qemu — host-files, symlinks, dotdot — have no podman layer to remove.)
QEMU_WEAKENED = ("caps,nnp,seccomp,readonly,ro-mounts,kvm,pids,memory",
                 "vmm-caps,vmm-nnp,vmm-seccomp,ro-root,ro-mount,dev-kvm,vmm-limits")


@pytest.mark.backends("qemu")
def test_qemu_checks_fail_without_their_protection(root_suite, backend):
    weaken, checks = QEMU_WEAKENED
    r, results = root_suite("standard", only=checks, weaken=weaken, backend=backend)
    out = r.stdout + r.stderr
    assert r.returncode == 1, out
    for c in checks.split(","):
        assert results.get(c, ("missing",))[0] == "FAIL", out
    assert not no_leftovers(root_suite)


@UML
def test_strict_uid_check_fails_without_the_userns(user_suite):
    r, results = user_suite("strict", only="vmm-uid", weaken="userns")
    assert r.returncode == 1 and results["vmm-uid"][0] == "FAIL", r.stdout + r.stderr


@UML
def test_home_check_fails_against_a_home_blind_down(root_suite):
    r, results = root_suite("standard", only="home-isolation", weaken="home-blind",
                            weak_bluebox=True)
    assert r.returncode == 1, r.stdout + r.stderr
    assert results.get("home-isolation", ("missing",))[0] == "FAIL", r.stdout + r.stderr
    assert not no_leftovers(root_suite)


@UML
def test_data_checks_fail_against_tools_that_follow_symlinks(root_suite):
    checks = "data-snapshot,data-export,data-restore,data-reset,data-destroy"
    r, results = root_suite("standard", only=checks, weaken="follow-symlinks",
                            weak_bluebox=True)
    assert r.returncode == 1, r.stdout + r.stderr
    for c in checks.split(","):
        assert results.get(c, ("missing",))[0] == "FAIL", r.stdout + r.stderr


@UML
def test_token_check_fails_when_the_guest_holds_the_token(root_suite):
    """The guest never gets the token (only the agent's chain head); a bluebox that handed
    it over anyway (a guest process keeping it in memory) must fail [token] through the
    scan of every guest process's memory."""
    r, results = root_suite("standard", only="token", weaken="token-guest", weak_bluebox=True)
    out = r.stdout + r.stderr
    assert r.returncode == 1 and results.get("token", ("missing",))[0] == "FAIL", out
    assert "guest-memory" in results["token"][1], out


@UML
def test_sdk_socket_check_fails_without_peercred(root_suite):
    """serve checks every connection's SO_PEERCRED uid; the build without that check
    (bluebox-weak-peercred) must fail [sdk-socket]: another UID is answered once the socket
    has been chmod 0666."""
    r, results = root_suite("standard", only="sdk-socket", weaken="peercred", weak_bluebox=True)
    out = r.stdout + r.stderr
    assert r.returncode == 1 and results.get("sdk-socket", ("missing",))[0] == "FAIL", out
    assert "SO_PEERCRED" in results["sdk-socket"][1], out
