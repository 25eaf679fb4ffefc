"""The /data file server for uml (src/fsd) driven by real programs.

UML's virtiofs and the host kernel's FUSE speak the same protocol, so tests/fsd/fsd_fuse_host
serves an export directory through src/fsd on /dev/fuse (mounted with default_permissions and
allow_other, as the guest mounts virtiofs). Non-root users work in it as on a real disk, and
the host side stays plain: every host file owned by the server's uid, no setuid/setgid bit, no
device node, FIFO or file capability. Needs root (mount) and /dev/fuse; no podman.
"""
import os
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

import pytest


# Not imported from conftest: with tests/integration in the same run, "conftest" is theirs.
BLUEBOX_BIN = os.environ.get("BLUEBOX_BIN") or str(
    Path(__file__).resolve().parents[2] / "build" / "bluebox")
HARNESS = Path(BLUEBOX_BIN).parent / "fsd_fuse_host"
OWN = "user.bluebox.own"
USER = ["setpriv", "--reuid=1000", "--regid=1000", "--clear-groups"]

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not os.path.exists("/dev/fuse") or not HARNESS.exists(),
    reason="needs root, /dev/fuse and build/fsd_fuse_host")


# The server's host identity: root, or an unprivileged uid with no capabilities (as
# bluebox-vmm's server may run); every host file must end up owned by it.
SERVER_IDS = {"root": (0, 0), "unprivileged": (1001, 1001)}


class Server:
    def __init__(self, export, mnt, ids=(0, 0)):
        self.export, self.mnt, self.proc, self.ids = export, mnt, None, ids

    def start(self):
        user = ["--user", "%d:%d" % self.ids] if self.ids != (0, 0) else []
        self.proc = subprocess.Popen([str(HARNESS)] + user + [str(self.export), str(self.mnt)],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        assert line.strip() == "ready", self.proc.stderr.read()

    def stop(self):
        if not self.proc:
            return
        subprocess.run(["umount", str(self.mnt)], check=False)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.terminate()
            self.proc.wait(timeout=10)
        err = self.proc.stderr.read()
        self.proc = None
        assert "Sanitizer" not in err and "runtime error" not in err, err
        return err


@pytest.fixture(params=sorted(SERVER_IDS))
def served(request):
    top = Path(tempfile.mkdtemp(prefix="bb-fsd-", dir="/var/tmp"))
    top.chmod(0o755)
    export, mnt = top / "export", top / "m" / "mnt"
    export.mkdir(mode=0o777)
    export.chmod(0o777)
    mnt.mkdir(parents=True)
    mnt.parent.chmod(0o755)
    ids = SERVER_IDS[request.param]
    os.chown(export, *ids)
    srv = Server(export, mnt, ids)
    srv.start()
    yield srv
    err = srv.stop() or ""
    shutil.rmtree(top)
    # Under build-asan the server runs with ASan/UBSan: any report fails the test.
    assert "Sanitizer" not in err and "runtime error" not in err, err


def as_user(script, cwd, env=None):
    e = {"PATH": os.environ["PATH"], "HOME": str(cwd), "LC_ALL": "C"}
    e.update(env or {})
    return subprocess.run(USER + ["bash", "-euxc", script], cwd=cwd, env=e, text=True,
                          capture_output=True)


def assert_host_plain(export, ids=(0, 0)):
    """Every host file: owned by the server, no setuid/setgid/sticky, no device, FIFO or
    socket, no security.* or trusted.* xattr."""
    for root, dirs, files in os.walk(export):
        for name in dirs + files:
            p = os.path.join(root, name)
            st = os.lstat(p)
            assert (st.st_uid, st.st_gid) == ids, p
            assert not st.st_mode & (stat.S_ISUID | stat.S_ISGID | stat.S_ISVTX), p
            assert stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode) or \
                stat.S_ISLNK(st.st_mode), p
            if not stat.S_ISLNK(st.st_mode):
                for x in os.listxattr(p):
                    assert x.startswith("user."), (p, x)


def guest_stat(path):
    st = os.lstat(path)
    return st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)


