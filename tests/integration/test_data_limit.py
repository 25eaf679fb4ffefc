"""data_limit on real podman and uml: /data as a disk image of fixed size (disks/<name>.img).
The guest runs out of space at the limit, and guest root cannot make the host file bigger by
any route the VMM process has (hostfs on the image's path, a hostfs mount of its own,
truncate, fallocate, the raw block device): bluebox-vmm caps every VMM process with
RLIMIT_FSIZE before the workload starts. Also: persistence, reset, the clear refusals of the
host-side /data commands, changing data_limit, and rootless strict. Needs root, podman,
user-mode-linux and build/bluebox-vmm."""
import os
import subprocess

import pytest

from test_podman_build import env  # noqa: F401  (session fixture)
from test_runtime import IMAGE, UML, Home

MIB = 1 << 20

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="integration tests need root and podman"),
    UML,
]


def bluefile(limit="64M", extra=""):
    return (f"base: {IMAGE}\nbackend: uml\nram_mib: 256\n"
            + (f"data_limit: {limit}\n" if limit else "") + extra)


@pytest.fixture
def home(env, bluebox_bin):  # noqa: F811
    h = Home(bluebox_bin)
    yield h
    h.close()


def disk(h, name):
    return h.dir / "home" / "disks" / f"{name}.img"


def made(h, limit="64M", extra="", name=None):
    name = h.sandbox(name or f"dl-{os.getpid()}", bluefile(limit, extra))
    r = h("build", name)
    assert r.returncode == 0, r
    want = f"/data rw, {limit} disk" if limit else "/data rw · "
    assert want in r.stdout.decode(), r  # the posture line says so
    return name


def sh(h, name, script, **kw):
    """The script in the guest, its stderr in its stdout (in order)."""
    return h("run", name, "--", "sh", "-c", "exec 2>&1; " + script, **kw)


def host_usage(path):
    st = os.stat(path)
    return st.st_size, st.st_blocks * 512


def test_data_limit_holds_and_persists(home):
    name = made(home)
    img = disk(home, name)
    assert host_usage(img)[0] == 64 * MIB
    assert os.stat(img).st_mode & 0o777 == 0o600
    r = sh(home, name, "echo kept > /data/keep && sync && df -k /data | tail -n1 && "
                       "dd if=/dev/zero of=/data/big bs=1M count=200; echo dd=$?; "
                       "cat /data/keep")
    out = r.stdout.decode()
    assert r.returncode == 0, r
    assert "No space left on device" in out and "dd=1" in out, out
    total_kib = int(out.splitlines()[0].split()[1])
    assert 48 * 1024 < total_kib <= 64 * 1024, out
    assert out.rstrip().endswith("kept"), out
    size, used = host_usage(img)
    assert size == 64 * MIB and used <= 65 * MIB, (size, used)
    # the next run has the same disk; guest ownership is real ext4 metadata
    r = sh(home, name, "cat /data/keep; rm /data/big; "
                       "echo a:x:1000:1000::/:/bin/sh >> /etc/passwd; mkdir /data/u && chown 1000:1000 /data/u && "
                       "su a -c 'echo mine > /data/u/f' && echo ok")
    assert r.returncode == 0 and r.stdout.decode().split() == ["kept", "ok"], r
    r = sh(home, name, "stat -c '%u %g' /data/u/f; cat /data/u/f")
    assert r.stdout.decode().split() == ["1000", "1000", "mine"], r
    # what the guest frees and discards is punched out of the host file
    assert host_usage(img)[1] > 48 * MIB  # big's blocks: not yet discarded
    assert sh(home, name, "fstrim /data").returncode == 0
    assert host_usage(img)[1] < 24 * MIB, host_usage(img)
    # nothing of this is in the directory beside it
    assert not home.data(name).exists() or not any(home.data(name).iterdir())


def test_guest_root_cannot_grow_the_host_file(home):
    name = made(home, "32M")
    img = disk(home, name)
    r = sh(home, name, """
        echo kept > /data/keep; sync
        umount /.bluebox/data.img
        dd if=/dev/zero of=/.bluebox/data.img bs=1M seek=100 count=10 conv=notrunc
        echo hostfs=$?
        truncate -s 1G /.bluebox/data.img; echo truncate=$?
        fallocate -o 40M -l 8M /.bluebox/data.img; echo fallocate=$?
        mkdir -p /mnt/h && mount -t hostfs none /mnt/h -o /.bluebox &&
            dd if=/dev/zero of=/mnt/h/data.img bs=1M seek=33 count=1 conv=notrunc
        echo mount=$?
        dd if=/dev/zero of=/dev/ubda bs=1M seek=32 count=4; echo raw=$?
        cat /data/keep""")
    out = r.stdout.decode()
    for step in ("hostfs", "truncate", "fallocate", "mount", "raw"):
        assert f"{step}=1" in out, out
    assert "File too large" in out and "No space left on device" in out, out
    assert out.rstrip().endswith("kept"), out
    size, used = host_usage(img)
    assert size == 32 * MIB and used <= 33 * MIB, (size, used, out)


