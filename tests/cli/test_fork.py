"""Forks without a VM: fork, diff, apply and discard on upper layers made by hand,
as the guest's overlayfs leaves them through bluebox's file server (a whiteout is a plain
file whose user.bluebox.own record says character device 0:0; an opaque directory carries
user.bluebox.x.trusted.overlay.opaque = y), including layers a hostile guest planted; and
the guards: no fork of a fork, a parent with forks cannot be reset, restored, renamed or
destroyed, a fork cannot be snapshotted, restored, reset, exported or renamed."""
import os
import socket
import stat
import struct
import subprocess
from pathlib import Path

import pytest

CRASHTEST = Path(os.environ.get("BLUEBOX_BIN") or "build/bluebox").resolve().parent / \
    "bluebox-crashtest"
OWN = "user.bluebox.own"
OPAQUE = "user.bluebox.x.trusted.overlay.opaque"


def record(mode, rdev=0, uid=0, gid=0):
    return struct.pack("<B3xIIIQ", 1, uid, gid, mode, rdev)


WHITEOUT = record(stat.S_IFCHR | 0o644, 0)


@pytest.fixture
def fork(bb):
    """Parent p (backend: uml) with a little /data, and its fork f."""
    bb.new("p")
    bf = bb.bluefile("p")
    bf.write_text(bf.read_text() + "backend: uml\n")
    r = bb("fork", "p", "f")
    assert r.rc == 0 and r.out == "p forked to f\n", r
    return bb


def upper(bb):
    return bb.data("f") / "upper"


def whiteout(path):
    path.write_bytes(b"")
    os.setxattr(path, OWN, WHITEOUT)


def tree(root):
    root = os.fsencode(root)
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for n in dirnames + filenames:
            p = os.path.join(dirpath, n)
            rel = os.path.relpath(p, root)
            st = os.lstat(p)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", os.readlink(p))
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("dir",)
            else:
                out[rel] = ("file", open(p, "rb").read())
    return out


def fill_parent(d):
    (d / "keep.txt").write_text("keep\n")
    (d / "mod.txt").write_text("old\n")
    (d / "del.txt").write_text("bye\n")
    (d / "dir").mkdir()
    (d / "dir" / "a").write_text("a\n")
    (d / "opq").mkdir()
    (d / "opq" / "x").write_text("x\n")
    (d / "opq" / "y").write_text("y\n")
    (d / "typechg").write_text("file\n")


def fill_upper(u):
    (u / "mod.txt").write_text("new\n")
    (u / "new.txt").write_text("fresh\n")
    os.setxattr(u / "new.txt", "user.bluebox.x.user.note", b"guest xattr")
    os.setxattr(u / "new.txt", "user.bluebox.x.trusted.overlay.origin", b"junk")
    whiteout(u / "del.txt")
    (u / "dir").mkdir()
    (u / "dir" / "c").write_text("c\n")
    (u / "opq").mkdir()
    os.setxattr(u / "opq", OPAQUE, b"y")
    (u / "opq" / "z").write_text("z\n")
    os.symlink("keep.txt", u / "typechg")
    (u / "newdir").mkdir()
    (u / "newdir" / "f").write_text("f\n")


EXPECTED_DIFF = """\
D del.txt
A dir/c
M mod.txt
A new.txt
A newdir
A newdir/f
D opq/x
D opq/y
A opq/z
M typechg
"""


# ---- fork and its refusals ---------------------------------------------------------------


def test_fork_makes_layers_and_copies_definition(fork):
    bb = fork
    assert (bb.sandbox_dir("f") / "fork-of").read_text() == "p\n"
    assert bb.bluefile("f").read_text() == bb.bluefile("p").read_text()
    assert sorted(os.listdir(bb.data("f"))) == ["upper", "work"]
    assert os.listdir(upper(bb)) == []
    ls = bb("ls")
    line = [x for x in ls.out.splitlines() if x.startswith("f ")][0]
    assert line.endswith("(fork of p)"), ls
    assert bb("diff", "f").out == ""
    assert bb.podman_calls() == []  # O(1): no podman, no copy of /data


def test_fork_is_constant_in_data_size(fork):
    bb = fork
    d = bb.data("p")
    for i in range(2000):
        (d / f"file{i}").write_text("x" * 100)
    r = bb("fork", "p", "g")
    assert r.rc == 0, r
    assert os.listdir(bb.data("g") / "upper") == []


