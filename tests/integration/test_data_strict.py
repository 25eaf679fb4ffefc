"""/data operations of an `isolation: strict` sandbox for real: as root (entries handed to
UID 1) and as the rootless test user, where /data belongs to a subordinate UID the user
cannot read, and every operation runs inside `podman unshare` (bluebox __data). No VM: /data
is set up the way a strict run leaves it."""
import os
import shutil
import subprocess
import tarfile

import pytest

from test_podman_build import env  # noqa: F401  (session fixture)
from test_runtime import Home

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("podman") is None,
    reason="integration tests need root and podman",
)


def subuid(user):
    return int(next(line.split(":")[1] for line in open("/etc/subuid")
                    if line.startswith(user + ":")))


def strict_sandbox(h, name, owner):
    """A strict sandbox whose /data holds guest files owned by `owner`, mode 0600/0700."""
    h.sandbox(name, "isolation: strict\n")
    d = h.data(name)
    (d / "sub").mkdir()
    (d / "sub" / "private").write_text("guest secret\n")
    os.symlink("/etc/shadow", d / "link")
    os.mkfifo(d / "fifo")
    os.chmod(d / "sub" / "private", 0o600)
    os.chmod(d / "sub", 0o700)
    for p in (d, d / "sub", d / "sub" / "private", d / "link", d / "fifo"):
        os.lchown(p, owner, owner)
    return d


def owners(d):
    return {os.lstat(os.path.join(dp, n)).st_uid
            for dp, dns, fns in os.walk(d) for n in dns + fns} | {os.lstat(d).st_uid}


@pytest.mark.parametrize("rootless", [False, True])
def test_strict_data_operations(env, bluebox_bin, rootless):  # noqa: F811
    user = env["BLUEBOX_TEST_USER"] if rootless else None
    h = Home(bluebox_bin, user=user)
    try:
        owner = subuid(user) if rootless else 1
        name = f"strict-data-{os.getpid()}-{int(rootless)}"
        d = strict_sandbox(h, name, owner)

        r = h("snapshot", name, "s1")
        assert r.returncode == 0, r
        assert b"1 fifo" in r.stderr, r
        archive = h.dir / "home" / "snapshots" / name / "s1.tar.gz"
        with tarfile.open(archive) as t:
            assert t.extractfile("./sub/private").read() == b"guest secret\n"
            assert t.getmember("./link").issym()

        r = h("reset", name, "-y")
        assert r.returncode == 0, r
        assert os.listdir(d) == [] and owners(d) == {owner}

        r = h("restore", name, "s1", "-y")
        assert r.returncode == 0, r
        assert (d / "sub" / "private").read_text() == "guest secret\n"
        assert owners(d) == {owner}

        out = h.dir / "export"
        r = h("data", "export", name, out)
        assert r.returncode == 0, r
        mine = os.stat(h.dir).st_uid
        assert (out / "sub" / "private").read_text() == "guest secret\n"
        assert owners(out) == {mine}

        src = h.dir / "import"
        (src / "in").mkdir(parents=True)
        (src / "in" / "file").write_text("from the host\n")
        if user:
            shutil.chown(src, user)
            shutil.chown(src / "in", user)
            shutil.chown(src / "in" / "file", user)
        r = h("data", "import", name, src)
        assert r.returncode == 0, r
        assert (d / "in" / "file").read_text() == "from the host\n"
        assert owners(d) == {owner}

        # A hostile archive is refused the same way inside the user namespace.
        bad = h.dir / "bad.tar"
        with tarfile.open(bad, "w") as t:
            ti = tarfile.TarInfo("../escape")
            t.addfile(ti)
        if user:
            shutil.chown(bad, user)
        before = sorted(os.listdir(d))
        r = h("restore", name, bad, "-y")
        assert r.returncode == 1 and b"escapes the archive root" in r.stderr, r
        assert sorted(os.listdir(d)) == before
        assert not (h.dir / "home" / "escape").exists()
    finally:
        subprocess.run(["rm", "-rf", str(h.dir)])
