"""Forks end to end on uml, as root and as the rootless test user, standard and
strict: fork a sandbox, change /data in the fork's guest (the guest kernel's overlayfs over
the parent's /data, its upper layer kept by bluebox's file server), see the parent
untouched, diff on the host, apply, and see the parent's guest show exactly what the fork's
guest showed; discard; up/exec on a fork. Needs root, podman, user-mode-linux and
build/bluebox-vmm."""
import os

import pytest

from test_data_users import mode_home  # noqa: F401  (fixture)
from test_guest_users import build
from test_podman_build import env  # noqa: F401  (session fixture)
from test_runtime import UML, IMAGE, privileged

# What the parent's /data holds before the fork.
SEED = r"""set -e
cd /data
echo keep > keep.txt; echo old > mod.txt; echo bye > del.txt; echo r > ren.txt
echo k2 > keep2.txt; echo o > owned.txt
mkdir -p gone/inner && echo g > gone/inner/f
mkdir dir && echo a > dir/a
"""

# What the fork's guest does.
WORK = r"""set -e
cd /data
echo changed > mod.txt
rm del.txt
echo new > new.txt
mkdir -p newdir/sub && echo deep > newdir/sub/f
rm -r gone
ln -s keep.txt link
chmod 600 keep2.txt
chown 1000:1000 owned.txt
mv ren.txt renamed.txt
echo b > dir/b
mkfifo fifo
"""

# The guest's whole view of /data: type, owner, mode, size and content, sorted.
VIEW = r"""cd /data && find . | sort | while read -r p; do
  printf '%s ' "$p"; stat -c '%F %u:%g %a' "$p" | tr '\n' ' '
  if [ -f "$p" ] && [ ! -L "$p" ]; then md5sum < "$p"; elif [ -L "$p" ]; then readlink "$p"; else echo; fi
done"""

DIFF = """\
D del.txt
A dir/b
A fifo
D gone
M keep2.txt
A link
M mod.txt
A new.txt
A newdir
A newdir/sub
A newdir/sub/f
M owned.txt
D ren.txt
A renamed.txt
"""


def sh(home, name, script):
    r = home("run", name, "--", "sh", "-c", script)
    assert r.returncode == 0, r
    return r.stdout.decode()


def made_fork(home, parent, fork):
    r = home("fork", parent, fork)
    assert r.returncode == 0 and r.stdout.decode() == f"{parent} forked to {fork}\n", r
    home.names.insert(0, fork)  # destroyed before its parent
    return fork


@UML
def test_fork_change_diff_apply(mode_home):  # noqa: F811
    home = mode_home
    parent = build(home, "fork", f"base: {IMAGE}\nram_mib: 256\n")
    sh(home, parent, SEED)
    before = sh(home, parent, VIEW)
    fork = made_fork(home, parent, f"{parent}-f")

    # The fork starts as the parent's /data; its changes stay in the fork.
    assert sh(home, fork, VIEW) == before
    sh(home, fork, WORK)
    forked = sh(home, fork, VIEW)
    assert forked != before
    assert sh(home, parent, VIEW) == before

    r = home("diff", fork)
    assert r.returncode == 0 and r.stdout.decode() == DIFF, r
    r = home("apply", fork, "-y")
    assert r.returncode == 0, r
    assert r.stdout.decode() == DIFF + f"applied 14 changes to {parent}\n", r
    # Exactly the fork's view, owners and modes included; nothing privileged on the host.
    assert sh(home, parent, VIEW) == forked
    assert privileged([home.data(parent)]) == []
    # The fork now shows the new parent and has no changes of its own.
    assert sh(home, fork, VIEW) == forked
    assert home("diff", fork).stdout == b""
    # A rebuild of the parent (which prunes its old image) leaves the fork its own.
    bf = home.dir / "home" / "sandboxes" / parent / "Bluefile"
    bf.write_text(bf.read_text() + "env:\n  REBUILT: 1\n")
    r = home("build", parent, timeout=900)
    assert r.returncode == 0, r
    assert sh(home, fork, "echo ${REBUILT:-old}") == "old\n"
    assert sh(home, parent, "echo ${REBUILT:-old}") == "1\n"