def test_fork_refusals(fork):
    bb = fork
    r = bb("fork", "f", "g")
    assert r.rc != 0 and r.error_line() == \
        "f is itself a fork; apply or discard it before forking from it", r
    r = bb("fork", "p", "f")
    assert r.rc != 0 and "f already exists; pick another name" in r.err, r
    r = bb("fork", "p", "bad/name")
    assert r.rc != 0, r
    bb.new("k")  # krun, the default
    r = bb("fork", "k", "kf")
    assert r.rc != 0 and "forks need backend: uml" in r.err and "bluebox edit k" in r.err, r
    bb.new("lim")
    bf = bb.bluefile("lim")
    bf.write_text(bf.read_text() + "backend: uml\ndata_limit: 1G\n")
    r = bb("fork", "lim", "lf")
    assert r.rc != 0 and "data_limit" in r.err, r
    # A leftover data/<name> is not silently reused as layers.
    bb.mkdir(bb.home / "data" / "g")
    (bb.home / "data" / "g" / "stale").write_text("x")
    r = bb("fork", "p", "g")
    assert r.rc != 0 and "bluebox destroy --data g" in r.err, r
    assert not (bb.sandbox_dir("g")).exists()


def test_not_a_fork(fork):
    bb = fork
    for cmd in ("diff", "apply", "discard"):
        r = bb(cmd, "p")
        assert r.rc != 0 and r.error_line() == \
            "p is not a fork; make one with: bluebox fork p <fork>", (cmd, r)


@pytest.mark.parametrize("args,words", [
    (("reset", "p", "-y"), "p has forks (f); apply or discard them and destroy them before you "
                           "reset it"),
    (("restore", "p", "x", "-y"), "p has forks (f)"),
    (("rename", "p", "q"), "p has forks (f)"),
    (("destroy", "p", "-y"), "p has forks (f)"),
    (("reset", "f", "-y"), "f is a fork; drop its changes with: bluebox discard f"),
    (("restore", "f", "x", "-y"), "f is a fork of p"),
    (("snapshot", "f"), "f is a fork; apply it, then snapshot its parent"),
    (("data", "export", "f", "out"), "f is a fork; apply it"),
    (("data", "import", "f", "."), "f is a fork; apply it"),
    (("rename", "f", "g"), "f is a fork of p"),
])
def test_guards(fork, args, words):
    bb = fork
    (bb.data("p") / "file").write_text("x")
    r = bb(*args)
    assert r.rc != 0 and words in r.err, r
    assert (bb.data("p") / "file").read_text() == "x"
    assert (bb.sandbox_dir("f") / "fork-of").exists()


def test_refused_while_up(fork):
    bb = fork
    (upper(bb) / "n").write_text("n")
    bb.mark_up("f")
    for cmd in ("apply", "discard"):
        r = bb(cmd, "f", "-y")
        assert r.rc != 0 and "bluebox down f" in r.err, (cmd, r)
    assert (upper(bb) / "n").exists()
    bb.run_file("f").unlink()
    bb.mark_up("p")
    r = bb("apply", "f", "-y")
    assert r.rc != 0 and "bluebox down p" in r.err, r
    assert not (bb.data("p") / "n").exists()


def test_destroy_fork_then_parent_and_nuke(fork):
    bb = fork
    (upper(bb) / "n").write_text("n")
    r = bb("destroy", "f")
    assert r.rc == 0 and r.out == "destroyed f\n", r
    assert not bb.data("f").exists()
    assert bb("destroy", "p", "-y").rc == 0
    bb.new("p")
    bf = bb.bluefile("p")
    bf.write_text(bf.read_text() + "backend: uml\n")
    assert bb("fork", "p", "a").rc == 0
    r = bb("nuke", "-y")
    assert r.rc == 0 and "removed 2 sandboxes" in r.out, r


# ---- diff, apply, discard ----------------------------------------------------------------


def test_diff_apply_discard(fork):
    bb = fork
    fill_parent(bb.data("p"))
    fill_upper(upper(bb))
    r = bb("diff", "f")
    assert r.rc == 0 and r.out == EXPECTED_DIFF, r
    keep_ino = os.stat(bb.data("p") / "keep.txt").st_ino
    r = bb("apply", "f")  # no terminal, no -y: refused before anything changes
    assert r.rc != 0
    assert (bb.data("p") / "mod.txt").read_text() == "old\n"
    r = bb("apply", "f", "-y")
    assert r.rc == 0, r
    assert r.out == EXPECTED_DIFF + "applied 10 changes to p\n", r
    assert tree(bb.data("p")) == {
        b"keep.txt": ("file", b"keep\n"),
        b"mod.txt": ("file", b"new\n"),
        b"new.txt": ("file", b"fresh\n"),
        b"dir": ("dir",), b"dir/a": ("file", b"a\n"), b"dir/c": ("file", b"c\n"),
        b"opq": ("dir",), b"opq/z": ("file", b"z\n"),
        b"typechg": ("link", b"keep.txt"),
        b"newdir": ("dir",), b"newdir/f": ("file", b"f\n"),
    }
    # Untouched files are the same inodes (hard-linked staging), guest xattrs carried,
    # overlayfs's own not.
    assert os.stat(bb.data("p") / "keep.txt").st_ino == keep_ino
    assert os.stat(bb.data("p") / "keep.txt").st_nlink == 1
    names = os.listxattr(bb.data("p") / "new.txt")
    assert "user.bluebox.x.user.note" in names
    assert not [n for n in names if "overlay" in n]
    # The fork is left empty, its upper root carrying the parent's root record.
    assert os.listdir(upper(bb)) == [] and bb("diff", "f").out == ""
    assert bb("apply", "f", "-y").out == "f has no changes\n"
    assert [n for n in os.listdir(bb.home / "data") if n.startswith(".")] == []
    assert not (bb.sandbox_dir("f") / "applying").exists()
    # discard
    (upper(bb) / "junk").write_text("j")
    whiteout(upper(bb) / "keep.txt")
    assert bb("diff", "f").out == "A junk\nD keep.txt\n"
    r = bb("discard", "f", "-y")
    assert r.rc == 0 and r.out == "discarded 2 changes\n", r
    assert os.listdir(upper(bb)) == [] and os.listdir(bb.data("f") / "work") == []
    assert (bb.data("p") / "keep.txt").exists() and not (bb.data("p") / "junk").exists()


