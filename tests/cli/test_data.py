"""reset, snapshot, restore and data export|import on the built binary: round trips,
hostile archives (tests/cli/hostile.py), traps a guest plants in /data, kill -9 at named
crash points (build/bluebox-crashtest), the up guard and the sandbox lock. No VM: the traps
are planted from here, as a guest would leave them in /data."""
import fcntl
import gzip
import io
import os
import re
import shutil
import socket
import stat
import subprocess
import tarfile
import threading
from pathlib import Path

import pytest

import hostile

CRASHTEST = Path(os.environ.get("BLUEBOX_BIN") or "build/bluebox").resolve().parent / \
    "bluebox-crashtest"
ROOT = os.geteuid() == 0


def tree(root):
    """Every path under root (bytes names): type, mode, mtime seconds, content or target,
    and an inode group for hard links."""
    root = os.fsencode(root)
    out, inodes = {}, {}
    for dirpath, dirnames, filenames in os.walk(root):
        for n in sorted(dirnames + filenames):
            p = os.path.join(dirpath, n)
            st = os.lstat(p)
            rel = os.path.relpath(p, root)
            mode = stat.S_IMODE(st.st_mode)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", os.readlink(p))
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("dir", mode, int(st.st_mtime))
            elif stat.S_ISREG(st.st_mode):
                group = inodes.setdefault(st.st_ino, len(inodes)) if st.st_nlink > 1 else None
                out[rel] = ("file", mode, int(st.st_mtime), open(p, "rb").read(), group)
            else:
                out[rel] = ("other", stat.S_IFMT(st.st_mode))
    return out


def fill(d):
    """A tree with everything a round trip keeps."""
    d = Path(d)
    (d / "docs" / "empty").mkdir(parents=True)
    (d / "docs" / "a.txt").write_text("alpha\n")
    (d / "bin.dat").write_bytes(os.urandom(300_000))
    (d / "secret").write_text("s\n")
    os.chmod(d / "secret", 0o600)
    (d / "run.sh").write_text("#!/bin/sh\n")
    os.chmod(d / "run.sh", 0o755)
    os.symlink("docs/a.txt", d / "rel-link")
    os.symlink("/nonexistent/abs", d / "dangling")
    os.link(d / "docs" / "a.txt", d / "hard")
    long_dir = d / ("l" * 200) / ("m" * 200)
    long_dir.mkdir(parents=True)
    (long_dir / ("n" * 200)).write_text("deep\n")
    open(os.path.join(os.fsencode(d), b"caf\xe9-\xff"), "wb").write(b"latin1 name\n")
    os.chmod(d / "docs", 0o750)
    for p in [d / "docs" / "a.txt", d / "bin.dat", d / "docs" / "empty", d / "docs"]:
        os.utime(p, (1600000000, 1600000000))


def snapshot_files(bb, name):
    d = bb.snapshots(name)
    return sorted(p.name for p in d.iterdir()) if d.exists() else []


@pytest.fixture
def box(bb):
    bb.new("box")
    return "box"


@pytest.mark.parametrize("flags,suffix,lister", [
    ((), ".tar.gz", ["tar", "-tzf"]),
    (("--zstd",), ".tar.zst", ["tar", "--zstd", "-tf"]),
])
def test_round_trip(bb, box, flags, suffix, lister):
    data = bb.data(box)
    fill(data)
    before = tree(data)
    r = bb("snapshot", box, "keep", *flags)
    assert r.rc == 0 and r.err == "", r
    archive = bb.snapshots(box) / ("keep" + suffix)
    assert r.out == f"{archive}\n"
    # A plain tarball that GNU tar reads, paths relative ("./…").
    if shutil.which(lister[0]) and (suffix != ".tar.zst" or shutil.which("zstd")):
        names = subprocess.run([*lister, str(archive)], capture_output=True, check=True).stdout
        assert b"./docs/a.txt\n" in names
    shutil.rmtree(data / "docs")
    (data / "new").write_text("after the snapshot\n")
    r = bb("restore", box, "keep", "-y")
    assert (r.rc, r.out) == (0, f"restored box from {archive}\n"), r
    assert tree(data) == before
    # The hard link came back as one file with two names.
    assert os.stat(data / "hard").st_ino == os.stat(data / "docs" / "a.txt").st_ino


