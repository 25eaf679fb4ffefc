"""Non-root guest users in /data and rw mounts on uml, end to end on real podman
and a real guest kernel, as root and as the rootless test user, standard and strict: the file
server (src/fsd) keeps the ownership and modes the guest sets in an xattr, so uid 1000 works
in a directory of its own there as on a real machine, what it set is still there on the next
boot, and on the host every file stays the sandbox's own, with no setuid or setgid bit. Needs
root, podman, user-mode-linux and build/bluebox-vmm."""
import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from test_guest_users import ADD_USER, MODES, as_user, build, made_home
from test_podman_build import env  # noqa: F401  (session fixture)
from test_runtime import UML, IMAGE, Home, privileged

OWN_XATTR = "user.bluebox.own"


@pytest.fixture(params=MODES, ids=["-".join(m) for m in MODES])
def mode_home(request, env, bluebox_bin):  # noqa: F811
    h = made_home(request, env, bluebox_bin)
    yield h
    h.close()


@pytest.fixture
def rw_dir():
    d = Path(tempfile.mkdtemp(prefix="bluebox-it-rw-", dir="/var/tmp"))
    d.chmod(0o777)  # the rootless test user's sandboxes write here too
    yield d
    shutil.rmtree(d, ignore_errors=True)


# What uid 1000 does in a directory of its own in /data (and the rw mount): everything a
# real machine allows, with the umask (027) applied and `mkdir -m` honoured.
DATA_WORK = r"""set -e
umask 027
for d in $DIRS; do
    echo hi > $d/f; echo more >> $d/f; chmod 600 $d/f
    mkdir -m 700 $d/m; mv $d/f $d/m/g; ln $d/m/g $d/hard; ln -s m/g $d/sym
    mkdir $d/u; : > $d/u/new; touch -d 2001-01-01 $d/u/new; cp -p $d/u/new $d/copy
    : > $d/run; chmod 4755 $d/run
    stat -c '%U %G %a %n' $d/m/g $d/m $d/u $d/u/new $d/hard $d/run
    stat -c '%y' $d/copy | cut -c1-10
    cat $d/sym
done
"""

STAT_AGAIN = ("for d in $DIRS; do stat -c '%U %G %a %n' $d/m/g $d/m $d/u $d/u/new $d/hard $d/run;"
              " stat -c '%y' $d/copy | cut -c1-10; cat $d/sym; done")


def expected(dirs):
    out = []
    for d in dirs:
        out += [f"u u 600 {d}/m/g", f"u u 700 {d}/m", f"u u 750 {d}/u", f"u u 640 {d}/u/new",
                f"u u 600 {d}/hard", f"u u 4755 {d}/run", "2001-01-01", "hi", "more"]
    return out


@UML
def test_a_guest_user_works_in_data_and_rw_mounts_and_it_lasts(mode_home, rw_dir):
    home = mode_home
    # strict refuses rw mounts: /data alone there
    rw = home.isolation == "standard"
    mounts = f"mounts:\n  - {{host: {rw_dir}, guest: /rw, mode: rw}}\n" if rw else ""
    name = build(home, "data", f"base: {IMAGE}\nram_mib: 256\n{mounts}"
                 f"run:\n  - {json.dumps(ADD_USER)}\n")
    dirs = ["/data/w"] + (["/rw/w"] if rw else [])
    prep = "; ".join(f"mkdir {d} && chown u:u {d}" for d in dirs)
    script = f"set -e; {prep}\n" + as_user("u", f"DIRS='{' '.join(dirs)}'\n" + DATA_WORK)
    r = home("run", name, "--", "sh", "-c", script)
    assert r.returncode == 0, r
    assert r.stdout.decode().splitlines() == expected(dirs), r

    # a new boot sees what the guest set: owners, modes, times, links
    r = home("run", name, "--", "sh", "-c", f"DIRS='{' '.join(dirs)}'; {STAT_AGAIN}")
    assert r.returncode == 0, r
    assert r.stdout.decode().splitlines() == expected(dirs), r

    # a snapshot keeps the guest's view: wiped in the guest, restored, the same again
    assert home("snapshot", name, "users").returncode == 0
    assert home("run", name, "--", "rm", "-rf", "/data/w").returncode == 0
    r = home("restore", name, "users", "-y")
    assert r.returncode == 0, r
    r = home("run", name, "--", "sh", "-c", f"DIRS=/data/w; {STAT_AGAIN}")
    assert r.returncode == 0, r
    assert r.stdout.decode().splitlines() == expected(["/data/w"]), r

    # on the host: the sandbox's own files, no setuid/setgid, the guest's view in an xattr
    assert privileged([home.data(name)]) == []
    if rw:
        # the rw directory is the test's; what the guest made in it is the sandbox's
        assert privileged([rw_dir / "w"]) == []
        data = home.data(name).stat()
        assert ((rw_dir / "w").stat().st_uid, (rw_dir / "w").stat().st_gid) == (
            data.st_uid, data.st_gid)
    run = home.data(name) / "w" / "run"
    assert run.stat().st_mode & 0o7777 == 0o755, oct(run.stat().st_mode)
    assert os.getxattr(run, OWN_XATTR)