def test_a_guest_user_cannot_read_the_raw_image(home):
    # rootless-standard shows the image to the guest as its owner's uid; the guest's users
    # never see the raw file behind /data's permissions: init covers its path
    name = made(home, "16M")
    r = sh(home, name, "echo a:x:1000:1000::/:/bin/sh >> /etc/passwd; "
                       "su a -c 'head -c 4096 /.bluebox/data.img | wc -c'")
    assert r.stdout.decode().split() == ["0"], r


def test_reset_makes_a_fresh_disk(home):
    name = made(home, "16M")
    assert sh(home, name, "echo x > /data/f").returncode == 0
    r = home("reset", name, "-y")
    assert r.returncode == 0 and not disk(home, name).exists(), r
    r = sh(home, name, "ls -A /data | grep -v lost+found | wc -l")
    assert r.returncode == 0 and r.stdout.decode().split() == ["0"], r
    assert disk(home, name).exists()


def test_snapshot_restore_export_import_go_through_the_guest(home, tmp_path):
    import tarfile
    name = made(home, "16M")
    assert sh(home, name, "mkdir -p /data/d && echo in > /data/d/f && "
                          "ln -s /etc/passwd /data/l && echo a:x:1000:1000::/:/bin/sh "
                          ">> /etc/passwd && chown 1000 /data/d/f").returncode == 0
    r = home("snapshot", name, "s1")
    assert r.returncode == 0, r
    arc = home.dir / "home" / "snapshots" / name / "s1.tar.gz"
    assert r.stdout.decode().strip() == str(arc)
    with tarfile.open(arc) as t:
        assert t.extractfile("./d/f").read() == b"in\n"
        assert t.getmember("./l").issym()
    assert not [p for p in arc.parent.iterdir() if p.name.startswith(".")]
    # restore replaces what is there
    assert sh(home, name, "rm -rf /data/d; echo junk > /data/junk").returncode == 0
    r = home("restore", name, "s1", "-y")
    assert r.returncode == 0, r
    r = sh(home, name, "cat /data/d/f; readlink /data/l; test -e /data/junk || echo no-junk")
    assert r.stdout.decode().split() == ["in", "/etc/passwd", "no-junk"], r
    # export into a new directory of yours; the link stays a link
    out = tmp_path / "out"
    r = home("data", "export", name, out)
    assert r.returncode == 0, r
    assert (out / "d" / "f").read_text() == "in\n" and os.readlink(out / "l") == "/etc/passwd"
    assert os.stat(out / "d" / "f").st_uid == os.getuid()
    # import merges
    src = tmp_path / "in"
    (src / "sub").mkdir(parents=True)
    (src / "sub" / "x").write_text("imported\n")
    r = home("data", "import", name, src)
    assert r.returncode == 0, r
    r = sh(home, name, "cat /data/sub/x /data/d/f")
    assert r.stdout.decode().split() == ["imported", "in"], r
    # a refused archive leaves /data as it was
    bad = tmp_path / "bad.tar"
    with tarfile.open(bad, "w") as t:
        t.addfile(tarfile.TarInfo("../escape"))
    r = home("restore", name, bad, "-y")
    assert r.returncode == 1, r
    r = sh(home, name, "cat /data/sub/x; ls -A /data | grep -c bluebox-unpack")
    assert r.stdout.decode().split() == ["imported", "0"], r
    assert os.stat(disk(home, name)).st_size == 16 * MIB


def test_data_commands_refuse_while_up(home):
    name = made(home, "16M")
    r = home("up", name)
    assert r.returncode == 0, r
    try:
        r = home("snapshot", name, "s1")
        assert r.returncode == 1 and b"is up; bring it down first" in r.stderr, r
    finally:
        home("down", name)