def test_snapshot_labels_and_listing(bb, box):
    (bb.data(box) / "f").write_text("1")
    r = bb("snapshot", box)
    assert r.rc == 0, r
    assert re.fullmatch(r".*/\d{8}T\d{6}Z\.tar\.gz\n", r.out), r
    assert bb("snapshot", box, "typed.tar.gz").out.endswith("/typed.tar.gz\n")
    r = bb("snapshot", box, "../evil")
    assert r.rc == 1 and "invalid label" in r.err, r
    # Reusing a label asks; without a terminal that is a refusal, and the old one stays.
    old = (bb.snapshots(box) / "typed.tar.gz").read_bytes()
    (bb.data(box) / "f").write_text("2")
    r = bb("snapshot", box, "typed")
    assert r.rc == 1 and "pass --yes" in r.err, r
    assert (bb.snapshots(box) / "typed.tar.gz").read_bytes() == old
    r = bb.run_tty("snapshot", box, "typed", answer="y\n")
    assert r.rc == 0 and "Replace the existing snapshot typed?" in r.err, r
    # A zstd snapshot under a used label replaces the gzip one.
    assert bb("snapshot", box, "typed", "--zstd", "-y").rc == 0
    assert "typed.tar.gz" not in snapshot_files(bb, box)
    # -l: oldest first by time, not by name, with sizes.
    os.utime(bb.snapshots(box) / "typed.tar.zst", (1000, 1000))
    r = bb("snapshot", box, "-l")
    lines = r.out.splitlines()
    assert lines[0].split()[0] == "typed.tar.zst" and len(lines) == 2, r
    assert int(lines[0].split()[1]) == (bb.snapshots(box) / "typed.tar.zst").stat().st_size


def test_restore_references(bb, box, tmp_path):
    data = bb.data(box)
    r = bb("restore", box, "-y")
    assert r.rc == 1 and r.error_line() == \
        'no snapshots for "box"; take one with: bluebox snapshot box', r
    (data / "v").write_text("1")
    bb("snapshot", box, "one")
    (data / "v").write_text("2")
    bb("snapshot", box, "two")
    os.utime(bb.snapshots(box) / "two.tar.gz", (1000, 1000))  # "one" is now the newest
    assert bb("restore", box, "-y").rc == 0 and (data / "v").read_text() == "1"
    assert bb("restore", box, "two.tar.gz", "-y").rc == 0 and (data / "v").read_text() == "2"
    r = bb("restore", box, "three", "-y")
    assert r.error_line() == 'no snapshot "three" for box; list them with: bluebox snapshot box -l'
    copy = tmp_path / "elsewhere.tar.gz"
    shutil.copy(bb.snapshots(box) / "one.tar.gz", copy)
    assert bb("restore", box, str(copy), "-y").rc == 0 and (data / "v").read_text() == "1"
    r = bb("restore", box, str(tmp_path / "missing.tar"), "-y")
    assert r.error_line() == f"no archive at {tmp_path / 'missing.tar'}"
    # Asking: only when /data is not empty.
    r = bb("restore", box, "two")
    assert r.rc == 1 and "pass --yes" in r.err
    bb("reset", box, "-y")
    assert bb("restore", box, "two").rc == 0


def outside_state(tmp_path):
    # only what a hostile archive aims at in /tmp (tests/cli/hostile.py: *evil*): the rest
    # of /tmp is shared with whatever else runs (another pytest worker, another session)
    return sorted(n for n in os.listdir("/tmp") if "evil" in n), tree(tmp_path / "outside")


@pytest.mark.parametrize("case", sorted(hostile.cases()))
def test_hostile_archive(bb, box, tmp_path, case):
    data, why = hostile.cases()[case]
    archive = tmp_path / "in.tar"
    archive.write_bytes(data)
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "keep").write_text("outside\n")
    (bb.data(box) / "mine").write_text("before\n")
    before, outside = tree(bb.data(box)), outside_state(tmp_path)
    r = bb("restore", box, str(archive), "-y")
    leftovers = [n for n in os.listdir(bb.home / "data") if n != box]
    assert leftovers == []
    if why is None:
        assert r.rc == 0, r
        for rel, entry in tree(bb.data(box)).items():
            if entry[0] in ("file", "dir"):
                assert entry[1] & 0o6000 == 0, rel  # setuid/setgid dropped
        return
    assert r.rc == 1, r
    msg = r.error_line()
    assert msg.startswith(f"refusing {archive}: ") and why in msg, msg
    assert tree(bb.data(box)) == before
    assert outside_state(tmp_path) == outside


