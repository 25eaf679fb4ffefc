"""A non-root guest user on the uml guest's private root layer, end to end on real
podman and a real guest kernel, as root and as the rootless test user, standard and strict:
uid 1000 works in /tmp, /var/tmp and its home as on a real machine (create, append, chmod,
mkdir -m, umask, rename, hard and symbolic links, its own files), and what it writes there
(64 MiB each in /tmp and its home) takes guest RAM, not the host's disk: the run's container
overlay does not grow, and nothing is left for the next run. On the Debian test image: `git
init && git commit` as a blueprint user in its home and /tmp, and `apt-get update` (apt drops
to `_apt`) plus an install in a bridge guest, and the shipped ai-agent example's `agent`
user at work in its home. `readonly: true` stays read-only for that user too. Needs root,
podman, user-mode-linux and build/bluebox-vmm; the Debian tests BLUEBOX_TEST_DEBIAN=1 and
the machine's Debian mirror (builds and the bridge guest fetch from it)."""
import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from test_podman_build import env, podman  # noqa: F401  (session fixture + helper)
from test_root_layer import MiB, du
from test_runtime import IMAGE, UML, Home, containers_of, upper_dir_of
from test_uml_boot import mirror  # noqa: F401  (session fixture: the apt mirror, reachable)

DEBIAN = pytest.mark.skipif(os.environ.get("BLUEBOX_TEST_DEBIAN") != "1",
                            reason="set BLUEBOX_TEST_DEBIAN=1 (debootstrap image, ~90 s once)")

# (who runs bluebox, isolation): every way a sandbox runs
MODES = [("root", "standard"), ("root", "strict"), ("rootless", "standard"),
         ("rootless", "strict")]


def made_home(request, env, bluebox_bin):  # noqa: F811
    """A throwaway home for the (who, isolation) that request.param names."""
    who, isolation = request.param
    h = Home(bluebox_bin, user=env["BLUEBOX_TEST_USER"] if who == "rootless" else None)
    h.isolation = isolation
    return h


@pytest.fixture(params=MODES, ids=["-".join(m) for m in MODES])
def mode_home(request, env, bluebox_bin):  # noqa: F811
    h = made_home(request, env, bluebox_bin)
    yield h
    h.close()


# This module is about what non-root users do in a *run*; its images are built on the host's
# kernel (--host-kernel), as guest builds of package installs cost 5-25 min each on a host
# where a uml guest's syscall is ~100 us (bench/RESULTS.md). Guest builds, their owners and
# the ai-agent example's are test_build_vm.py's and test_example_walk.py's.
def build(home, tag, bluefile):
    name = home.sandbox(f"users-{tag}-{os.getpid()}-{len(home.names)}",
                        f"backend: uml\nisolation: {home.isolation}\n{bluefile}")
    r = home("build", "--host-kernel", name, timeout=900)
    assert r.returncode == 0, r
    return name


def upper_dir(home, name):
    """The host directory that holds what the running container wrote to its root."""
    ids = containers_of(name, user=bool(home.user))
    assert len(ids) == 1, ids
    return upper_dir_of(ids[0], user=bool(home.user))


def while_running(home, name, script, measure, timeout=300):
    """Run script in the sandbox; once it prints READY, call measure(upper_dir) on the
    running container, then let the guest finish. Returns (stdout, stderr, exit, measured)."""
    go = home.data(name) / ".go"
    wrapped = f"{script}\necho READY\nwhile [ ! -e /data/.go ]; do sleep 0.2; done\n"
    p = subprocess.Popen(home.cmd("run", name, "--", "sh", "-c", wrapped), env=home.env,
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, cwd="/")
    measured = None
    try:
        lines = []
        for line in p.stdout:
            lines.append(line)
            if line == "READY\n":
                measured = measure(upper_dir(home, name))
                break
    finally:
        # the guest's root made /data; the test (root) can always drop the file in
        go.touch()
    out, err = p.communicate(timeout=timeout)
    return "".join(lines) + out, err, p.returncode, measured


# busybox has no adduser: uid 1000 and its home, made by the image's build
ADD_USER = ("echo u:x:1000:1000::/home/u:/bin/sh >> /etc/passwd && echo u:x:1000: >> /etc/group"
            " && mkdir -p /home/u && chown 1000:1000 /home/u")

