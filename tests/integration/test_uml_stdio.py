"""A run's and shell's terminal and stdin on the uml and qemu backends (conftest.py's
`backend`), through the built binary on real podman: `run -i/-t` on a real terminal (tmux),
`shell`'s login shell with and without a terminal, piped stdin arriving byte-exact, and (uml)
a timeout that leaves no podman chatter behind. One sandbox per backend serves every test.
Needs root, podman, build/bluebox-vmm and the backend (and tmux for the terminal tests)."""
import hashlib
import os
import shlex
import shutil
import subprocess
import time

import pytest

from test_podman_build import env  # noqa: F401  (session fixture)
from test_runtime import IMAGE, UML, Home, containers_of  # noqa: F401

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0 or shutil.which("podman") is None,
                       reason="integration tests need root and podman"),
]
TMUX = pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")


@pytest.fixture(scope="module")
def home(env, bluebox_bin, backend):  # noqa: F811
    h = Home(bluebox_bin)
    yield h
    h.close()


@pytest.fixture(scope="module")
def box(home, backend):
    """A busybox sandbox whose image also has a /bin/bash (a wrapper that says so) and a motd;
    root's passwd shell there is /bin/sh."""
    name = home.sandbox(
        f"{backend}io-{os.getpid()}",
        f"base: {IMAGE}\nbackend: {backend}\nram_mib: 256\nrun:\n"
        "  - printf '#!/bin/sh\\necho I-AM-BASH\\nexec /bin/sh \"$@\"\\n' > /bin/bash && "
        "chmod 755 /bin/bash && printf 'WELCOME-MOTD line one\\nline two\\n' > /etc/motd\n")
    r = home("build", name)
    assert r.returncode == 0, r
    return name


class Tmux:
    """One command on a real terminal: a tmux session of its own."""

    def __init__(self, home, tmp_path, *args):
        self.sock = str(tmp_path / "tmux.sock")
        self.status = tmp_path / "status"
        cmd = shlex.join(home.cmd(*args))
        # Only what is set: an empty CONTAINERS_STORAGE_CONF makes podman fail ("stat : no
        # such file or directory").
        env = " ".join(shlex.quote(f"{k}={v}") for k, v in (
            ("BLUEBOX_HOME", home.env["BLUEBOX_HOME"]),
            ("CONTAINERS_CONF", os.environ["CONTAINERS_CONF"]),
            ("CONTAINERS_STORAGE_CONF", os.environ.get("CONTAINERS_STORAGE_CONF")),
            ("BLUEBOX_QEMU_ACCEL", home.env.get("BLUEBOX_QEMU_ACCEL"))) if v)
        r = self("new-session", "-d", "-s", "t", "-x", "100", "-y", "30",
                 f"env {env} {cmd}; echo $? > {self.status}; sleep 30")
        assert r.returncode == 0, r.stderr

    def __call__(self, *args):
        return subprocess.run(["tmux", "-S", self.sock, *args], capture_output=True, text=True)

    def screen(self):
        return self("capture-pane", "-p", "-t", "t").stdout

    def wait_for(self, text, timeout=60):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if text in self.screen():
                return
            time.sleep(0.2)
        pytest.fail(f"{text!r} never appeared:\n{self.screen()}")

    def keys(self, *keys):
        self("send-keys", "-t", "t", *keys)

    def exit_status(self, timeout=30):
        end = time.monotonic() + timeout
        while not self.status.exists() and time.monotonic() < end:
            time.sleep(0.2)
        assert self.status.exists(), self.screen()
        return int(self.status.read_text())

    def close(self):
        self("kill-server")


@TMUX
def test_shell_on_a_terminal_resizes_and_exits(home, box, tmp_path):
    """`bluebox shell` on a real terminal: a prompt, arithmetic, a resize that reaches the
    guest's pty, and the shell's exit status coming back; no container left."""
    t = Tmux(home, tmp_path, "shell", box)
    try:
        t.wait_for("/data #")
        t.keys("echo $((6*7))", "Enter")
        t.wait_for("42")
        t("resize-window", "-t", "t", "-x", "120", "-y", "40")
        time.sleep(0.5)
        t.keys("stty size", "Enter")
        t.wait_for("40 120")
        t.keys("exit 5", "Enter")
        assert t.exit_status() == 5, t.screen()
    finally:
        t.close()
    assert containers_of(box) == []


