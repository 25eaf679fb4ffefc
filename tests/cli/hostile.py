"""Hostile tar archives, crafted with Python's tarfile (which writes any header asked of it).
Used by the restore tests (tests/cli/test_data.py) and written as the seed corpus of the
archive fuzz target (tests/fuzz/seed-corpus.py safetar).

cases() maps a name to (archive bytes, what the refusal says), or (bytes, None) for an
archive that restores."""
import gzip
import io
import tarfile


def _info(name, type=tarfile.REGTYPE, data=b"", mode=0o644, linkname="", devmajor=0):
    ti = tarfile.TarInfo(name)
    ti.type = type
    ti.mode = mode
    ti.mtime = 1700000000
    ti.linkname = linkname
    ti.size = len(data) if type == tarfile.REGTYPE else 0
    ti.devmajor = devmajor
    return ti, data


def f(name, data=b"x", mode=0o644):
    return _info(name, data=data, mode=mode)


def d(name, mode=0o755):
    return _info(name, tarfile.DIRTYPE, mode=mode)


def sym(name, target):
    return _info(name, tarfile.SYMTYPE, linkname=target)


def hard(name, target):
    return _info(name, tarfile.LNKTYPE, linkname=target)


def tar(*members, fmt=tarfile.PAX_FORMAT):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=fmt) as t:
        for ti, data in members:
            t.addfile(ti, io.BytesIO(data) if ti.type == tarfile.REGTYPE else None)
    return buf.getvalue()


def gz(data):
    return gzip.compress(data, mtime=0)


def sparse(name, realsize, segments, data=None, map_count=None):
    """A GNU sparse 1.0 entry (the pax form libarchive and GNU tar write): the map ("count\n"
    then "offset\nlength\n" per segment, padded to 512) precedes the segments' data.
    map_count overrides the count the map claims."""
    m = f"{len(segments) if map_count is None else map_count}\n"
    m += "".join(f"{o}\n{n}\n" for o, n in segments)
    m = m.encode()
    m += bytes(-len(m) % 512)
    if data is None:
        data = b"".join(bytes([0x41 + i % 26]) * n for i, (_, n) in enumerate(segments))
    ti, body = _info("GNUSparseFile.0/" + name, data=m + data)
    ti.pax_headers = {"GNU.sparse.major": "1", "GNU.sparse.minor": "0",
                      "GNU.sparse.name": name, "GNU.sparse.realsize": str(realsize)}
    return ti, body


def sparse_cases():
    many = [(2 * i, 1) for i in range(70000)]
    return {
        "sparse-ok": (tar(d("./"), sparse("s", 1 << 26, [(0, 5), (1 << 20, 5), ((1 << 26) - 4, 4)])),
                      None),
        "sparse-all-hole": (tar(sparse("h", 1 << 26, [(1 << 26, 0)])), None),
        "sparse-overlap": (tar(sparse("s", 1000, [(0, 100), (50, 100)])), "overlapping"),
        "sparse-unordered": (tar(sparse("s", 1000, [(500, 10), (0, 10)])), "overlapping"),
        "sparse-past-size": (tar(sparse("s", 100, [(0, 10), (95, 10)])), "more data than its size"),
        "sparse-huge-size": (tar(sparse("s", 1 << 62, [(0, 4)])), "more than the disk"),
        "sparse-long-map": (gz(tar(sparse("s", 1 << 20, many))), "more than 65536 segments"),
        "sparse-map-lies": (tar(sparse("s", 1000, [(0, 10)], map_count=1 << 30)), "cannot read"),
    }


# Extended attributes a restore must never set, beside one it keeps (user.bluebox.own): file
# capabilities, overlayfs's trusted.*, an ACL, SELinux labels, another user.* name, a name
# that is only the prefix, and one in libarchive's URL-encoded form.
XATTRS_HOSTILE = {
    "SCHILY.xattr.security.capability": "\x01\x00\x00\x02",
    "SCHILY.xattr.trusted.overlay.opaque": "y",
    "SCHILY.xattr.system.posix_acl_access": "\x02\x00\x00\x00",
    "SCHILY.xattr.user.other": "x",
    "SCHILY.xattr.security.selinux": "system_u:object_r:shadow_t:s0",
    "LIBARCHIVE.xattr.trusted%2Ebad": "eQ==",
    "SCHILY.xattr.user.bluebox": "no suffix",
    "SCHILY.xattr.user.bluebox.own": "kept",
}


def with_pax(ti_data, headers):
    ti, data = ti_data
    ti.pax_headers = dict(headers)
    return ti, data