def test_root_record_follows_parent(fork):
    bb = fork
    rec = record(stat.S_IFDIR | 0o750, uid=1000, gid=1000)
    os.setxattr(bb.data("p"), OWN, rec)
    assert bb("fork", "p", "g").rc == 0
    assert os.getxattr(bb.data("g") / "upper", OWN) == rec
    # A chown of /data in the fork reaches the parent on apply.
    rec2 = record(stat.S_IFDIR | 0o700, uid=5, gid=5)
    os.setxattr(bb.data("g") / "upper", OWN, rec2)
    (bb.data("g") / "upper" / "x").write_text("x")
    assert bb("apply", "g", "-y").rc == 0
    assert os.getxattr(bb.data("p"), OWN) == rec2


def test_control_bytes_escaped_in_diff(fork):
    bb = fork
    u = upper(bb)
    (u / "a\nb").write_text("1")
    (u / "\x1b[31mred").write_text("2")
    (u / "back\\slash").write_text("3")
    r = bb("diff", "f")
    assert r.out == "A \\033[31mred\nA a\\012b\nA back\\134slash\n", r
    assert bb("apply", "f", "-y").rc == 0
    assert (bb.data("p") / "a\nb").read_text() == "1"


# ---- hostile upper layers ----------------------------------------------------------------


@pytest.fixture
def outside(tmp_path):
    o = tmp_path / "outside"
    o.mkdir()
    (o / "secret").write_text("host secret\n")
    return o


def outside_unchanged(o):
    return sorted(os.listdir(o)) == ["secret"] and (o / "secret").read_text() == "host secret\n"


def test_symlinks_are_never_followed(fork, outside):
    bb = fork
    d, u = bb.data("p"), upper(bb)
    # The parent has a symlink where the upper layer has a directory with files.
    os.symlink(outside, d / "into")
    (u / "into").mkdir()
    (u / "into" / "planted").write_text("p")
    # A symlink to the outside that the upper layer adds, and one it replaces a file with.
    (d / "file").write_text("f")
    os.symlink(outside / "secret", u / "file")
    os.symlink("/etc", u / "etc")
    # A whiteout of a parent entry that is a symlink to the outside.
    os.symlink(outside / "secret", d / "victim")
    whiteout(u / "victim")
    r = bb("apply", "f", "-y")
    assert r.rc == 0, r
    assert outside_unchanged(outside)
    assert (d / "into").is_dir() and not (d / "into").is_symlink()
    assert (d / "into" / "planted").read_text() == "p"
    assert os.readlink(d / "file") == os.fsdecode(outside / "secret")
    assert os.readlink(d / "etc") == "/etc"
    assert not os.path.lexists(d / "victim")


def test_upper_symlinked_directories_are_not_entered(fork, outside):
    bb = fork
    u = upper(bb)
    # The upper layer's own directory replaced by a symlink to the outside.
    os.symlink(outside, u / "sub")
    r = bb("apply", "f", "-y")
    assert r.rc == 0, r
    assert os.readlink(bb.data("p") / "sub") == os.fsdecode(outside)
    assert outside_unchanged(outside)
    assert bb("diff", "f").out == ""


