"""Shared fixtures for the black-box CLI tests.

The binary is $BLUEBOX_BIN, or <repo>/build/bluebox. Every test gets its own throwaway
BLUEBOX_HOME and HOME under tmp_path, and a PATH whose first entry holds a stub `podman`
(it logs its arguments and reports that no image exists), so no test ever touches the real
podman store.

Fixtures defined here (kept additive; other test files may add their own):
  bb_bin   path of the binary under test (session)
  bb       a Bluebox helper bound to a fresh home

Marker: @pytest.mark.tmpfs puts the test's tmp_path (and so its home) on a tmpfs of its own,
for tests whose subject is a walk over a huge tree rather than the disk under it.
"""
import importlib.util
import os
import shlex
import stat
import subprocess
from pathlib import Path

import pytest

# The directories of BLUEBOX_HOME that bluebox keeps owner-only (src/core/home.c).
PRIVATE_DIRS = ("data", "snapshots", "logs", "run", "locks", "sandboxes")

REPO = Path(__file__).resolve().parents[2]
BLUEBOX_BIN = os.environ.get("BLUEBOX_BIN") or str(REPO / "build" / "bluebox")
EXAMPLES_DIR = REPO / "examples"

PODMAN_STUB = """#!/bin/sh
# Test stub: log the call; `image exists REF` succeeds for bluebox's own images
# (localhost/bluebox/...) only when REF is in $BB_TEST_IMAGES, and for other images (bases)
# unless REF is in $BB_TEST_MISSING; `pull` exits $BB_TEST_PULL_EXIT (default 0);
# `image inspect --format F REF` prints ID for the REF=ID words of $BB_TEST_IMAGE_IDS;
# `container inspect --format F NAME` prints ID|RUNNING|SANDBOX|HOME|CREATED for the
# NAME=ID|RUNNING|SANDBOX|HOME|CREATED words of $BB_TEST_CONTAINERS, and fails for other names;
# `port NAME …` prints ADDR for the NAME=ADDR words of $BB_TEST_PORTS.
printf '%s\\n' "$*" >> "$BB_TEST_PODMAN_LOG"
if [ "$1" = image ] && [ "$2" = exists ]; then
    for i in $BB_TEST_IMAGES; do
        [ "$i" = "$3" ] && exit 0
    done
    case "$3" in localhost/bluebox/*) exit 1 ;; esac
    for i in $BB_TEST_MISSING; do
        [ "$i" = "$3" ] && exit 1
    done
    exit 0
fi
if [ "$1" = pull ]; then
    exit "${BB_TEST_PULL_EXIT:-0}"
fi
if [ "$1" = image ] && [ "$2" = inspect ]; then
    for i in $BB_TEST_IMAGE_IDS; do
        [ "${i%%=*}" = "$5" ] && { printf '%s\\n' "${i#*=}"; exit 0; }
    done
    exit 1
fi
if [ "$1" = container ] && [ "$2" = inspect ]; then
    for i in $BB_TEST_CONTAINERS; do
        [ "${i%%=*}" = "$5" ] && { printf '%s\\n' "${i#*=}"; exit 0; }
    done
    exit 125
fi
if [ "$1" = port ]; then
    for i in $BB_TEST_PORTS; do
        [ "${i%%=*}" = "$2" ] && { printf '%s\\n' "${i#*=}"; exit 0; }
    done
    exit 125
fi
exit 0
"""


# One copy of bluebox's home id for both tiers (src/core/home.c home_id).
_homeid_spec = importlib.util.spec_from_file_location(
    "homeid", Path(__file__).resolve().parents[1] / "integration" / "homeid.py")
_homeid = importlib.util.module_from_spec(_homeid_spec)
_homeid_spec.loader.exec_module(_homeid)
home_id = _homeid.home_id


class Result:
    def __init__(self, args, rc, out, err):
        self.args = args
        self.rc = rc
        self.out = out
        self.err = err

    def __repr__(self):
        return f"Result(args={self.args!r}, rc={self.rc}, out={self.out!r}, err={self.err!r})"

    def error_line(self):
        """The one error line on stderr, without its "bluebox: " prefix."""
        assert self.err.endswith("\n"), self
        lines = self.err.splitlines()
        assert len(lines) == 1, f"expected one stderr line: {self!r}"
        assert lines[0].startswith("bluebox: "), self
        return lines[0][len("bluebox: "):]


