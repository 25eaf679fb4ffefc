"""The guest's ownership through snapshot, restore and data export|import: bluebox's /data
file server keeps what the guest sees (owner, group, mode, the guest's own xattrs) in
user.bluebox.* attributes on the host files; every copy the data tools make carries those
and nothing else. No VM: the attributes are set from here, as the file server leaves them."""
import os
import re
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

import hostile

ROOT = os.geteuid() == 0
OWN = "user.bluebox.own"
# An opaque record (binary, with a NUL) as the file server writes it.
REC = {"f": b"\x01\x00\xe8\x03\x00\x00\xe8\x03\x00\x00\xa4\x81\x00\x00",
       "d": b"dir\x00agent 0700",
       "d/inner": b"inner\x00 4755 setuid in the guest",
       "big": bytes(range(256)) * 11,  # 2816 bytes: near what ext4 holds per inode
       ".": b"root of /data\x00agent"}


def xattrs(p):
    p = os.fsencode(p)
    return {n: os.getxattr(p, n, follow_symlinks=False)
            for n in sorted(os.listxattr(p, follow_symlinks=False))}


def xattr_tree(root):
    """Every path under root (and root itself, "."), with its user.* attributes."""
    root = Path(root)
    out = {".": xattrs(root)}
    for dirpath, dirnames, filenames in os.walk(root):
        for n in dirnames + filenames:
            p = Path(dirpath) / n
            out[str(p.relative_to(root))] = {} if p.is_symlink() else xattrs(p)
    return out


@pytest.fixture
def box(bb):
    bb.new("box")
    probe = bb.data("box") / ".probe"
    probe.write_text("")
    try:
        os.setxattr(probe, OWN, b"x")
    except OSError:
        pytest.skip("the file system under the test's BLUEBOX_HOME has no user xattrs")
    finally:
        probe.unlink()
    return "box"


def fill(data):
    """A /data as the file server leaves it: records on files, directories and the root, a
    guest xattr, a hard link, a symlink, and attributes no copy may carry."""
    (data / "d" / "inner").mkdir(parents=True)
    (data / "f").write_text("mine\n")
    (data / "big").write_text("b")
    (data / "d" / "inner" / "g").write_text("g\n")
    os.link(data / "f", data / "f-link")
    os.symlink("f", data / "sym")
    for rel, rec in REC.items():
        os.setxattr(data / rel, OWN, rec)
    os.setxattr(data / "f", "user.bluebox.x.user.mime", b"text/plain")
    os.setxattr(data / "d" / "inner" / "g", "user.other", b"not bluebox's")
    os.chmod(data / "d", 0o500)  # a user.* attribute takes write permission to set


def expected(data):
    """What a copy keeps: the user.bluebox.* attributes and nothing else."""
    want = {k: {n: v for n, v in a.items() if n.startswith("user.bluebox.")}
            for k, a in xattr_tree(data).items()}
    assert want["f"] == {OWN: REC["f"], "user.bluebox.x.user.mime": b"text/plain"}
    assert want["d/inner/g"] == {} and want["sym"] == {}
    return want


def wipe(data):
    os.chmod(data / "d", 0o700)
    for n in os.listdir(data):
        p = data / n
        shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()
    for n in os.listxattr(data):
        os.removexattr(data, n)


@pytest.mark.parametrize("flags,suffix", [((), ".tar.gz"), (("--zstd",), ".tar.zst")])
def test_snapshot_restore_keeps_guest_ownership(bb, box, flags, suffix):
    data = bb.data(box)
    fill(data)
    want = expected(data)
    r = bb("snapshot", box, "own", *flags)
    assert r.rc == 0 and r.err == "", r
    archive = bb.snapshots(box) / ("own" + suffix)
    if suffix == ".tar.gz":
        # GNU tar's records (SCHILY.xattr), once each, and only bluebox's.
        with tarfile.open(archive) as t:
            heads = {m.name: m.pax_headers for m in t.getmembers()}
        keys = [k for h in heads.values() for k in h if "xattr" in k]
        assert sorted(keys) == sorted(["SCHILY.xattr." + OWN] * len(REC) +
                                      ["SCHILY.xattr.user.bluebox.x.user.mime"]), heads
        assert not any("xattr" in k for k in heads["./sym"])
    wipe(data)
    assert xattr_tree(data) == {".": {}}
    r = bb("restore", box, "own", "-y")
    assert r.rc == 0 and r.err == "", r
    assert xattr_tree(data) == want
    assert os.stat(data / "f").st_ino == os.stat(data / "f-link").st_ino


def test_old_snapshot_without_xattrs_restores(bb, box, tmp_path):
    archive = tmp_path / "old.tar.gz"
    archive.write_bytes(hostile.gz(hostile.tar(hostile.d("./"), hostile.d("./a/"),
                                               hostile.f("./a/x", b"old\n"))))
    r = bb("restore", box, str(archive), "-y")
    assert r.rc == 0 and r.err == "", r
    assert (bb.data(box) / "a" / "x").read_text() == "old\n"
    assert xattr_tree(bb.data(box)) == {".": {}, "a": {}, "a/x": {}}