def test_setuid_dropped_modes_kept(bb, box, tmp_path):
    archive = tmp_path / "a.tar"
    archive.write_bytes(hostile.tar(hostile.d("./", 0o700), hostile.f("s", b"x", 0o6755),
                                    hostile.d("locked", 0o000), hostile.f("ro", b"y", 0o444)))
    assert bb("restore", box, str(archive), "-y").rc == 0
    d = bb.data(box)
    assert stat.S_IMODE(os.stat(d / "s").st_mode) == 0o755
    assert stat.S_IMODE(os.stat(d / "ro").st_mode) == 0o444
    assert stat.S_IMODE(os.stat(d / "locked").st_mode) == 0o700
    assert stat.S_IMODE(os.stat(d).st_mode) == 0o700


@pytest.fixture
def small_home(bb, tmp_path):
    """BLUEBOX_HOME on a tmpfs with 8 MiB and 400 inodes."""
    if not ROOT:
        pytest.skip("mounting a small tmpfs needs root")
    mnt = tmp_path / "small"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m,nr_inodes=400", "tmpfs", str(mnt)],
                   check=True)
    bb.home = mnt / "bbhome"
    bb.env["BLUEBOX_HOME"] = str(bb.home)
    yield mnt
    subprocess.run(["umount", str(mnt)], check=True)


@pytest.mark.parametrize("bomb,why", [
    (lambda: gzip.compress(hostile.bomb(1000)), "has room for"),
    # not zeros: a restore leaves zero pages as holes, so they cost no disk
    (lambda: gzip.compress(hostile.tar(hostile.f("ones", b"\x01" * (64 << 20)))), "MiB free"),
])
def test_tar_bomb_refused(bb, small_home, tmp_path, bomb, why):
    bb.new("box")
    (bb.data("box") / "mine").write_text("before\n")
    before = tree(bb.data("box"))
    archive = tmp_path / "bomb.tar.gz"
    archive.write_bytes(bomb())
    r = bb("restore", "box", str(archive), "-y")
    assert r.rc == 1 and why in r.err, r
    assert sorted(os.listdir(bb.home / "data")) == ["box"]
    assert tree(bb.data("box")) == before


@pytest.mark.parametrize("zstd", [False, True], ids=["gzip", "zstd"])
def test_snapshot_on_a_full_disk_fails_cleanly_and_keeps_the_old_one(bb, small_home, zstd):
    bb.new("box")
    (bb.data("box") / "r").write_bytes(os.urandom(2 << 20))  # incompressible
    assert bb("snapshot", "box", "keep", *(["--zstd"] if zstd else []), "-y").rc == 0
    (bb.data("box") / "r2").write_bytes(os.urandom(2 << 20))  # 8 MiB disk: no room for 4 more
    r = bb("snapshot", "box", "keep", *(["--zstd"] if zstd else []), "-y")
    assert r.rc == 1 and ("No space left" in r.err or "Write error" in r.err), r
    snaps = sorted(os.listdir(bb.home / "snapshots" / "box"))
    assert snaps == ["keep.tar.zst" if zstd else "keep.tar.gz"], snaps  # no .partial left


def plant_traps(data, outside):
    """What a hostile guest leaves in /data."""
    (outside / "host-secret").write_text("HOST SECRET\n")
    os.symlink(str(outside / "host-secret"), data / "to-secret")
    os.symlink(str(outside), data / "to-outside-dir")
    os.symlink("loop-b", data / "loop-a")
    os.symlink("loop-a", data / "loop-b")
    os.mkfifo(data / "fifo")
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(data / "sock"))
    s.close()
    if ROOT:
        os.mknod(data / "null", stat.S_IFCHR | 0o666, os.makedev(1, 3))
    (data / "plain").write_text("guest file\n")