# What uid 1000 does in each directory a real machine gives it to write. umask 027: the
# files come out 640, the directories 750, unless mode says otherwise.
USER_WORK = r"""set -e
umask 027
echo "HOME=$HOME"
for d in /tmp /var/tmp "$HOME"; do
    echo hi > $d/f; echo more >> $d/f; chmod 600 $d/f
    mkdir -m 700 $d/m; mv $d/f $d/m/g; ln $d/m/g $d/hard; ln -s m/g $d/sym
    mkdir $d/u; : > $d/u/new; touch -d 2001-01-01 $d/u/new; cp -p $d/u/new $d/copy
    stat -c '%U %G %a %n' $d/m/g $d/m $d/u $d/u/new $d/hard
    stat -c '%y' $d/copy | cut -c1-10
    cat $d/sym
done
dd if=/dev/zero of=/tmp/big bs=1M count=64 2>/dev/null
dd if=/dev/zero of=$HOME/big bs=1M count=64 2>/dev/null
ls -l /tmp/big $HOME/big | awk '{print $3, $5}'
"""


def as_user(user, script):
    """Guest root's script that runs script as user, through a login shell (su -)."""
    return f"cat > /tmp/.as-user <<'EOF'\n{script}EOF\nsu - {user} -c 'sh /tmp/.as-user'"


def expected_user_output(home_dir):
    out = [f"HOME={home_dir}"]
    for d in ("/tmp", "/var/tmp", home_dir):
        out += [f"u u 600 {d}/m/g", f"u u 700 {d}/m", f"u u 750 {d}/u", f"u u 640 {d}/u/new",
                f"u u 600 {d}/hard", "2001-01-01", "hi", "more"]
    return out + [f"u {64 * MiB}", f"u {64 * MiB}"]


@UML
def test_a_guest_user_works_like_a_real_machine_and_leaves_nothing(mode_home):
    """uid 1000 (made by the image's build, its home in the image) in /tmp, /var/tmp and
    its home: everything a real machine allows, its own files, the umask applied; 128 MiB
    written there stays in guest RAM (the container's overlay on the host does not grow)
    and is gone for the next run."""
    home = mode_home
    name = build(home, "work", f"base: {IMAGE}\nram_mib: 512\n"
                 f"run:\n  - {json.dumps(ADD_USER)}\n")
    names = []

    def measure(upper):
        names.extend(str(p.relative_to(upper)) for p in Path(upper).rglob("*"))
        return du(upper)

    out, err, rc, used = while_running(home, name, as_user("u", USER_WORK), measure)
    assert rc == 0, (out, err)
    assert out.splitlines()[:-1] == expected_user_output("/home/u"), (out, err)
    # 128 MiB went into the guest's RAM layer; the host's copy of the container root holds
    # only the mount points podman made
    assert used < 8 * MiB, (used, names)
    assert not [n for n in names if n.endswith(("big", "/g", "hard", "sym"))], names
    r = home("run", name, "--", "sh", "-c",
             "ls -A /tmp /var/tmp /home/u | grep -v '^$'; stat -c '%U %a' /home/u")
    assert r.returncode == 0, r
    assert r.stdout.decode().splitlines() == ["/home/u:", "/tmp:", "/var/tmp:", "u 755"], r


@UML
def test_readonly_root_stays_read_only_for_every_user(mode_home):
    """`readonly: true`: no writable layer. Neither root (also after a remount) nor uid 1000
    writes the root or the user's home; /tmp and /var/tmp are still scratch in guest RAM."""
    home = mode_home
    name = build(home, "ro", f"base: {IMAGE}\nram_mib: 256\nreadonly: true\n"
                 f"run:\n  - {json.dumps(ADD_USER)}\n")
    user = ("echo HOME=$HOME; for f in /u-esc /etc/u-esc $HOME/u-esc; do "
            "(echo x > $f) 2>/dev/null && echo WROTE $f; done; "
            "echo t > /tmp/t && echo tmp-ok; echo v > /var/tmp/v && echo var-tmp-ok; "
            "stat -c '%U %a' /tmp/t")
    r = home("run", name, "--", "sh", "-c",
             "for f in /esc /etc/esc /usr/esc /root/esc /home/u/esc; do "
             "  (echo x > $f) 2>/dev/null && echo WROTE $f; done; "
             "mount -o remount,rw / 2>/dev/null; (echo x > /esc2) 2>/dev/null && echo WROTE /esc2\n"
             + as_user("u", user + "\n"))
    assert r.returncode == 0, r
    assert r.stdout.decode().splitlines() == ["HOME=/home/u", "tmp-ok", "var-tmp-ok", "u 644"], r