def test_specials_skipped_and_forgeries(fork, outside):
    bb = fork
    u, d = upper(bb), bb.data("p")
    os.mkfifo(u / "fifo")
    s = socket.socket(socket.AF_UNIX)
    s.bind(os.fsdecode(u / "sock"))
    s.close()
    # A guest device node (the file server keeps it as a plain file): carried inert.
    (u / "dev").write_bytes(b"")
    os.setxattr(u / "dev", OWN, record(stat.S_IFCHR | 0o666, rdev=(1 << 8) | 3))
    # Forged whiteouts: a record on a directory, a malformed record, a symlink.
    (u / "keepdir").mkdir()
    os.setxattr(u / "keepdir", OWN, WHITEOUT)
    (u / "short").write_bytes(b"data")
    os.setxattr(u / "short", OWN, WHITEOUT[:10])
    (d / "keepdir").mkdir()
    (d / "keepdir" / "k").write_text("k")
    r = bb("apply", "f", "-y")
    assert r.rc == 0, r
    assert "skipped 2 entries that cannot be applied safely (1 fifo, 1 socket)" in r.err, r
    assert not os.path.lexists(d / "fifo") and not os.path.lexists(d / "sock")
    st = os.lstat(d / "dev")
    assert stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) & 0o7000 == 0
    assert (d / "keepdir" / "k").read_text() == "k"
    assert (d / "short").read_bytes() == b"data"
    assert outside_unchanged(outside)


def test_hard_links_are_copied_apart(fork, outside):
    bb = fork
    u, d = upper(bb), bb.data("p")
    (u / "one").write_text("same")
    os.link(u / "one", u / "two")
    if os.stat(outside).st_dev == os.stat(u).st_dev:
        os.link(outside / "secret", u / "hostlink")
    assert bb("apply", "f", "-y").rc == 0
    assert (d / "one").read_text() == "same" and (d / "two").read_text() == "same"
    assert os.stat(d / "one").st_ino != os.stat(d / "two").st_ino
    (d / "one").write_text("changed")
    assert outside_unchanged(outside)
    if (d / "hostlink").exists():
        assert os.stat(d / "hostlink").st_ino != os.stat(outside / "secret").st_ino


@pytest.fixture
def deep_cleanup(fork):
    """Python's rmtree (pytest's cleanup of old temp dirs) recurses: remove deep trees here."""
    yield
    subprocess.run(["rm", "-rf", str(fork.home / "data")], check=False)


@pytest.mark.tmpfs
def test_deep_tree(fork, deep_cleanup):
    bb = fork
    u = upper(bb)
    fd = os.open(u, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(100000):
            os.mkdir("d", dir_fd=fd)
            nfd = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = nfd
    finally:
        os.close(fd)
    # a hang guard only, as test_data's DEEP_BUDGET: apply removes the 100000 directories,
    # which took up to 161 s under load on CI's kind of disk
    r = bb("diff", "f", timeout=600)
    assert r.rc == 0 and "nested too deeply" in r.err, r
    r = bb("apply", "f", "-y", timeout=600)
    assert r.rc == 0 and "nested too deeply" in r.err, r
    assert (bb.data("p") / "d").is_dir()
    assert os.listdir(upper(bb)) == []


@pytest.mark.skipif(not CRASHTEST.exists(), reason="no bluebox-crashtest build")
@pytest.mark.parametrize("point,committed", [
    ("apply-mid-merge", False), ("restore-before-swap", False), ("restore-after-swap", True),
    ("apply-before-reset", True),
])
def test_kill_during_apply(fork, point, committed):
    bb = fork
    fill_parent(bb.data("p"))
    fill_upper(upper(bb))
    before = tree(bb.data("p"))
    p = subprocess.run([str(CRASHTEST), "apply", "f", "-y"],
                       env=dict(bb.env, BLUEBOX_CRASH_AT=point),
                       capture_output=True, stdin=subprocess.DEVNULL, timeout=60)
    assert p.returncode == -9, p
    after = tree(bb.data("p"))
    assert (bb.sandbox_dir("f") / "applying").exists()
    if committed:
        assert after[b"mod.txt"] == ("file", b"new\n") and b"del.txt" not in after
        # The layer may share files with the new /data: the next command on the fork
        # empties it before anything else (and a boot would refuse until then).
        r = bb("diff", "f")
        assert r.rc == 0 and r.out == "", r
        assert os.listdir(upper(bb)) == []
        assert os.stat(bb.data("p") / "mod.txt").st_nlink == 1
    else:
        assert after == before
        assert bb("diff", "f").out == EXPECTED_DIFF
    # Applying again finishes the job and cleans the staging.
    r = bb("apply", "f", "-y")
    assert r.rc == 0, r
    final = tree(bb.data("p"))
    assert final[b"mod.txt"] == ("file", b"new\n") and b"opq/x" not in final
    # As after a killed restore: the old /data left as staging goes with the next replace.
    staged = [n for n in os.listdir(bb.home / "data") if n.startswith(".")]
    assert staged == [] or (committed and staged[0].startswith(".p.restore-")), staged
    assert not (bb.sandbox_dir("f") / "applying").exists()