def test_snapshot_does_not_read_through_traps(bb, box, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    plant_traps(bb.data(box), outside)
    r = bb("snapshot", box, "t")
    assert r.rc == 0, r
    kinds = "1 device, 1 fifo, 1 socket" if ROOT else "1 fifo, 1 socket"
    assert re.search(r"skipped \d entries that cannot be archived safely \(" + kinds, r.err), r
    with tarfile.open(bb.snapshots(box) / "t.tar.gz") as t:
        members = {m.name: m for m in t.getmembers()}
        assert members["./to-secret"].issym()
        assert members["./to-secret"].linkname == str(outside / "host-secret")
        assert members["./loop-a"].issym() and members["./to-outside-dir"].issym()
        assert "./fifo" not in members and "./sock" not in members and "./null" not in members
        for m in t.getmembers():
            if m.isfile():
                assert b"HOST SECRET" not in t.extractfile(m).read()


def test_export_keeps_holes_and_hard_links(bb, box, tmp_path):
    """A guest's 64 GiB sparse file and 2000 names of one 1 MiB file cost /data almost
    nothing; the export must not turn them into 64 GiB + 2 GiB on the host."""
    d = bb.data(box)
    with open(d / "sparse", "wb") as f:
        f.write(b"head")
        f.seek(64 << 30)
        f.write(b"tail")
    (d / "big").write_bytes(os.urandom(1 << 20))
    (d / "names").mkdir()
    for i in range(2000):
        os.link(d / "big", d / "names" / f"n{i}")
    dest = tmp_path / "export"
    r = bb("data", "export", box, str(dest))
    assert r.rc == 0, r
    st = os.stat(dest / "sparse")
    assert st.st_size == (64 << 30) + 4 and st.st_blocks * 512 < (1 << 20), st
    with open(dest / "sparse", "rb") as f:
        assert f.read(4) == b"head"
        f.seek(64 << 30)
        assert f.read() == b"tail"
    big = os.stat(dest / "big")
    assert big.st_nlink == 2001 and (dest / "big").read_bytes() == (d / "big").read_bytes()
    assert os.stat(dest / "names" / "n1999").st_ino == big.st_ino


def test_export_confined_and_counted(bb, box, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    plant_traps(bb.data(box), outside)
    (bb.data(box) / "sub").mkdir()
    (bb.data(box) / "sub" / "suid").write_text("x")
    os.chmod(bb.data(box) / "sub" / "suid", 0o4755)
    before = tree(outside)
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    r = bb("data", "export", box, str(tmp_path / "full"))
    assert r.error_line() == f"{tmp_path / 'full'} is not empty; export into a new or empty " \
        "directory"
    dest = tmp_path / "export"
    r = bb("data", "export", box, str(dest))
    assert r.rc == 0 and r.out == f"exported box's /data to {dest}\n", r
    assert "cannot be exported safely" in r.err and "1 fifo, 1 socket" in r.err
    assert os.readlink(dest / "to-secret") == str(outside / "host-secret")
    assert (dest / "plain").read_text() == "guest file\n"
    assert stat.S_IMODE(os.stat(dest / "sub" / "suid").st_mode) == 0o755
    assert not (dest / "fifo").exists() and not os.path.lexists(dest / "null")
    assert tree(outside) == before


def test_import_merges_without_writing_through(bb, box, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "target").write_text("untouched\n")
    data = bb.data(box)
    os.symlink(str(outside / "target"), data / "config")  # planted by the guest
    os.symlink(str(outside), data / "dir")
    (data / "kept").write_text("guest\n")
    (data / "both").mkdir()
    (data / "both" / "old").write_text("old\n")
    src = tmp_path / "src"
    (src / "both").mkdir(parents=True)
    (src / "both" / "new").write_text("new\n")
    (src / "config").write_text("from the host\n")
    (src / "dir").mkdir()
    (src / "dir" / "evil").write_text("x")
    (src / "kept").write_text("host\n")
    os.mkfifo(src / "fifo")
    r = bb("data", "import", box, str(src))
    assert r.rc == 0 and r.out == f"imported {src} into box's /data\n", r
    assert "skipped 3 entries" in r.err and "1 fifo" in r.err, r
    assert (outside / "target").read_text() == "untouched\n"
    assert not (outside / "evil").exists()
    assert os.path.islink(data / "config") and os.path.islink(data / "dir")
    assert (data / "kept").read_text() == "host\n"
    assert sorted(os.listdir(data / "both")) == ["new", "old"]


def test_swapped_directory_is_never_followed(bb, box, tmp_path):
    """A directory swapped for a symlink (to a host directory with a secret) while snapshot
    and export run: whatever the interleaving, nothing of the host directory is read."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "f").write_text("HOST SECRET\n")
    data = bb.data(box)
    real = data / "d"
    real.mkdir()
    for i in range(50):
        (real / f"f{i}").write_text("guest\n")
    stop = threading.Event()

    def swap():
        while not stop.is_set():
            os.rename(data / "d", data / "d.real")
            os.symlink(str(outside), data / "d")
            os.unlink(data / "d")
            os.rename(data / "d.real", data / "d")

    t = threading.Thread(target=swap)
    t.start()
    try:
        for i in range(15):
            r = bb("snapshot", box, f"s{i}")
            assert r.rc == 0, r
            r = bb("data", "export", box, str(tmp_path / f"e{i}"))
            assert r.rc == 0, r
    finally:
        stop.set()
        t.join()
    for i in range(15):
        with tarfile.open(bb.snapshots(box) / f"s{i}.tar.gz") as tf:
            for m in tf.getmembers():
                if m.isfile():
                    assert b"HOST SECRET" not in tf.extractfile(m).read()
        for dirpath, _, files in os.walk(tmp_path / f"e{i}"):
            for n in files:
                assert b"HOST SECRET" not in open(os.path.join(dirpath, n), "rb").read()


def test_reset(bb, box):
    fill(bb.data(box))
    r = bb("reset", box)
    assert r.rc == 1 and "pass --yes" in r.err
    r = bb("reset", box, "-y")
    assert (r.rc, r.out) == (0, "reset box\n"), r
    assert os.listdir(bb.data(box)) == []
    assert bb("reset", box).rc == 0  # empty: no question


@pytest.mark.parametrize("cmd", [("reset", "box", "-y"), ("restore", "box", "x", "-y")])
def test_refused_while_up(bb, box, cmd):
    (bb.data(box) / "f").write_text("1")
    bb("snapshot", box, "x")
    bb.mark_up(box)
    before = tree(bb.data(box))
    r = bb(*cmd)
    assert r.error_line() == "box is up; bring it down first: bluebox down box"
    assert tree(bb.data(box)) == before


def test_writers_wait_for_the_lock(bb, box):
    (bb.data(box) / "f").write_text("1")
    lock = bb.home / "locks" / "box.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        p = subprocess.Popen([bb.bin, "reset", "box", "-y"], env=bb.env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        with pytest.raises(subprocess.TimeoutExpired):
            p.wait(timeout=1)
        assert (bb.data(box) / "f").exists()
    assert p.wait(timeout=20) == 0
    assert os.listdir(bb.data(box)) == []


def test_crash_points_absent_from_release(bb_bin):
    assert b"BLUEBOX_CRASH_AT" not in Path(bb_bin).read_bytes()
    assert b"BLUEBOX_CRASH_AT" in CRASHTEST.read_bytes()


def crash(bb, point, *args):
    p = subprocess.run([str(CRASHTEST), *args], env=dict(bb.env, BLUEBOX_CRASH_AT=point),
                       capture_output=True, stdin=subprocess.DEVNULL, timeout=60)
    assert p.returncode == -9, p
    return p


@pytest.mark.parametrize("point", ["snapshot-file-written", "snapshot-before-rename"])
def test_kill_during_snapshot(bb, box, point):
    data = bb.data(box)
    fill(data)
    assert bb("snapshot", box, "x").rc == 0
    old = (bb.snapshots(box) / "x.tar.gz").read_bytes()
    (data / "more").write_text("more\n")
    crash(bb, point, "snapshot", "box", "x", "-y")
    assert (bb.snapshots(box) / "x.tar.gz").read_bytes() == old
    assert "x.tar.gz.partial" in snapshot_files(bb, box)
    # The next snapshot cleans up; the old one still restores.
    assert bb("snapshot", box, "y").rc == 0
    assert snapshot_files(bb, box) == ["x.tar.gz", "y.tar.gz"]
    before = tree(data)
    assert bb("restore", box, "x", "-y").rc == 0
    assert "more" not in os.listdir(data) and len(tree(data)) == len(before) - 1


@pytest.mark.parametrize("point,committed", [
    ("restore-entry", False), ("restore-file-written", False),
    ("restore-before-swap", False), ("restore-after-swap", True),
])
def test_kill_during_restore(bb, box, point, committed):
    data = bb.data(box)
    fill(data)
    assert bb("snapshot", box, "x").rc == 0
    snap = tree(data)
    shutil.rmtree(data / "docs")
    (data / "changed").write_text("after\n")
    current = tree(data)
    crash(bb, point, "restore", "box", "x", "-y")
    assert tree(data) == (snap if committed else current)
    stale = [n for n in os.listdir(bb.home / "data") if n.startswith(".box.restore-")]
    assert len(stale) == 1
    # The next writer removes the staging; a retried restore completes.
    assert bb("restore", box, "x", "-y").rc == 0
    assert os.listdir(bb.home / "data") == ["box"]
    assert tree(data) == snap


def test_cleanup_leaves_another_sandboxs_staging_alone(bb, box):
    """Names may contain dots: box's cleanup must not take box.restore-x's staging."""
    bb.new("box.restore-x")
    other = bb.home / "data" / ".box.restore-x.restore-0123abcd"
    other.mkdir()
    (other / "new").mkdir()
    mine = bb.home / "data" / ".box.restore-89abcdef"  # left by a crash: cleaned
    mine.mkdir()
    assert bb("reset", box, "-y").rc == 0
    assert other.is_dir() and not mine.exists()


def test_data_usage(bb, box):
    r = bb("data", "copy", box, "/tmp/x")
    assert r.rc == 2 and "export or import" in r.err, r
    r = bb("data", "import", box, "/nonexistent-dir")
    assert r.rc == 1 and "is not a directory" in r.err, r


DEEP = 100_000
# seconds per command over the DEEP chain; a hang guard only. Removing the chain is 100000
# directory removals, and on an ext4 mounted with discard (CI's) each frees its block with a
# synchronous discard: one command took 114-161 s under load here (perf: in submit_bio_wait).
DEEP_BUDGET = 600


def plant_chain(root, depth=DEEP, name="d"):
    """A directory chain depth levels deep, as a guest can make with relative mkdirs, and
    a file at its bottom."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(depth):
            os.mkdir(name, dir_fd=fd)
            nfd = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = nfd
        os.close(os.open("bottom", os.O_WRONLY | os.O_CREAT, dir_fd=fd))
    finally:
        os.close(fd)


@pytest.mark.tmpfs
def test_deep_chain_planted_in_data(bb, box, tmp_path):
    """100000 nested directories planted in /data (recursive walks ran out of stack or fds:
    snapshot crashed, export failed half done, reset left the old /data in its staging and
    every later reset failed on it). Snapshot and export take the tree down to the longest
    path a restore can open and count the rest as skipped; reset removes it all.
    Each command walks 100000 directories: on a loaded 2-core machine one took 25-37 s (and
    a removal of the chain far more), so each gets DEEP_BUDGET, not bb's 20 s default (this
    is not a speed test)."""
    try:
        (bb.data(box) / "plain").write_text("kept\n")
        plant_chain(bb.data(box))
        r = bb("snapshot", box, "deep", timeout=DEEP_BUDGET)
        assert r.rc == 0, r
        assert "skipped 1 entry that cannot be archived safely (1 nested too deeply)" in r.err, r
        with tarfile.open(bb.snapshots(box) / "deep.tar.gz") as t:
            names = t.getnames()
        assert "./plain" in names
        assert max(len(n) for n in names) == len("./") + 4095
        dest = tmp_path / "export"
        r = bb("data", "export", box, str(dest), timeout=DEEP_BUDGET)
        assert r.rc == 0, r
        assert "skipped 1 entry that cannot be exported safely (1 nested too deeply)" in r.err, r
        assert (dest / "plain").read_text() == "kept\n"
        depth, p = 0, os.open(dest, os.O_RDONLY)
        while "d" in os.listdir(p):
            n = os.open("d", os.O_RDONLY, dir_fd=p)
            os.close(p)
            p, depth = n, depth + 1
        os.close(p)
        assert depth == 2048  # "d/" * 2047 + "d": 4095 bytes
        r = bb("reset", box, "-y", timeout=DEEP_BUDGET)
        assert (r.rc, r.out) == (0, "reset box\n"), r
        assert os.listdir(bb.data(box)) == []
        assert os.listdir(bb.home / "data") == [box]
        r = bb("restore", box, "deep", "-y", timeout=DEEP_BUDGET)
        assert r.rc == 0, r
        assert (bb.data(box) / "plain").read_text() == "kept\n"
    finally:
        # Whatever a failure left (the chain in /data, a reset's staging, the export, the
        # snapshot): coreutils rm copes with any depth, pytest's own rmtree of tmp_path
        # recurses and used to die on it.
        subprocess.run(["rm", "-rf", "--one-file-system", str(bb.home), str(tmp_path / "export")],
                       check=False)


# ---- sparse files ----------------------------------------------------------------------

SPARSE_SIZE = 4 << 30
SPARSE_BLOCKS = [0, 1 << 30, (3 << 30) + 12288, SPARSE_SIZE - 4096]  # 4 KiB of data at each


def make_sparse(path):
    """truncate -s 4G plus four 4 KiB blocks of random data: 16 KiB on disk."""
    subprocess.run(["truncate", "-s", "4G", str(path)], check=True)
    with open(path, "r+b") as f:
        for off in SPARSE_BLOCKS:
            f.seek(off)
            f.write(os.urandom(4096))


def allocated(path):
    return os.stat(path).st_blocks * 512


def data_map(path):
    """The (offset, end) data segments SEEK_DATA/SEEK_HOLE report."""
    out, at = [], 0
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        while at < size:
            try:
                data = os.lseek(fd, at, os.SEEK_DATA)
            except OSError:
                break
            hole = os.lseek(fd, data, os.SEEK_HOLE)
            out.append((data, hole))
            at = hole
    finally:
        os.close(fd)
    return out


def du_bytes(path):
    return int(subprocess.run(["du", "-s", "--block-size=1", str(path)], capture_output=True,
                              check=True, text=True).stdout.split()[0])


def segments(path):
    """The file's data segments with their bytes: two files with equal segments have equal
    content, as everything else in them is holes that read as zeros (a byte-wise cmp of two
    4 GiB files read 8 GiB and took most of these tests' minutes)."""
    out = []
    with open(path, "rb") as f:
        for start, end in data_map(path):
            f.seek(start)
            out.append((start, end, f.read(end - start)))
    return out


@pytest.mark.parametrize("flags", [(), ("--zstd",)], ids=["gzip", "zstd"])
def test_sparse_file_stays_sparse_through_snapshot_and_restore(bb, box, tmp_path, flags):
    """A guest's 4 GiB sparse file with 16 KiB of data: the snapshot holds the data and a map
    (not 4 GiB of zeros), and the restore gives back 16 KiB on disk with the holes where
    they were."""
    d = bb.data(box)
    make_sparse(d / "disk.img")
    before = segments(d / "disk.img")
    assert bb("snapshot", box, "s", *flags).rc == 0
    archive = next(bb.snapshots(box).iterdir())
    assert archive.stat().st_size < 256 << 10, archive.stat()
    os.unlink(d / "disk.img")
    r = bb("restore", box, "s", "-y")
    assert r.rc == 0, r
    assert os.stat(d / "disk.img").st_size == SPARSE_SIZE
    assert allocated(d / "disk.img") <= 64 << 10, os.stat(d / "disk.img")
    assert du_bytes(d) <= 128 << 10
    assert segments(d / "disk.img") == before


def test_restore_turns_zero_runs_into_holes(bb, box, tmp_path):
    """A plain (not sparse) entry of zeros with a little data, as an older snapshot or another
    tar wrote it: the zero pages are not written."""
    body = bytearray(64 << 20)
    body[5 << 20:(5 << 20) + 5] = b"hello"
    archive = tmp_path / "zeros.tar.gz"
    archive.write_bytes(hostile.gz(hostile.tar(hostile.f("z", bytes(body)))))
    assert bb("restore", box, str(archive), "-y").rc == 0
    z = bb.data(box) / "z"
    assert z.read_bytes() == bytes(body)
    assert allocated(z) <= 16 << 10, os.stat(z)


def test_import_keeps_holes(bb, box, tmp_path):
    src = tmp_path / "in"
    src.mkdir()
    make_sparse(src / "disk.img")
    r = bb("data", "import", box, str(src))
    assert r.rc == 0, r
    got = bb.data(box) / "disk.img"
    assert os.stat(got).st_size == SPARSE_SIZE and allocated(got) <= 64 << 10
    assert segments(got) == segments(src / "disk.img")


@pytest.fixture
def gib_home(bb, tmp_path):
    """BLUEBOX_HOME on a 1200 MiB tmpfs (pages are only used when written), so the free
    space a restore must leave (1 GiB here) is near."""
    if not ROOT:
        pytest.skip("mounting a tmpfs needs root")
    mnt = tmp_path / "gib"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1200m", "tmpfs", str(mnt)], check=True)
    bb.home = mnt / "bbhome"
    bb.env["BLUEBOX_HOME"] = str(bb.home)
    yield mnt
    subprocess.run(["umount", str(mnt)], check=True)


def test_sparse_restore_fits_a_small_disk(bb, gib_home, tmp_path):
    """4 GiB of holes restore onto a disk with 1.2 GiB: only the data counts."""
    bb.new("box")
    make_sparse(bb.data("box") / "disk.img")
    assert bb("snapshot", "box", "s").rc == 0
    r = bb("restore", "box", "s", "-y")
    assert r.rc == 0, r
    assert allocated(bb.data("box") / "disk.img") <= 64 << 10


def test_restore_leaves_a_margin_of_free_space(bb, gib_home, tmp_path):
    """With 1010 MiB free on a 1200 MiB disk, a restore of 8 MiB would leave less than the
    1 GiB it must keep free: refused, with what it needs and what is free, /data untouched."""
    bb.new("box")
    (bb.data("box") / "r").write_bytes(os.urandom(8 << 20))
    assert bb("snapshot", "box", "s").rc == 0
    (bb.data("box") / "mine").write_text("before\n")
    before = tree(bb.data("box"))
    fd = os.open(gib_home / "filler", os.O_WRONLY | os.O_CREAT)
    os.posix_fallocate(fd, 0, os.statvfs(gib_home).f_bavail * 4096 - (1010 << 20))
    os.close(fd)
    r = bb("restore", "box", "s", "-y")
    assert r.rc == 1, r
    msg = r.error_line()
    assert re.search(r"needs 9 MiB of disk and the disk holding /data has 10\d\d MiB free; "
                     r"a restore always leaves 1024 MiB of it free", msg), msg
    assert tree(bb.data("box")) == before
    assert sorted(os.listdir(bb.home / "data")) == ["box"]
    os.unlink(gib_home / "filler")
    assert bb("restore", "box", "s", "-y").rc == 0


def sparse_map_bomb(n):
    """One GNU sparse 1.0 entry whose map has n empty segments: 4 bytes each, ~100 KiB of
    gzip for 25 million, which libarchive reads whole (some 50 bytes of memory a segment)
    before the restore sees the entry."""
    m = f"{n}\n".encode() + b"0\n0\n" * n
    ti, body = hostile.sparse("s", 1000, [], data=b"")
    body = m + bytes(-len(m) % 512)
    ti.size = len(body)
    return hostile.gz(hostile.tar((ti, body)))


def test_sparse_map_bomb_refused_cleanly(bb, box, tmp_path, bb_bin):
    if b"__asan_init" in Path(bb_bin).read_bytes():
        pytest.skip("sanitizer builds do not cap a restore's memory")
    archive = tmp_path / "map-bomb.tar.gz"
    archive.write_bytes(sparse_map_bomb(25_000_000))
    (bb.data(box) / "mine").write_text("before\n")
    before = tree(bb.data(box))
    r = bb("restore", box, str(archive), "-y")
    assert r.rc == 1, r
    assert "the archive needs more than the 512 MiB of memory a restore may use" in \
        r.error_line(), r
    assert tree(bb.data(box)) == before
    assert sorted(os.listdir(bb.home / "data")) == [box]