def test_uid_1000_works_like_a_real_disk(served):
    mnt = served.mnt
    r = as_user("""
        echo one > f; echo two >> f; test "$(cat f)" = "one
two"
        chmod 600 f
        mkdir d; echo in > d/inner; mv d/inner d/moved
        ln d/moved hard; ln -s f sym; test "$(cat sym)" = "one
two"
        (umask 077; echo p > private; mkdir pdir)
        mkdir -m 700 m700
        touch -d '2020-02-03 04:05:06' f
        cp -p f f.copy
        echo x > suid; chmod 4755 suid
        echo x > killed; chmod 6775 killed; echo more >> killed
        """, mnt)
    assert r.returncode == 0, r.stderr
    assert guest_stat(mnt / "f") == (1000, 1000, 0o600)
    assert guest_stat(mnt / "d") == (1000, 1000, 0o755)
    assert guest_stat(mnt / "d" / "moved") == (1000, 1000, 0o644)
    assert os.stat(mnt / "hard").st_nlink == 2
    assert os.readlink(mnt / "sym") == "f"
    assert guest_stat(mnt / "private") == (1000, 1000, 0o600)
    assert guest_stat(mnt / "pdir") == (1000, 1000, 0o700)
    assert guest_stat(mnt / "m700") == (1000, 1000, 0o700)
    assert guest_stat(mnt / "f.copy") == (1000, 1000, 0o600)
    assert int(os.stat(mnt / "f.copy").st_mtime) == int(os.stat(mnt / "f").st_mtime)
    assert guest_stat(mnt / "suid") == (1000, 1000, 0o4755)
    # A write drops setuid/setgid (the kernel sends a mode SETATTR first: no handle_killpriv).
    assert guest_stat(mnt / "killed") == (1000, 1000, 0o775)
    # The host: the server's owner, no setuid, and the mapped mode (owner rw always).
    host = served.export / "suid"
    st = os.stat(host)
    assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == served.ids + (0o755,)
    assert_host_plain(served.export, served.ids)


def test_git_and_npm_as_uid_1000(served):
    mnt = served.mnt
    r = as_user("""
        mkdir repo && cd repo && git init -q
        git config user.email t@example.invalid && git config user.name t
        echo hello > a && mkdir sub && echo b > sub/b
        git add -A && git commit -qm first
        echo more >> a && git commit -qam second
        test "$(git log --oneline | wc -l)" = 2
        git status --porcelain
        """, mnt)
    assert r.returncode == 0, r.stderr
    assert r.stdout == ""
    pkg = Path(tempfile.mkdtemp(prefix="bb-fsd-pkg-", dir="/var/tmp"))
    try:
        pkg.chmod(0o755)
        (pkg / "package.json").write_text(
            '{"name": "bb-fsd-demo", "version": "1.0.0", "main": "index.js"}\n')
        (pkg / "index.js").write_text("module.exports = 42;\n")
        subprocess.run(["npm", "pack", "--silent"], cwd=pkg, check=True, capture_output=True,
                       env={**os.environ, "HOME": str(pkg)})
        tgz = pkg / "bb-fsd-demo-1.0.0.tgz"
        tgz.chmod(0o644)
        r = as_user(f"""
            mkdir app && cd app && npm init -y >/dev/null
            npm install --offline --no-audit --no-fund {tgz}
            node -e 'process.exit(require("bb-fsd-demo") === 42 ? 0 : 1)'
            """, mnt, env={"npm_config_cache": str(mnt / ".npm")})
        assert r.returncode == 0, r.stdout + r.stderr
    finally:
        shutil.rmtree(pkg)
    assert guest_stat(mnt / "app" / "node_modules" / "bb-fsd-demo" / "index.js")[:2] == \
        (1000, 1000)
    assert_host_plain(served.export, served.ids)