@UML
def test_guest_root_owns_and_sets_any_mode_in_its_view_only(mode_home):
    """Guest root's chown to any id, setuid/setgid modes, a device node and a FIFO: all
    real in the guest (and across boots), none of it on the host."""
    home = mode_home
    name = build(home, "root", f"base: {IMAGE}\nram_mib: 256\n")
    r = home("run", name, "--", "sh", "-c",
             "set -e; cp /bin/busybox /data/suid; chown 1234:4321 /data/suid; "
             "chmod 6755 /data/suid; mknod /data/null c 1 3; mkfifo -m 640 /data/fifo; "
             "mkdir /data/dir; chmod 2775 /data/dir; chgrp 77 /data/dir; : > /data/dir/f; "
             "mkdir /data/dir/sub; stat -c '%u %g %a %F' /data/suid /data/null /data/fifo "
             "/data/dir /data/dir/f /data/dir/sub")
    want = ["1234 4321 6755 regular file", "0 0 644 character special file",
            "0 0 640 fifo", "0 77 2775 directory", "0 77 644 regular empty file",
            "0 77 2755 directory"]
    assert r.returncode == 0, r
    assert r.stdout.decode().splitlines() == want, r
    r = home("run", name, "--", "sh", "-c",
             "stat -c '%u %g %a %F' /data/suid /data/null /data/fifo /data/dir /data/dir/f "
             "/data/dir/sub; wc -c < /data/suid")
    assert r.returncode == 0, r
    out = r.stdout.decode().splitlines()
    assert out[:6] == want, r
    assert int(out[-1]) > 100000, r  # the copy's bytes, read back through the server
    data = home.data(name)
    assert privileged([data]) == []
    for f in ("null", "fifo"):
        assert (data / f).is_file() and not (data / f).is_symlink(), f


# 1,500 files and 30 directories made by root, then uid 1000's own: far more inodes than the
# 200 fds the server may keep here (BLUEBOX_FSD_MAX_FDS, a testing aid), so files' fds are
# closed and reopened by name all the time.
MANY_ROOT = r"""set -e
mkdir /data/many && cd /data/many
i=0; while [ $i -lt 30 ]; do mkdir d$i; j=0
  while [ $j -lt 50 ]; do echo $i.$j > d$i/f$j; j=$((j+1)); done; i=$((i+1)); done
mkdir w && chown u:u w
"""
MANY_USER = r"""set -e
cd /data/many/w
i=0; while [ $i -lt 300 ]; do echo $i > f$i; chmod 640 f$i; i=$((i+1)); done
mv f0 moved; ln f1 hard; rm f2
cd /data/many
find . -type f | wc -l
cat d*/f* | wc -l
ls -lR . | grep -c '^-'
cat w/moved w/hard w/f299
"""


@pytest.fixture
def root_home(env, bluebox_bin):  # noqa: F811
    """Root, standard: the server's fd cap does not depend on the mode."""
    h = Home(bluebox_bin)
    h.isolation = "standard"
    yield h
    h.close()


@UML
def test_more_files_than_the_server_keeps_fds(root_home):
    home = root_home
    name = build(home, "many", f"base: {IMAGE}\nram_mib: 256\n"
                 "env:\n  BLUEBOX_FSD_MAX_FDS: \"200\"\n"
                 f"run:\n  - {json.dumps(ADD_USER)}\n")
    r = home("run", name, "--", "sh", "-c", MANY_ROOT + as_user("u", MANY_USER), timeout=600)
    assert r.returncode == 0, r
    # 1500 + 300 - 1 (removed) + 1 (hard link), every line of every file read back
    assert r.stdout.decode().split() == ["1800", "1500", "1800", "0", "1", "299"], r
    r = home("run", name, "--", "sh", "-c",
             "env | grep -c BLUEBOX_FSD; stat -c '%U %a' /data/many/w/* | sort | uniq -c")
    assert r.stdout.decode().split() == ["0", "300", "u", "640"], r