def test_hostile_xattrs_are_never_set(bb, box, tmp_path):
    archive = tmp_path / "hostile.tar"
    archive.write_bytes(hostile.xattr_archive())
    r = bb("restore", box, str(archive), "-y")
    assert r.rc == 0, r
    assert "ignored 18 extended attributes in " in r.err, r
    assert "never security.*, trusted.*, system.*" in r.err, r
    data = bb.data(box)
    got = xattr_tree(data)
    assert got["f"] == {OWN: b"kept"} and got["d"] == {OWN: b"kept"}, got
    assert got["hard"] == got["f"] and got["sym"] == {} and got["huge"] == {}
    assert len(got["many"]) == 64 and all(n.startswith("user.bluebox.x.n") for n in got["many"])
    if ROOT:  # root could have set these: nothing did
        for n in ("security.capability", "trusted.overlay.opaque", "trusted.bad",
                  "system.posix_acl_access"):
            for p in ("f", "d"):
                with pytest.raises(OSError):
                    os.getxattr(data / p, n)
    if shutil.which("getcap"):
        assert subprocess.run(["getcap", str(data / "f")], capture_output=True,
                              text=True).stdout == ""


def test_export_and_import_keep_guest_ownership(bb, box, tmp_path):
    data = bb.data(box)
    fill(data)
    want = expected(data)
    out = tmp_path / "export"
    r = bb("data", "export", box, str(out))
    assert r.rc == 0 and r.err == "", r
    assert xattr_tree(out) == want
    bb.new("other")
    r = bb("data", "import", "other", str(out))
    assert r.rc == 0 and r.err == "", r
    assert xattr_tree(bb.data("other")) == want


def test_restore_onto_a_file_system_without_xattrs_says_so_once(bb, box, tmp_path):
    """BLUEBOX_HOME on a ramfs, which has no user xattrs: the restore works and says once
    that the guest's ownership is gone."""
    bb.new("src")
    fill(bb.data("src"))
    r = bb("snapshot", "src", "own")
    assert r.rc == 0, r
    archive = bb.snapshots("src") / "own.tar.gz"
    saved = tmp_path / "own.tar.gz"
    shutil.copy(archive, saved)
    if not ROOT:
        pytest.skip("mounting a ramfs (no user xattrs) needs root")
    mnt = tmp_path / "ramfs"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "ramfs", "ramfs", str(mnt)], check=True)
    try:
        bb.home = mnt / "bbhome"
        bb.env["BLUEBOX_HOME"] = str(bb.home)
        bb.new("dest")
        r = bb("restore", "dest", str(saved), "-y")
        assert r.rc == 0, r
        lines = r.err.splitlines()
        assert len(lines) == 1 and "guest's owners and modes of 5 entries were not kept" in \
            lines[0] and "does not store user extended attributes" in lines[0], r
        assert (bb.data("dest") / "d" / "inner" / "g").read_text() == "g\n"
    finally:
        subprocess.run(["umount", str(mnt)], check=True)


def test_what_cannot_be_carried_is_counted(bb, box):
    """A name a SCHILY.xattr record cannot hold ("=" ends its key) is left out of a snapshot
    and said; the rest of the file's attributes are kept."""
    data = bb.data(box)
    (data / "f").write_text("x")
    os.setxattr(data / "f", "user.bluebox.x.a=b", b"1")
    os.setxattr(data / "f", OWN, b"kept")
    r = bb("snapshot", box, "eq")
    assert r.rc == 0, r
    assert "left out 1 extended attribute of the guest that bluebox cannot carry" in r.err, r
    os.removexattr(data / "f", "user.bluebox.x.a=b")
    os.removexattr(data / "f", OWN)
    r = bb("restore", box, "eq", "-y")
    assert r.rc == 0 and r.err == "", r
    assert xattrs(data / "f") == {OWN: b"kept"}


def test_data_role_reports_xattr_counts(bb, box, tmp_path):
    """The counts cross `podman unshare bluebox __data` (strict sandboxes of rootless users)
    in the role's one-line tally: ignored, then lost, after the skip counts."""
    archive = tmp_path / "h.tar"
    archive.write_bytes(hostile.xattr_archive())
    r = bb("__data", "restore", str(bb.data(box)), str(archive))
    assert r.rc == 0, r
    assert r.out.split()[0] == "ok" and r.out.split()[-2:] == ["18", "0"], r


def test_strict_restore_hands_over_and_keeps_guest_ownership(bb, box):
    """Under strict isolation (root: no podman unshare), what a restore writes goes to the
    sandbox's host id, and the guest's ownership rides along in the attributes."""
    if not ROOT:
        pytest.skip("a strict /data of another uid needs root here")
    bf = bb.bluefile(box)
    text = re.sub(r"(?m)^isolation:.*$", "isolation: strict", bf.read_text())
    assert "isolation: strict" in text
    bf.write_text(text)
    data = bb.data(box)
    fill(data)
    want = expected(data)
    assert bb("snapshot", box, "s").rc == 0
    wipe(data)
    r = bb("restore", box, "s", "-y")
    assert r.rc == 0 and r.err == "", r
    assert xattr_tree(data) == want
    for p in (data, data / "f", data / "d" / "inner"):
        st = os.lstat(p)
        assert (st.st_uid, st.st_gid) == (1, 1) and st.st_mode & 0o6000 == 0, p