@TMUX
def test_run_it_on_a_terminal(home, box, tmp_path):
    """`run -it <sb> -- sh`: a prompt on a pty, a command, its exit code back."""
    t = Tmux(home, tmp_path, "run", "-it", box, "--", "sh")
    try:
        t.wait_for("/data #")
        t.keys("tty; echo $((6*7))", "Enter")
        t.wait_for("42")
        assert "/dev/pts/" in t.screen()
        t.keys("exit 6", "Enter")
        assert t.exit_status() == 6
    finally:
        t.close()
    assert containers_of(box) == []


@TMUX
def test_run_without_i_does_not_read_the_terminal(home, box, tmp_path):
    """No -i: a terminal's stdin is not the command's (it sees its end at once), as before."""
    t = Tmux(home, tmp_path, "run", box, "--", "sh", "-c", "cat; echo cat-done; exit 3")
    try:
        t.wait_for("cat-done")
        assert t.exit_status() == 3
    finally:
        t.close()


@TMUX
def test_shell_on_a_terminal_is_the_login_shell(home, box, tmp_path):
    t = Tmux(home, tmp_path, "shell", box)
    try:
        t.wait_for("WELCOME-MOTD line one")  # the image's motd, as login(1) shows it
        t.wait_for("line two")
        t.wait_for("I-AM-BASH")
        t.wait_for("/data #")
        t.keys("tty", "Enter")
        t.wait_for("/dev/pts/")
        t.keys("exit 5", "Enter")
        assert t.exit_status() == 5
    finally:
        t.close()


def test_shell_with_piped_stdin_has_no_terminal(home, box):
    """Piped into shell: the commands run, no pty (no echo, no prompt), exit code back."""
    r = home("shell", box, input=b"echo hi; tty; exit 4\n")
    out = r.stdout.decode()
    assert r.returncode == 4, r
    assert out == "I-AM-BASH\nhi\nnot a tty\n", r
    assert "# " not in out


def test_run_t_needs_a_terminal(home, box):
    r = home("run", "-t", box, "--", "cat", input=b"x\n")
    assert r.returncode == 2, r
    assert b"run -t needs a terminal on stdin" in r.stderr


def test_piped_stdin_is_byte_exact(home, box, backend):
    """A few MiB through run's stdin arrive whole and in order (sha256 on both sides). (qemu:
    256 KiB; its stdin crosses a serial line, about 20 KB/s under TCG on this machine.)"""
    blob = os.urandom((256 << 10) if backend == "qemu" else (6 << 20)) + bytes(range(256)) * 64
    r = home("run", box, "--", "sha256sum", input=blob, timeout=300)
    assert r.returncode == 0, r
    assert r.stdout.split()[0].decode() == hashlib.sha256(blob).hexdigest()


@UML
@pytest.mark.backends("uml")
def test_timeout_leaves_no_podman_chatter(home, backend):
    """A run killed at its timeout: the workload's stderr and bluebox's line reach the user
    and the log; podman's own complaints ("forwarding signal 15 to container …: no such
    container", logrus lines) reach neither. Several times: the old SIGTERM to the podman
    client raced the container's removal, and lost it in about half of the runs here."""
    name = home.sandbox(f"umlto-{os.getpid()}",
                        f"base: {IMAGE}\nbackend: uml\nram_mib: 256\ntimeout_seconds: 2\n")
    assert home("build", name).returncode == 0
    for _ in range(5):
        r = home("run", name, "--", "sh", "-c", "echo started >&2; sleep 30")
        err = r.stderr.decode()
        assert r.returncode == 124, r
        assert err == "started\nbluebox: killed after 2s (timeout_seconds)\n", err
    log = (home.dir / "home" / "logs" / f"{name}.log").read_text()
    assert log.count("| started\n=== exit 124 (") == 5, log
    for chatter in ("forwarding signal", "no such container", "level="):
        assert chatter not in log, log
    assert containers_of(name) == []