class Bluebox:
    def __init__(self, binary, tmp_path):
        self.bin = binary
        self.tmp = tmp_path
        self.home = tmp_path / "bbhome"  # BLUEBOX_HOME; created by bluebox itself
        self.user_home = tmp_path / "userhome"
        self.user_home.mkdir()
        stubs = tmp_path / "stubbin"
        stubs.mkdir()
        podman = stubs / "podman"
        podman.write_text(PODMAN_STUB)
        podman.chmod(0o755)
        self.podman_log = tmp_path / "podman.log"
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("BLUEBOX_") and k not in ("VISUAL", "EDITOR")}
        env.update({
            "HOME": str(self.user_home),
            "BLUEBOX_HOME": str(self.home),
            "PATH": f"{stubs}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "BB_TEST_PODMAN_LOG": str(self.podman_log),
            "BB_TEST_IMAGES": "",
            "BB_TEST_IMAGE_IDS": "",
            "BB_TEST_CONTAINERS": "",
            "BB_TEST_PORTS": "",
        })
        self.env = env

    # ---- running -------------------------------------------------------------------

    def _env(self, env):
        e = dict(self.env)
        for k, v in (env or {}).items():
            if v is None:
                e.pop(k, None)
            else:
                e[k] = v
        return e

    def run(self, *args, input=None, env=None, cwd=None, timeout=20):
        """Run bluebox; stdin is /dev/null unless `input` is given (never a terminal)."""
        args = [str(a) for a in args]
        p = subprocess.run(
            [self.bin, *args],
            input=input.encode() if isinstance(input, str) else input,
            stdin=subprocess.DEVNULL if input is None else None,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env=self._env(env), cwd=cwd or self.tmp, timeout=timeout)
        return Result(args, p.returncode, p.stdout.decode("utf-8", "replace"),
                      p.stderr.decode("utf-8", "replace"))

    __call__ = run

    def run_tty(self, *args, answer=b"", env=None, timeout=20):
        """Run bluebox with stdin on a pseudo-terminal and type `answer` into it."""
        args = [str(a) for a in args]
        master, slave = os.openpty()
        try:
            p = subprocess.Popen([self.bin, *args], stdin=slave, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, env=self._env(env), cwd=self.tmp,
                                 start_new_session=True)
            os.close(slave)
            slave = -1
            if answer:
                os.write(master, answer.encode() if isinstance(answer, str) else answer)
            try:
                out, err = p.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                p.kill()
                p.communicate()
                raise
        finally:
            if slave >= 0:
                os.close(slave)
            os.close(master)
        return Result(args, p.returncode, out.decode("utf-8", "replace"),
                      err.decode("utf-8", "replace"))

    # ---- layout --------------------------------------------------------------------

    def sandbox_dir(self, name):
        return self.home / "sandboxes" / name

    def bluefile(self, name):
        return self.sandbox_dir(name) / "Bluefile"

    def containerfile(self, name):
        return self.sandbox_dir(name) / "Containerfile"

    def data(self, name):
        return self.home / "data" / name

    def log(self, name):
        return self.home / "logs" / f"{name}.log"

    def snapshots(self, name):
        return self.home / "snapshots" / name

    def run_file(self, name):
        return self.home / "run" / f"{name}.json"

    def home_id(self):
        return home_id(self.home)

    def image(self, name):
        """The sandbox's image tag in this home."""
        return f"localhost/bluebox/{name}:{self.home_id()}"

    def up_container(self, name):
        return f"bluebox-up-{name}-{self.home_id()}"

    # ---- setup helpers -------------------------------------------------------------

    def mkdir(self, path):
        """Make a directory under BLUEBOX_HOME as bluebox does: the home and the directories
        directly in it owner-only (bluebox tightens looser ones on every command)."""
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        for d in (self.home, *(self.home / n for n in PRIVATE_DIRS)):
            if d.is_dir() and not d.is_symlink():
                d.chmod(0o700)

    def write_bluefile(self, name, text):
        """Write a Bluefile directly (no `new`), creating only the sandbox directory."""
        path = self.bluefile(name)
        self.mkdir(path.parent)
        path.write_bytes(text.encode() if isinstance(text, str) else text)
        return path

    def new(self, name, *extra):
        r = self.run("new", name, *extra)
        assert r.rc == 0, r
        return r

    def mark_up(self, name):
        """Pretend the sandbox is up, the way the runtime records it."""
        p = self.run_file(name)
        self.mkdir(p.parent)
        p.write_text('{"name": "%s"}\n' % name)

    def podman_calls(self):
        if not self.podman_log.exists():
            return []
        return self.podman_log.read_text().splitlines()

    # ---- reading output ------------------------------------------------------------

    def env_of(self, name):
        """`bluebox env NAME` parsed into a dict (asserting success)."""
        r = self.run("env", name)
        assert r.rc == 0, r
        assert r.err == "", r
        out = {}
        for line in r.out.splitlines():
            key, _, value = line.partition("=")
            words = shlex.split(value, comments=True, posix=True)
            assert len(words) == 1, line
            out[key] = words[0]
        return out

    def dry_run(self, name):
        r = self.run("build", "--dry-run", name)
        assert r.rc == 0, r
        return r.out

    def tree(self, root=None):
        """A comparable snapshot of every path under root (default: BLUEBOX_HOME). The
        locks/ directory is left out: taking a lock is not a change."""
        root = Path(root or self.home)
        snap = {}
        if not root.exists():
            return snap
        for dirpath, dirnames, filenames in os.walk(root):
            if Path(dirpath) == root and "locks" in dirnames:
                dirnames.remove("locks")
            for n in dirnames + filenames:
                p = Path(dirpath) / n
                st = p.lstat()
                rel = str(p.relative_to(root))
                if stat.S_ISLNK(st.st_mode):
                    snap[rel] = ("link", os.readlink(p))
                elif stat.S_ISDIR(st.st_mode):
                    snap[rel] = ("dir", stat.S_IMODE(st.st_mode))
                else:
                    snap[rel] = ("file", stat.S_IMODE(st.st_mode), st.st_mtime_ns,
                                 p.read_bytes())
        return snap

    def expect_bluefile_error(self, name, line, col, *needles, cmd="env"):
        """Run `env NAME` (or build --dry-run) and check the one-line Bluefile error."""
        args = ("env", name) if cmd == "env" else ("build", "--dry-run", name)
        r = self.run(*args)
        assert r.rc == 1, r
        assert r.out == "", r
        msg = r.error_line()
        where = f"{self.bluefile(name)}:"
        assert msg.startswith(where), r
        pos = msg[len(where):].split(": ", 1)[0]
        if line is not None:
            assert pos == f"{line}:{col}", r
        else:
            lc = pos.split(":")
            assert len(lc) == 2 and all(x.isdigit() for x in lc), r
        for n in needles:
            assert n in msg, f"{n!r} not in {msg!r}"
        return msg