def test_data_limit_grows_and_never_shrinks(home):
    name = made(home, "16M")
    bf = home.dir / "home" / "sandboxes" / name / "Bluefile"
    assert sh(home, name, "echo kept > /data/keep").returncode == 0
    # a larger limit: the host lengthens the file, the guest grows its file system into it
    bf.write_text(bluefile("32M"))
    r = sh(home, name, "cat /data/keep; df -k /data | tail -n1; "
                       "dd if=/dev/zero of=/data/big bs=1M count=64 2>/dev/null; "
                       "du -k /data/big")
    out = r.stdout.decode().split("\n")
    assert r.returncode == 0 and out[0] == "kept", r
    assert 24 * 1024 < int(out[1].split()[1]) <= 32 * 1024, r
    assert 20 * 1024 < int(out[2].split()[0]) < 32 * 1024, r  # more than 16M fit now
    assert os.stat(disk(home, name)).st_size == 32 * MIB
    # the cap follows the new size, and no further
    r = sh(home, name, "rm /data/big; umount /.bluebox/data.img; "
                       "truncate -s 64M /.bluebox/data.img; echo truncate=$?")
    assert "truncate=1" in r.stdout.decode(), r
    assert os.stat(disk(home, name)).st_size == 32 * MIB
    # a smaller one is refused, with what to do
    bf.write_text(bluefile("16M"))
    r = sh(home, name, "true")
    err = r.stderr.decode()
    assert r.returncode == 1 and "disk image of 32M, but data_limit is now 16M" in err, r
    assert "bluebox snapshot" in err and "bluebox reset" in err, r
    assert os.stat(disk(home, name)).st_size == 32 * MIB


def test_removing_or_adding_data_limit_is_refused_with_what_to_do(home):
    name = made(home, "16M")
    bf = home.dir / "home" / "sandboxes" / name / "Bluefile"
    assert sh(home, name, "true").returncode == 0
    bf.write_text(bluefile(None))
    r = sh(home, name, "true")
    assert r.returncode == 1 and 'put "data_limit: 16M" back' in r.stderr.decode(), r
    # reset switches to the other kind of /data
    assert home("reset", name, "-y").returncode == 0
    assert sh(home, name, "echo x > /data/f").returncode == 0
    assert (home.data(name) / "f").read_text() == "x\n"
    bf.write_text(bluefile("16M"))
    r = sh(home, name, "true")
    err = r.stderr.decode()
    assert r.returncode == 1 and "has files; move them out first" in err, r
    assert not disk(home, name).exists()


def test_destroy_data_and_rename_take_the_disk_along(home):
    name = made(home, "16M")
    assert sh(home, name, "echo x > /data/f").returncode == 0
    r = home("rename", name, name + "-2")
    assert r.returncode == 0, r
    home.names.append(name + "-2")
    assert not disk(home, name).exists() and disk(home, name + "-2").exists()
    r = home("destroy", name + "-2")
    assert r.returncode == 0 and str(disk(home, name + "-2")) in r.stdout.decode(), r
    assert disk(home, name + "-2").exists()
    r = home("new", name + "-2")
    assert r.returncode == 0, r
    r = home("destroy", name + "-2", "--data", "-y")
    assert r.returncode == 0 and not disk(home, name + "-2").exists(), r


def test_without_data_limit_nothing_changes(home):
    name = made(home, None)
    assert sh(home, name, "echo x > /data/f").returncode == 0
    assert (home.data(name) / "f").read_text() == "x\n"
    assert not (home.dir / "home" / "disks").exists()


@pytest.mark.parametrize("strict", [False, True], ids=["standard", "strict"])
def test_data_limit_rootless(env, bluebox_bin, strict):  # noqa: F811
    user = env["BLUEBOX_TEST_USER"]
    h = Home(bluebox_bin, user=user)
    try:
        extra = "readonly: true\n" + ("isolation: strict\n" if strict else "")
        name = made(h, "16M", extra, name=f"dls-{os.getpid()}-{int(strict)}")
        r = sh(h, name, "echo kept > /data/keep; dd if=/dev/zero of=/data/big bs=1M count=40;"
                        " umount /.bluebox/data.img;"
                        " truncate -s 1G /.bluebox/data.img; echo truncate=$?; cat /data/keep")
        out = r.stdout.decode()
        assert "No space left on device" in out and "truncate=1" in out, r
        assert out.rstrip().endswith("kept"), out
        img = disk(h, name)
        sub = int(next(line.split(":")[1] for line in open("/etc/subuid")
                       if line.startswith(user + ":")))
        mine = int(subprocess.run(["id", "-u", user], capture_output=True, text=True).stdout)
        assert os.stat(img).st_uid == (sub if strict else mine)
        assert host_usage(img)[0] == 16 * MIB
        # growing reaches a file that belongs to a subordinate uid too
        (h.dir / "home" / "sandboxes" / name / "Bluefile").write_text(
            bluefile("32M", extra))
        r = sh(h, name, "cat /data/keep")
        assert r.stdout.decode().split() == ["kept"], r
        assert host_usage(img)[0] == 32 * MIB
        assert os.stat(img).st_uid == (sub if strict else mine)
    finally:
        h.close()