def xattr_archive():
    """Restores, setting only user.bluebox.* on files and directories: 18 attributes are
    ignored (7 foreign names on each of f and d, the 65th on many, a value over 64 KiB, one
    on a symlink, one on a hard link)."""
    many = {f"SCHILY.xattr.user.bluebox.x.n{i:03}": "v" for i in range(65)}
    return tar(d("./"), with_pax(f("./f"), XATTRS_HOSTILE),
               with_pax(d("./d"), XATTRS_HOSTILE), with_pax(f("./many"), many),
               with_pax(f("./huge"), {"SCHILY.xattr.user.bluebox.x.huge": "h" * 65537}),
               with_pax(sym("./sym", "f"), {"SCHILY.xattr.user.bluebox.own": "on a symlink"}),
               with_pax(hard("./hard", "./f"), {"SCHILY.xattr.user.bluebox.own": "via link"}))


def bomb(n):
    return tar(d("./"), *[f(f"./f{i:06d}", b"") for i in range(n)])


def cases():
    ok_tree = tar(d("./"), d("./a"), f("./a/file", b"hello\n"), sym("./a/link", "file"),
                  hard("./a/hard", "./a/file"), f("./setuid", b"#!/bin/sh\n", 0o4755))
    return {
        "ok-tree": (ok_tree, None),
        "ok-tree-gz": (gz(ok_tree), None),
        "ok-no-root-entry": (tar(f("top", b"1"), f("deep/er/file", b"2")), None),
        "ok-empty": (tar(), None),
        "ok-xattrs-not-bluebox": (xattr_archive(), None),
        "absolute": (tar(d("./"), f("/tmp/bluebox-evil")), "is an absolute path"),
        "absolute-root": (tar(d("/")), "is an absolute path"),
        "dotdot-lead": (tar(f("../evil")), "escapes the archive root"),
        "dotdot-middle": (tar(d("a"), f("a/../../evil")), "escapes the archive root"),
        "dotdot-end": (tar(d("a"), d("a/..")), "escapes the archive root"),
        "dotdot-after-dot": (tar(f("./../evil")), "escapes the archive root"),
        "dotdot-alone": (tar(d("..")), "escapes the archive root"),
        "symlink-then-file": (tar(sym("l", "/tmp"), f("l/evil")),
                              "passes through the symlink"),
        "symlink-then-dir": (tar(sym("l", "/tmp"), d("l/evil")), "passes through the symlink"),
        "symlink-then-hardlink-name": (tar(f("x"), sym("l", "/tmp"), hard("l/evil", "x")),
                                       "passes through the symlink"),
        "symlink-then-hardlink-target": (tar(sym("l", "/etc"), hard("evil", "l/passwd")),
                                         "hard link through the symlink"),
        "hardlink-outside": (tar(hard("evil", "/etc/passwd")), "is an absolute path"),
        "hardlink-escape": (tar(hard("evil", "../x")), "escapes the archive root"),
        "hardlink-forward": (tar(hard("evil", "later"), f("later")), "not an earlier entry"),
        "hardlink-to-dir": (tar(d("dir"), hard("evil", "dir")), "not a regular file"),
        "hardlink-to-symlink": (tar(sym("l", "/etc/passwd"), hard("evil", "l")),
                                "not a regular file"),
        "dir-replaced-by-symlink": (tar(d("d"), sym("d", "/tmp"), f("d/evil")),
                                    "would replace a directory"),
        "file-replaced-by-symlink": (tar(f("x"), sym("x", "/etc/passwd")),
                                     "appears twice"),
        "symlink-replaced-by-file": (tar(sym("x", "/etc/passwd"), f("x")),
                                     "would replace a symlink"),
        "symlink-replaced-by-dir": (tar(sym("x", "/tmp"), d("x")), "would replace a symlink"),
        "name-too-long": (tar(f("a/" * 2100 + "x")),
                          "is longer than the 4095 bytes a path in /data can have"),
        "file-through-file": (tar(f("x"), f("x/y")), "which is not a directory"),
        "chardev": (tar(_info("null", tarfile.CHRTYPE, devmajor=1)),
                    "character device entries are not restored"),
        "blockdev": (tar(_info("sda", tarfile.BLKTYPE, devmajor=8)),
                     "block device entries are not restored"),
        "fifo": (tar(_info("pipe", tarfile.FIFOTYPE)), "fifo entries are not restored"),
        "root-is-file": (tar(f(".")), "the archive root is not a directory"),
        "root-is-symlink": (tar(sym(".", "/etc")), "the archive root is not a directory"),
        "truncated-gzip": (gz(ok_tree)[:-40], "cannot read"),
        "not-an-archive": (b"this is not a tar archive\n" * 40, "cannot read"),
        **sparse_cases(),
    }