# Debian: one run as root under standard isolation, one as the rootless user under strict
DIAGONAL = [("root", "standard"), ("rootless", "strict")]


@pytest.fixture(params=DIAGONAL, ids=["-".join(m) for m in DIAGONAL])
def diag_home(request, env, bluebox_bin):  # noqa: F811
    h = made_home(request, env, bluebox_bin)
    yield h
    h.close()


GIT_WORK = r"""set -e
git config --global user.name Agent
git config --global user.email agent@example.invalid
for d in "$HOME/proj" /tmp/proj; do
    git init -q $d && cd $d
    echo hi > f && git add f && git commit -qm first
    echo more >> f && git commit -qam second
    echo "$(git log --format=%an | wc -l) $(git status --porcelain | wc -l) $(stat -c %U .git/HEAD)"
done
"""


@UML
@DEBIAN
def test_git_as_a_blueprint_user_on_debian(diag_home):
    """`git init && git commit` as an unprivileged blueprint user, in its home and in /tmp
    (on hostfs, git init failed: its files came out root's and read-only to the user). git
    comes from the build's apt install, from the machine's Debian mirror."""
    home = diag_home
    name = build(home, "git", f"base: {os.environ['BLUEBOX_TEST_DEBIAN_IMAGE']}\npkgmgr: apt\n"
                 "ram_mib: 512\npackages: [git]\n"
                 "blueprint:\n  users:\n    - {name: agent, shell: /bin/bash}\n")
    r = home("run", name, "--", "sh", "-c", as_user("agent", GIT_WORK))
    assert r.returncode == 0, r
    assert r.stdout.decode().splitlines() == ["2 0 agent", "2 0 agent"], r


@UML
@DEBIAN
def test_apt_get_update_in_a_bridge_guest(diag_home, mirror):
    """`apt-get update` as guest root: apt fetches as its `_apt` user into /tmp and
    /var/lib/apt/lists (on hostfs `_apt` could not use /tmp: "invalid signature"), then an
    install works in the run's private root. The mirror is the machine's own apt mirror
    (the debian test image's sources.list), reachable from a bridge guest."""
    home = diag_home
    name = build(home, "apt", f"base: {os.environ['BLUEBOX_TEST_DEBIAN_IMAGE']}\npkgmgr: apt\n"
                 "ram_mib: 1024\nnetwork: bridge\n")
    r = home("run", name, "--", "sh", "-c",
             "apt-get update 2>&1; echo update=$?; "
             "apt-get install -y -q --no-install-recommends jq >/dev/null 2>&1; echo install=$?; "
             "jq -n 1+1", timeout=600)
    out = r.stdout.decode()
    assert r.returncode == 0, r
    assert "update=0" in out and "install=0" in out, out
    assert not [ln for ln in out.splitlines() if ln.startswith(("W:", "E:", "Err:"))], out
    assert out.splitlines()[-1] == "2", out