@pytest.fixture(scope="session")
def bb_bin():
    p = Path(BLUEBOX_BIN)
    if not (p.is_file() and os.access(p, os.X_OK)):
        pytest.fail(f"bluebox binary not found at {p}; build it (ninja -C build) or set "
                    "BLUEBOX_BIN", pytrace=False)
    return str(p)


def pytest_configure(config):
    config.addinivalue_line("markers", "tmpfs: the test's tmp_path is a tmpfs of its own")


@pytest.fixture
def bb(bb_bin, tmp_path, request):
    # A tree of 100000 nested directories takes one synchronous discard per removal on an
    # ext4 mounted with `discard` (this machine's and CI's root): 60-160 s a test for what is
    # a test of bluebox's walks, not of the disk. As root, such a test gets a tmpfs instead.
    mounted = False
    if request.node.get_closest_marker("tmpfs") and os.geteuid() == 0:
        mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=0700,size=4g",
                                  "bluebox-test", str(tmp_path)]).returncode == 0
    yield Bluebox(bb_bin, tmp_path)
    if mounted:
        subprocess.run(["umount", "-l", str(tmp_path)], check=False)


@pytest.fixture
def bb_editor(tmp_path):
    """Make editor scripts: bb_editor(body) returns the path of an executable sh script
    whose body runs with the edited file as $1."""
    count = [0]

    def make(body):
        count[0] += 1
        p = tmp_path / f"editor{count[0]}.sh"
        p.write_text("#!/bin/sh\n" + body + "\n")
        p.chmod(0o755)
        return str(p)
    return make