@UML
def test_discard_and_up_exec(mode_home):  # noqa: F811
    home = mode_home
    parent = build(home, "forkup", f"base: {IMAGE}\nram_mib: 256\n")
    sh(home, parent, SEED)
    before = sh(home, parent, VIEW)
    fork = made_fork(home, parent, f"{parent}-f")
    r = home("up", fork)
    assert r.returncode == 0, r
    try:
        r = home("exec", fork, "--", "sh", "-c", "echo up > /data/mod.txt; rm /data/keep.txt")
        assert r.returncode == 0, r
        r = home("exec", fork, "--", "cat", "/data/mod.txt")
        assert r.returncode == 0 and r.stdout == b"up\n", r
        for cmd in ("apply", "discard"):
            r = home(cmd, fork, "-y")
            assert r.returncode != 0 and f"bluebox down {fork}" in r.stderr.decode(), r
    finally:
        assert home("down", fork).returncode == 0
    assert home("diff", fork).stdout == b"D keep.txt\nM mod.txt\n"
    r = home("discard", fork, "-y")
    assert r.returncode == 0 and r.stdout == b"discarded 2 changes\n", r
    assert sh(home, fork, VIEW) == before
    assert sh(home, parent, VIEW) == before
    # The fork's layers stay inside the home.
    layers = home.data(fork)
    assert sorted(os.listdir(layers)) == ["upper", "work"]
    assert str(layers).startswith(str(home.dir))


@UML
def test_api_fork_diff_apply_discard(env, bluebox_bin):  # noqa: F811
    """The API's fork routes are the CLI's commands: the same guards (409 refused, with what
    to do), the same changes, applied to the parent as the CLI applies them."""
    from test_runtime import Home
    from test_serve import Server
    home = Home(bluebox_bin)
    home.isolation = "standard"
    s = None
    try:
        parent = build(home, "forkapi", f"base: {IMAGE}\nram_mib: 256\n")
        sh(home, parent, "echo old > /data/mod.txt")
        s = Server(home)
        st, r = s.call("POST", f"/v1/sandboxes/{parent}/diff", {})
        assert st == 409 and r["code"] == "refused" and "is not a fork" in r["error"], r
        fork = f"{parent}-f"
        st, r = s.call("POST", f"/v1/sandboxes/{parent}/fork", {"fork": fork})
        assert st == 200 and r == {"fork": fork, "parent": parent}, r
        home.names.insert(0, fork)  # destroyed before its parent
        st, r = s.call("POST", f"/v1/sandboxes/{fork}/fork", {"fork": f"{fork}x"})
        assert st == 409 and r["code"] == "refused" and "itself a fork" in r["error"], r
        st, r = s.call("POST", f"/v1/sandboxes/{fork}/snapshots", {"name": "s"})
        assert st == 409 and r["code"] == "refused" and f"bluebox apply {fork}" in r["error"], r
        st, r = s.call("POST", f"/v1/sandboxes/{fork}/run",
                       {"command": "echo new > /data/mod.txt; echo a > /data/add.txt"})
        assert st == 200 and r["exit_code"] == 0, r
        st, r = s.call("POST", f"/v1/sandboxes/{fork}/diff", {})
        assert st == 200 and r["parent"] == parent and r["count"] == 2, r
        assert r["changes"] == [{"change": "A", "path": "add.txt"},
                                {"change": "M", "path": "mod.txt"}], r
        assert sh(home, parent, "cat /data/mod.txt") == "old\n"
        st, r = s.call("POST", f"/v1/sandboxes/{fork}/apply", {})
        assert st == 200 and r["count"] == 2, r
        assert sh(home, parent, "cat /data/mod.txt /data/add.txt") == "new\na\n"
        st, r = s.call("POST", f"/v1/sandboxes/{fork}/diff", {})
        assert st == 200 and r["count"] == 0, r
        sh(home, fork, "rm /data/add.txt")
        st, r = s.call("POST", f"/v1/sandboxes/{fork}/discard", {})
        assert st == 200 and r["changes"] == [{"change": "D", "path": "add.txt"}], r
        assert sh(home, fork, "cat /data/add.txt") == "a\n"
    finally:
        if s:
            s.stop()
        home.close()