def test_root_devices_fifos_and_xattrs_stay_inert_on_the_host(served):
    mnt, export = served.mnt, served.export
    os.mknod(mnt / "null", 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    os.mkfifo(mnt / "fifo", 0o644)
    (mnt / "prog").write_text("#!/bin/sh\n")
    # chown first: root's chown clears setuid/setgid (the kernel sends that as a mode change)
    # and the file capability (a REMOVEXATTR).
    os.chown(mnt / "prog", 5555, 6666)
    os.chmod(mnt / "prog", 0o6755)
    caps = bytes.fromhex("0100000200200000000000000000000000000000")
    os.setxattr(mnt / "prog", "security.capability", caps)
    os.setxattr(mnt / "prog", "user.x", b"v")
    os.setxattr(mnt / "prog", "trusted.t", b"t")
    st = os.lstat(mnt / "null")
    assert stat.S_ISCHR(st.st_mode) and st.st_rdev == os.makedev(1, 3)
    assert stat.S_ISFIFO(os.lstat(mnt / "fifo").st_mode)
    assert guest_stat(mnt / "prog") == (5555, 6666, 0o6755)
    assert os.getxattr(mnt / "prog", "security.capability") == caps
    assert sorted(os.listxattr(mnt / "prog")) == ["security.capability", "trusted.t", "user.x"]
    # The guest can neither see nor reach the record: its name maps elsewhere.
    with pytest.raises(OSError):
        os.getxattr(mnt / "prog", OWN)
    record = os.getxattr(export / "prog", OWN)
    os.setxattr(mnt / "prog", OWN, b"\1" + b"\0" * 23)
    assert os.getxattr(export / "prog", OWN) == record
    assert guest_stat(mnt / "prog") == (5555, 6666, 0o6755)
    with pytest.raises(OSError):
        os.getxattr(export / "prog", "security.capability")
    for name in ("null", "fifo", "prog"):
        st = os.lstat(export / name)
        assert stat.S_ISREG(st.st_mode), name
    assert stat.S_IMODE(os.lstat(export / "null").st_mode) == 0o600
    # ACLs are not supported: cp -p and friends fall back to chmod.
    with pytest.raises(OSError) as e:
        os.setxattr(mnt / "prog", "system.posix_acl_access", b"\2\0\0\0")
    assert e.value.errno == 95  # EOPNOTSUPP
    assert_host_plain(export, served.ids)


def test_ownership_survives_a_remount(served):
    mnt = served.mnt
    r = as_user("echo a > mine; chmod 640 mine; mkdir -m 750 dir; chmod 2750 dir", mnt)
    assert r.returncode == 0, r.stderr
    os.mknod(mnt / "tty", 0o620 | stat.S_IFCHR, os.makedev(5, 0))
    before = {n: os.lstat(mnt / n) for n in ("mine", "dir", "tty")}
    served.stop()
    served.start()
    for n, b in before.items():
        a = os.lstat(mnt / n)
        assert (a.st_uid, a.st_gid, a.st_mode, a.st_rdev) == \
            (b.st_uid, b.st_gid, b.st_mode, b.st_rdev), n
    # setgid directory: new entries take its group, new directories stay setgid.
    os.chown(mnt / "dir", 1000, 4242)
    r = as_user("cd dir && echo x > f && mkdir sub", mnt)
    assert r.returncode == 0, r.stderr
    assert guest_stat(mnt / "dir" / "f")[:2] == (1000, 4242)
    assert guest_stat(mnt / "dir" / "sub") == (1000, 4242, 0o2755)


def test_a_host_symlink_out_of_the_export_is_never_followed_by_the_server(served):
    """The server never follows a symlink: its target resolves on the client side (here the
    host kernel's FUSE client; on uml, in the guest's own tree), not against the export's host
    path. The mount sits one level deeper than the export, so ../outside exists only from the
    export's point of view."""
    top = served.export.parent
    (top / "outside").write_text("host secret\n")
    os.symlink("../outside", served.export / "esc")
    assert (served.export / "esc").read_text() == "host secret\n"
    assert os.readlink(served.mnt / "esc") == "../outside"
    with pytest.raises(FileNotFoundError):
        (served.mnt / "esc").read_text()
    with pytest.raises(FileNotFoundError):
        os.listdir(served.mnt / "esc")


def test_an_export_without_user_xattrs_keeps_todays_view():
    """ramfs has no user xattrs: files show as root's with their host modes, chmod of the
    permission bits works, and what would need the record (chown, setuid, device nodes) fails
    with EPERM; the server says so once on stderr."""
    top = Path(tempfile.mkdtemp(prefix="bb-fsd-", dir="/var/tmp"))
    export, mnt = top / "export", top / "mnt"
    export.mkdir()
    mnt.mkdir()
    subprocess.run(["mount", "-t", "ramfs", "ramfs", str(export)], check=True)
    srv = Server(export, mnt)
    try:
        srv.start()
        (mnt / "f").write_text("x\n")
        os.chmod(mnt / "f", 0o640)
        assert guest_stat(mnt / "f") == (0, 0, 0o640)
        assert stat.S_IMODE(os.stat(export / "f").st_mode) == 0o640
        os.mkdir(mnt / "d", 0o750)
        assert guest_stat(mnt / "d") == (0, 0, 0o750)
        for bad in (lambda: os.chmod(mnt / "f", 0o4755), lambda: os.chown(mnt / "f", 1000, 1000),
                    lambda: os.mknod(mnt / "c", 0o600 | stat.S_IFCHR, os.makedev(1, 3))):
            with pytest.raises(PermissionError):
                bad()
        assert not (export / "c").exists()
        assert_host_plain(export)
    finally:
        err = srv.stop()
        subprocess.run(["umount", str(export)], check=False)
        shutil.rmtree(top)
    assert err.count("no user xattrs") == 1, err