# What the ai-agent example's `agent` does, as a coding agent would: the motd's machine,
# its own home and caches, git, an npm install (of a package packed here: no registry),
# a Python venv, sudo.
AGENT_WORK = r"""set -e
echo "HOME=$HOME LANG=$LANG"
case ":$PATH:" in *:/usr/local/bin:*) case ":$PATH:" in *:/usr/bin:*) echo path-ok ;; esac ;; esac
git config --global user.name Agent
git config --global user.email agent@example.invalid
mkdir -p ~/proj ~/.cache/tool && cd ~/proj
git init -q && echo hi > f && git add f && git commit -qm first && echo git-ok
mkdir /tmp/tiny && cd /tmp/tiny && echo 'module.exports = 42' > index.js
echo '{"name": "tiny", "version": "1.0.0"}' > package.json && npm pack -q >/dev/null 2>&1
cd ~/proj && npm init -y >/dev/null
npm install --offline --no-audit --no-fund /tmp/tiny/tiny-1.0.0.tgz >/dev/null 2>&1
node -e 'console.log("npm-ok " + require("tiny"))'
python3 -m venv ~/venv && ~/venv/bin/python -c 'import sys; print("venv-ok", sys.prefix)'
sudo -n id -u
stat -c '%U %a' ~/proj/.git/HEAD ~/proj/node_modules/tiny/index.js ~/.cache/tool
"""


@UML
@DEBIAN
def test_ai_agent_example_works_for_its_agent_user(env, bluebox_bin):  # noqa: F811
    """The shipped ai-agent example, as written (strict, bridge, sudo user `agent`) but on
    uml and the local Debian test image (docs/bluefile.md's walk for it, test_example_walk's
    others): its tools are there, what its agent user does in its home works, and is gone
    for the next run; following the motd, the same work in a home under /data works and is
    still the agent's in the next run. As root only: its ~300 packages take minutes to
    build, and the rootless strict blueprint user is test_git_as_a_blueprint_user_on_debian's."""
    h = Home(bluebox_bin)
    try:
        name = f"agent-{os.getpid()}"
        r = h("new", name, "--from", "ai-agent")
        assert r.returncode == 0, r
        h.names.append(name)
        bf = h.dir / "home" / "sandboxes" / name / "Bluefile"
        text = bf.read_text()
        assert "\nbase: docker.io/library/debian:bookworm-slim\n" in text, text
        bf.write_text(text.replace("\nbase: docker.io/library/debian:bookworm-slim\n",
                                   f"\nbase: {os.environ['BLUEBOX_TEST_DEBIAN_IMAGE']}\n")
                      + "backend: uml\n")
        r = h("build", "--host-kernel", name, timeout=1200)
        assert r.returncode == 0, r
        r = h("run", name, "--", "sh", "-c", "cat /etc/motd; node --version; python3 --version; "
              "rg --version; " + as_user("agent", AGENT_WORK))
        assert r.returncode == 0, r
        text = r.stdout.decode()
        assert re.search(r"(?m)^v\d+\.\d+.*\nPython 3\.\d+.*\nripgrep \d", text), text
        out = text.splitlines()
        assert out[0].startswith("bluebox ai-agent sandbox"), out
        assert out[-9:] == [
            "HOME=/home/agent LANG=C.UTF-8", "path-ok", "git-ok", "npm-ok 42",
            "venv-ok /home/agent/venv", "0", "agent 644", "agent 644", "agent 755"], out
        r = h("run", name, "--", "sh", "-c", "ls -A /home/agent; ls /tmp")
        assert r.returncode == 0, r
        assert r.stdout.decode().split() == [".bash_logout", ".bashrc", ".profile"], r
        # the motd's advice for a home that lasts: /data through the file server keeps what
        # `agent` owns there, for the next run too
        advice = "sudo install -d -o agent -g agent /data/home\nexport HOME=/data/home\n"
        r = h("run", name, "--", "sh", "-c", as_user("agent", advice + AGENT_WORK))
        assert r.returncode == 0, r
        out = r.stdout.decode().splitlines()
        assert out[-9:] == [
            "HOME=/data/home LANG=C.UTF-8", "path-ok", "git-ok", "npm-ok 42",
            "venv-ok /data/home/venv", "0", "agent 644", "agent 644", "agent 755"], out
        r = h("run", name, "--", "sh", "-c", as_user(
            "agent", "export HOME=/data/home\n"
            "cd /data/home/proj && git log --format=%s && echo more >> f && "
            "git commit -qam second && git log --format=%s | wc -l && "
            "stat -c '%U %G %a' /data/home .git/HEAD node_modules/tiny/index.js\n"))
        assert r.returncode == 0, r
        assert r.stdout.decode().splitlines()[-5:] == [
            "first", "2", "agent agent 755", "agent agent 644", "agent agent 644"], r
    finally:
        h.close()
