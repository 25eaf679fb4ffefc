"""run, shell, verify, doctor and destroy against a STAND-IN podman.

Honest about what this is: tests/cli/standin_podman.py is installed as `podman` first on
PATH. It is not podman and isolates nothing: it records every argv bluebox gives it, answers
the isolation probes with kernel ids the test controls, and runs the workload directly on
the host. So these tests check bluebox's process plumbing — the argv it builds (confinement
flags included), exit codes, stdout/stderr kept apart, stdin passthrough, the timeout and
Ctrl-C/SIGTERM cleanup (`podman rm -f -t 0`), the run log, the isolation cache and its
refusals — not isolation itself. The real podman and uml path is tested in
tests/integration.

Every test uses the uml backend (krun's preflight needs an openable /dev/kvm): the "kernel"
is a copy of /bin/true and the "VMM" a copy of build/bluebox-vmm (or build/uml_testprog,
linked the same way); the stand-in never runs either, bluebox only bundles them.
"""
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
from hostkvm import kvm_openable

REPO = Path(__file__).resolve().parents[2]
STANDIN = Path(__file__).resolve().parent / "standin_podman.py"
VMM_ENTRY = "--entrypoint=/.bluebox/vmm/bluebox-vmm"
FAKE_GUEST = "6.1.0-standin"
NAME = "s"
# The sandbox's image in any home: localhost/bluebox/<name>:<home id> (conftest.home_id).
IMAGE_RE = re.compile(rf"localhost/bluebox/{NAME}:[0-9a-f]{{12}}")
# A workload that only SIGKILL stops: it ignores TERM/INT/HUP, says it is ready, and sleeps.
STUBBORN = "trap '' TERM INT HUP; : > \"$1\"; exec sleep 30"


def host_kernel():
    with open("/proc/sys/kernel/random/boot_id") as f:
        return os.uname().release, f.read().strip()


def vmm_source():
    for n in ("bluebox-vmm", "uml_testprog"):
        p = REPO / "build" / n
        if p.is_file() and os.access(p, os.X_OK):
            return p
    pytest.fail("neither build/bluebox-vmm nor build/uml_testprog exists; run make build",
                pytrace=False)


def alive(pid):
    """True while pid exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


class Out:
    def __init__(self, args, rc, out, err, seconds):
        self.args, self.rc, self.out, self.err, self.seconds = args, rc, out, err, seconds

    def __repr__(self):
        return (f"Out(args={self.args!r}, rc={self.rc}, out={self.out[:2000]!r}, "
                f"err={self.err[:2000]!r}, seconds={self.seconds:.2f})")

    @property
    def text(self):
        return self.out.decode("utf-8", "replace")

    @property
    def etext(self):
        return self.err.decode("utf-8", "replace")


class Standin:
    """The `bb` fixture with the stand-in podman first on PATH and the uml backend set up."""

    def __init__(self, bb):
        self.bb = bb
        tmp = bb.tmp
        bindir = tmp / "standin-bin"
        bindir.mkdir()
        self.podman = bindir / "podman"
        shutil.copyfile(STANDIN, self.podman)
        self.podman.chmod(0o755)
        self.state = tmp / "standin-state"
        self.kernel = tmp / "linux.uml"
        shutil.copyfile("/bin/true", self.kernel)
        self.kernel.chmod(0o755)
        self.vmm = tmp / "bluebox-vmm"
        shutil.copyfile(vmm_source(), self.vmm)
        self.vmm.chmod(0o755)
        # Part of the bundle on hosts with AVX-512/AMX (src/vmm/xstate.c).
        if (REPO / "build" / "bluebox-xstate.so").is_file():
            shutil.copyfile(REPO / "build" / "bluebox-xstate.so", tmp / "bluebox-xstate.so")
        # Always part of it (src/vmm/uname.c).
        shutil.copyfile(REPO / "build" / "bluebox-uname.so", tmp / "bluebox-uname.so")
        # A private copy of the binary under test: a rebuild by someone else mid-test would
        # change the runtime fingerprint (the guest binary is part of it).
        self.bin = tmp / "bluebox"
        shutil.copyfile(bb.bin, self.bin)
        self.bin.chmod(0o755)
        bb.bin = str(self.bin)
        rest = bb.env["PATH"].split(":")[1:]  # drop the conftest stub
        bb.env.update({
            "PATH": ":".join([str(bindir), *rest]),
            "BB_STANDIN_STATE": str(self.state),
            "BLUEBOX_BACKEND": "uml",
            "BLUEBOX_UML_KERNEL": str(self.kernel),
            "BLUEBOX_VMM": str(self.vmm),
            # The podman path: the stand-in is podman's argv, not runc's; the direct launch
            # (the default as root) is tested for real in tests/integration.
            "BLUEBOX_LAUNCH": "podman",
        })
        for k in ("BB_STANDIN_GUEST_KERNEL", "BB_STANDIN_GUEST_BOOT_ID", "BB_STANDIN_PS_IDS",
                  "BLUEBOX_GUEST_BINARY"):
            bb.env.pop(k, None)
        self.procs = []

    # ---- setup ---------------------------------------------------------------------

    def sandbox(self, name=NAME, extra="", built=True):
        self.bb.write_bluefile(name, "base: docker.io/library/alpine:latest\n" + extra)
        if built:
            (self.bb.sandbox_dir(name) / "image-id").write_text("sha256:" + "ab" * 32 + "\n")
        return name

    def marker(self, tag="ready"):
        return self.bb.tmp / f"marker-{tag}"

    # ---- running -------------------------------------------------------------------

    def env(self, extra=None):
        e = dict(self.bb.env)
        for k, v in (extra or {}).items():
            if v is None:
                e.pop(k, None)
            else:
                e[k] = v
        return e

    def run(self, *args, input=None, env=None, timeout=20):
        """Run bluebox; bytes in and out. stdin is /dev/null unless input is given."""
        args = [str(a) for a in args]
        t = time.monotonic()
        p = subprocess.run([self.bb.bin, *args], input=input,
                           stdin=subprocess.DEVNULL if input is None else None,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           env=self.env(env), cwd=self.bb.tmp, timeout=timeout)
        return Out(args, p.returncode, p.stdout, p.stderr, time.monotonic() - t)

    def start(self, *args, env=None):
        p = subprocess.Popen([self.bb.bin, *[str(a) for a in args]], stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=self.env(env),
                             cwd=self.bb.tmp, start_new_session=True)
        self.procs.append(p)
        return p

    def prime(self, name=NAME):
        """One run so the isolation cache is warm (its first-run note is out of the way)."""
        r = self.run("run", name, "--", "true")
        assert r.rc == 0, r
        assert self.cache_entry(), r
        self.bb.podman_log.write_text("")

    # ---- what the stand-in saw -----------------------------------------------------

    def calls(self):
        if not self.bb.podman_log.exists():
            return []
        return [json.loads(line) for line in self.bb.podman_log.read_text().splitlines()]

    def runs(self):
        return [c for c in self.calls() if c[:1] == ["run"]]

    def probes(self):
        return [c for c in self.runs() if "__probe" in c]

    def workloads(self):
        return [c for c in self.runs() if "__probe" not in c]

    def only_workload(self):
        w = self.workloads()
        assert len(w) == 1, self.calls()
        return w[0]

    def removes(self):
        return [c for c in self.calls() if c[:1] == ["rm"]]

    def containers(self):
        p = self.state / "containers"
        if not p.exists():
            return {}
        return dict((n, int(pid)) for n, pid in
                    (line.split() for line in p.read_text().splitlines()))

    def killed(self):
        p = self.state / "killed"
        return p.read_text().splitlines() if p.exists() else []

    def cache(self):
        return json.loads((self.bb.home / "verify.json").read_text())

    def cache_entry(self):
        p = self.bb.home / "verify.json"
        if not p.exists():
            return None
        return self.cache().get("backends", {}).get("uml")

    def cleanup(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        for pid in self.containers().values():
            try:
                os.killpg(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


@pytest.fixture
def sb(bb):
    s = Standin(bb)
    yield s
    s.cleanup()


def image_at(argv):
    """Index of the sandbox's image in argv, None when it is not there."""
    at = [i for i, a in enumerate(argv) if IMAGE_RE.fullmatch(a)]
    return at[0] if at else None


def opt(argv, key):
    """Values of --key=value options before the image."""
    head = argv[:image_at(argv)] if image_at(argv) is not None else argv
    return [a.split("=", 1)[1] for a in head if a.startswith(key + "=")]


def volumes(argv):
    return [argv[i + 1] for i, a in enumerate(argv) if a == "-v"]


def name_of(argv):
    names = opt(argv, "--name")
    assert len(names) == 1, argv
    return names[0]


def after_image(argv):
    assert sum(bool(IMAGE_RE.fullmatch(a)) for a in argv) == 1, argv
    return argv[image_at(argv) + 1:]


def before_image(argv):
    assert image_at(argv) is not None, argv
    return argv[:image_at(argv)]


def wait_for(path, proc, seconds=5.0):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if path.exists():
            return
        if proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(f"bluebox exited {proc.returncode} before the workload started: "
                        f"{out!r} {err!r}")
        time.sleep(0.01)
    pytest.fail(f"the workload did not start within {seconds}s")


# ---- exit codes ------------------------------------------------------------------------

@pytest.mark.parametrize("cmd, code", [
    (["true"], 0),
    (["sh", "-c", "exit 3"], 3),
    (["sh", "-c", "exit 255"], 255),
    (["no-such-command-bluebox-test"], 127),
    (["sh", "-c", "kill -9 $$"], 128 + 9),
], ids=["0", "3", "255", "127-missing", "137-kill-9"])
def test_exit_code_passes_through(sb, cmd, code):
    sb.sandbox()
    sb.prime()
    r = sb.run("run", NAME, "--", *cmd)
    assert r.rc == code, r
    assert after_image(sb.only_workload()) == cmd
    if code != 127:
        assert r.err == b"", r


def test_command_arguments_pass_verbatim(sb):
    """Everything after the first `--` is the command, dashes and quotes included."""
    sb.sandbox()
    sb.prime()
    cmd = ["printf", "%s|", "--", "-x", "--help", "a b", "it's", "$HOME", ""]
    r = sb.run("run", NAME, "--", *cmd)
    assert r.rc == 0, r
    assert r.out == b"--|-x|--help|a b|it's|$HOME||", r
    assert after_image(sb.only_workload()) == cmd


# ---- stdout, stderr, stdin -------------------------------------------------------------

def test_stdout_and_stderr_kept_apart_exact_bytes(sb):
    sb.sandbox()
    sb.prime()
    prog = ("import os, time\n"
            "os.write(1, b'O1\\n\\xff\\x00')\n"
            "os.write(2, b'E1\\n')\n"
            "time.sleep(0.02)\n"
            "os.write(1, b'O2 no newline')\n"
            "os.write(2, b'\\x00E2\\r\\n')\n")
    r = sb.run("run", NAME, "--", "/usr/bin/python3", "-c", prog)
    assert r.rc == 0, r
    assert r.out == b"O1\n\xff\x00O2 no newline", r
    assert r.err == b"E1\n\x00E2\r\n", r


def test_large_output_is_complete(sb):
    sb.sandbox()
    sb.prime()
    r = sb.run("run", NAME, "--", "/usr/bin/python3", "-c",
               "import sys; sys.stdout.buffer.write(bytes(range(256)) * 16384); "
               "sys.stderr.write('e' * 100000)")
    assert r.rc == 0, r.rc
    assert r.out == bytes(range(256)) * 16384
    assert r.err == b"e" * 100000


def test_stdin_piped_binary_round_trip(sb):
    sb.sandbox()
    sb.prime()
    data = bytes(range(256)) * 4 + b"\x00\x00tail without newline"
    r = sb.run("run", NAME, "--", "cat", input=data)
    assert r.rc == 0, r
    assert r.out == data, r
    assert r.err == b"", r
    assert "-i" in before_image(sb.only_workload())
    assert "-t" not in before_image(sb.only_workload())


def test_stdin_piped_4_mib(sb):
    sb.sandbox()
    sb.prime()
    data = os.urandom(4 << 20)
    r = sb.run("run", NAME, "--", "cat", input=data)
    assert r.rc == 0, r.rc
    assert len(r.out) == len(data)
    assert r.out == data


def test_stdin_dev_null_is_eof(sb):
    sb.sandbox()
    sb.prime()
    r = sb.run("run", NAME, "--", "sh", "-c", "cat; echo done $?")
    assert r.rc == 0, r
    assert r.out == b"done 0\n", r


def test_stdin_terminal_is_not_passed(sb):
    """A terminal's stdin is not the command's (that is what shell is for): no -i, no -t."""
    sb.sandbox()
    sb.prime()
    r = sb.bb.run_tty("run", NAME, "--", "sh", "-c", "cat; echo eof", answer="typed\n",
                      timeout=5)
    assert r.rc == 0, r
    assert r.out == "eof\n", r
    argv = before_image(sb.only_workload())
    assert "-i" not in argv, argv
    assert "-t" not in argv, argv


# ---- timeout ---------------------------------------------------------------------------

def test_timeout_kills_and_removes_the_container(sb):
    sb.sandbox(extra="timeout_seconds: 1\n")
    sb.prime()
    mark = sb.marker()
    r = sb.run("run", NAME, "--", "sh", "-c", STUBBORN, "sh", mark, timeout=40)
    assert r.rc == 124, r
    assert r.seconds < 15, r  # killed, not waited for: STUBBORN would sleep 30 s
    assert mark.exists(), "the workload never started"
    assert r.err == b"bluebox: killed after 1s (timeout_seconds)\n", r
    assert r.out == b"", r
    container = name_of(sb.only_workload())
    assert ["rm", "-f", "-t", "0", "--ignore", container] in sb.removes(), sb.calls()
    pid = sb.containers()[container]
    assert f"killed {container} {pid}" in sb.killed()
    assert not alive(pid)
    log = sb.bb.log(NAME).read_text()
    assert re.search(r"\n=== exit 124 \(\d+\.\d\ds\)\n$", log), log


def test_timeout_zero_means_none(sb):
    sb.sandbox(extra="timeout_seconds: 0\n")
    sb.prime()
    r = sb.run("run", NAME, "--", "sleep", "1.2")
    assert r.rc == 0, r
    assert sb.removes() == []


def test_timeout_does_not_fire_for_a_quick_command(sb):
    sb.sandbox(extra="timeout_seconds: 5\n")
    sb.prime()
    r = sb.run("run", NAME, "--", "sh", "-c", "echo ok")
    assert (r.rc, r.out, r.err) == (0, b"ok\n", b""), r
    # How long it takes is bench/latency_bench.py's (a wall-clock bound flakes under load).
    assert sb.removes() == []


# ---- signals ---------------------------------------------------------------------------

@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP],
                         ids=["SIGINT", "SIGTERM", "SIGHUP"])
def test_signal_stops_the_container_and_leaves_nothing(sb, sig):
    sb.sandbox()
    sb.prime()
    mark = sb.marker()
    p = sb.start("run", NAME, "--", "sh", "-c", STUBBORN, "sh", mark)
    wait_for(mark, p)
    p.send_signal(sig)
    # The workload ignores the signal and sleeps 30 s: an exit inside this bound is bluebox's
    # teardown. Its latency is measured by bench/latency_bench.py, not asserted here.
    out, err = p.communicate(timeout=20)
    assert p.returncode == 128 + sig, (p.returncode, out, err)
    assert out == b"", out
    container = name_of(sb.only_workload())
    assert ["rm", "-f", "-t", "0", "--ignore", container] in sb.removes(), sb.calls()
    pid = sb.containers()[container]
    assert f"killed {container} {pid}" in sb.killed()
    assert not alive(pid)
    log = sb.bb.log(NAME).read_text()
    assert re.search(rf"\n=== exit {128 + sig} \(\d+\.\d\ds\)\n$", log), log


# ---- the run log -----------------------------------------------------------------------

def test_run_log_has_header_output_and_exit(sb):
    sb.sandbox()
    sb.prime()
    sb.bb.log(NAME).unlink()
    cmd = ["sh", "-c", "echo hello; echo oops >&2; exit 5", "it's a b"]
    r = sb.run("run", NAME, "--", *cmd)
    assert r.rc == 5, r
    log = sb.bb.log(NAME).read_text()
    lines = log.splitlines()
    m = re.fullmatch(r"=== (\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ) run: (.*)", lines[1])
    assert lines[0] == "" and m, log
    assert shlex.split(m.group(2)) == cmd, log
    assert m.group(2) == " ".join("'" + a.replace("'", "'\\''") + "'" for a in cmd), log
    assert sorted(lines[2:4]) == ["| hello", "| oops"], log
    assert re.fullmatch(r"=== exit 5 \(\d+\.\d\ds\)", lines[4]), log
    assert len(lines) == 5, log


def test_run_log_appends(sb):
    sb.sandbox()
    sb.prime()
    for word in ("first", "second"):
        assert sb.run("run", NAME, "--", "echo", word).rc == 0
    log = sb.bb.log(NAME).read_text()
    assert log.count(" run: ") == 3  # prime + two
    assert log.index("first") < log.index("second")
    assert log.count("=== exit 0 (") == 3


def test_run_log_cannot_be_forged(sb):
    """A workload that exits 3 prints a run record of a command that never ran and
    an exit 0 for itself, and the command line carries a newline and a record of its own (an
    API or MCP caller's argv): `bluebox logs` shows exactly one header and one exit record,
    the real ones; the rest reads as output or as the quoted argument."""
    sb.sandbox()
    sb.prime()
    sb.bb.log(NAME).unlink()
    forged = "=== 2026-01-01T00:00:00Z run: 'never-ran'\n=== exit 0 (0.01s)"
    r = sb.run("run", NAME, "--", "sh", "-c", 'printf "%s\\n" "$1"; exit 3', "sh",
               f"x\n{forged}")
    assert r.rc == 3, r
    shown = sb.run("logs", NAME)
    assert shown.rc == 0, shown
    lines = shown.out.decode().splitlines()
    records = [ln for ln in lines if ln.startswith("=== ")]
    assert len(records) == 2, lines
    assert records[0].endswith(" run: 'sh' '-c' 'printf \"%s\\n\" \"$1\"; exit 3' 'sh' "
                               "$'x\\n=== 2026-01-01T00:00:00Z run: \\'never-ran\\'\\n"
                               "=== exit 0 (0.01s)'"), records
    assert re.fullmatch(r"=== exit 3 \(\d+\.\d\ds\)", records[1]), records
    assert lines[2:5] == ["| x", "| === 2026-01-01T00:00:00Z run: 'never-ran'",
                          "| === exit 0 (0.01s)"], lines


KEEP = 64 << 10  # RUNLOG_KEEP_BYTES: of each run's output, at its start and at its end
ROTATE = 1 << 20  # RUNLOG_ROTATE_BYTES


def test_run_log_clips_a_large_output(sb):
    """`head -c 50M /dev/zero` must not leave a 50 MB log: the log keeps
    the command line, the first and last 64 KiB of output around a marker saying how much
    was dropped, and the exit code."""
    sb.sandbox()
    sb.prime()
    sb.bb.log(NAME).unlink()
    total = 50 << 20
    script = f"head -c {KEEP} /dev/zero | tr '\\0' a; head -c {total - 2 * KEEP} /dev/zero; " \
             f"head -c {KEEP} /dev/zero | tr '\\0' z; exit 3"
    r = sb.run("run", NAME, "--", "sh", "-c", script, timeout=60)
    assert r.rc == 3 and len(r.out) == total, (r.rc, len(r.out), r.err)  # the terminal got all
    log = sb.bb.log(NAME).read_bytes()
    assert len(log) < 3 * KEEP, len(log)
    head, rest = log.split(b"\n", 2)[1:]
    assert head.startswith(b"=== ") and b" run: 'sh' '-c' 'head -c " in head, head
    clipped = total - 2 * KEEP
    marker = f"\n=== [\u2026 {clipped} bytes clipped \u2026]\n".encode()
    assert rest == b"| " + b"a" * KEEP + marker + b"| " + b"z" * KEEP + rest[-20:], \
        rest[:100] + rest[-100:]
    assert re.fullmatch(rb"\n=== exit 3 \(\d+\.\d\ds\)\n", rest[-20:].split(b"z")[-1]), rest[-40:]


def test_run_log_rotates(sb):
    """Many runs: the log is rotated once it passes 1 MiB, two older generations are kept,
    and every run's command line and exit code are in one of them."""
    sb.sandbox()
    sb.prime()
    runs = 30
    for i in range(runs):
        r = sb.run("run", NAME, "--", "sh", "-c", f"head -c 200000 /dev/zero; exit {i % 7}")
        assert r.rc == i % 7, r
    logs = sorted(p.name for p in sb.bb.log(NAME).parent.iterdir())
    assert logs == [f"{NAME}.log", f"{NAME}.log.1", f"{NAME}.log.2"], logs
    sizes = [p.stat().st_size for p in sb.bb.log(NAME).parent.iterdir()]
    assert all(s < ROTATE + 3 * KEEP for s in sizes), sizes
    text = b"".join(p.read_bytes() for p in sb.bb.log(NAME).parent.iterdir()).decode()
    assert text.count(" run: 'sh' '-c' 'head -c 200000") == text.count("bytes clipped")
    assert text.count("=== exit ") == text.count(" run: ")
    # The newest runs are all there, in the current log or the one before.
    recent = (sb.bb.log(NAME).parent / f"{NAME}.log.1").read_text() + sb.bb.log(NAME).read_text()
    last = [int(m) for m in re.findall(r"=== exit (\d+) \(", recent)][-5:]
    assert last == [i % 7 for i in range(runs - 5, runs)], last
    # `logs` reads on into the generation before when the current log is short.
    r = sb.run("logs", NAME, "-n", "100000")
    assert r.rc == 0 and r.out.decode().count("=== exit ") == recent.count("=== exit "), r.err


def test_closed_stdout_does_not_kill_bluebox(sb):
    sb.sandbox()
    sb.prime()
    go = sb.marker("go")
    p = subprocess.Popen(
        [sb.bb.bin, "run", NAME, "--", "sh", "-c",
         'echo one; while [ ! -e "$1" ]; do sleep 0.01; done; echo two; echo done', "sh", go],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env=sb.env(), cwd=sb.bb.tmp, start_new_session=True)
    sb.procs.append(p)
    assert p.stdout.readline() == b"one\n"
    p.stdout.close()  # the reader goes away, like `| head -1`
    go.write_text("")
    rc = p.wait(timeout=10)
    p.stderr.close()
    assert rc == 0, rc
    log = sb.bb.log(NAME).read_text()
    assert "| one\n| two\n| done\n=== exit 0 (" in log, log


# ---- container names -------------------------------------------------------------------

def test_container_names_are_unique_per_run(sb):
    sb.sandbox()
    sb.prime()
    for _ in range(2):
        assert sb.run("run", NAME, "--", "true").rc == 0
    names = [name_of(w) for w in sb.workloads()]
    assert len(names) == 2 and names[0] != names[1], names
    for n in names:
        assert re.fullmatch(rf"bluebox-{NAME}-\d+-[0-9a-f]{{4}}", n), n


# ---- the launch argv -------------------------------------------------------------------

def check_confinement(sb, argv):
    head = before_image(argv)
    assert argv[:2] == ["run", "--rm"], argv
    for flag in ("--pull=never", "--cap-drop=all", "--security-opt=no-new-privileges",
                 "--pids-limit=512", "--network=none", f"--label=bluebox.sandbox={NAME}"):
        assert flag in head, (flag, argv)
    assert opt(argv, "--memory") == ["2304m"], argv  # ram_mib 2048 + 256
    six = ["CHOWN,DAC_OVERRIDE,FOWNER,SETUID,SETGID,NET_BIND_SERVICE"]
    # uml: bluebox-vmm's setup capabilities, dropped before UML runs (tests/integration)
    assert opt(argv, "--cap-add") == (six + ["SYS_ADMIN,SETPCAP"] if VMM_ENTRY in head
                                      else six), argv
    assert f"{sb.bb.data(NAME)}:/data" in volumes(head), argv
    assert f"{sb.bin}:/.bluebox/bluebox:ro" in volumes(head), argv
    for bad in ("--privileged", "--network=host", "--net=host", "--pid=host", "--ipc=host",
                "--userns=host", "--cap-add=all", "--cap-add=ALL"):
        assert bad not in argv, (bad, argv)
    assert not any(a.startswith("--security-opt=seccomp=unconfined") for a in argv), argv


def test_launch_argv_has_the_confinement_and_the_uml_bits(sb):
    sb.sandbox()
    r = sb.run("run", NAME, "--", "true")
    assert r.rc == 0, r
    argv = sb.only_workload()
    check_confinement(sb, argv)
    head = before_image(argv)
    assert VMM_ENTRY in head, argv
    vmm = [v for v in volumes(head) if v.endswith(":/.bluebox/vmm:ro")]
    assert len(vmm) == 1, argv
    bundle = Path(vmm[0][:-len(":/.bluebox/vmm:ro")])
    assert bundle.parent == sb.bb.home / "vmm", bundle
    assert (bundle / "bluebox-vmm").is_file() and (bundle / "linux.uml").is_file()
    assert "--env=BLUEBOX_MODE=run" in head, argv
    assert not any(a.startswith("--runtime") for a in argv), argv
    assert after_image(argv) == ["true"]
    assert "-i" in head and "-t" not in head


def test_uml_vmm_is_the_containers_root_and_the_image_user_goes_to_the_guest(sb):
    """The VMM writes guest files on the host through hostfs, so it is the container's root
    (the sandbox's identity) whatever the image's USER; that USER, recorded at build beside
    image-id, goes to the guest init in BLUEBOX_USER, with no podman call per run."""
    sb.sandbox()
    (sb.bb.sandbox_dir(NAME) / "image-user").write_text("app:wheel\n")
    r = sb.run("run", NAME, "--", "true")
    assert r.rc == 0, r
    head = before_image(sb.only_workload())
    assert "--user=0:0" in head and "--env=BLUEBOX_USER=app:wheel" in head, head
    assert not [c for c in sb.calls() if c[:2] == ["image", "inspect"]], sb.calls()
    # an image without a USER: no variable, the guest's root as before
    (sb.bb.sandbox_dir(NAME) / "image-user").write_text("\n")
    sb.bb.podman_log.unlink()
    assert sb.run("run", NAME, "--", "true").rc == 0
    head = before_image(sb.only_workload())
    assert "--user=0:0" in head and not any("BLUEBOX_USER" in a for a in head), head
    # built before the USER was recorded: asked of podman once, then recorded
    (sb.bb.sandbox_dir(NAME) / "image-user").unlink()
    assert sb.run("run", NAME, "--", "true").rc == 0
    assert [c for c in sb.calls() if c[:2] == ["image", "inspect"]], sb.calls()
    assert (sb.bb.sandbox_dir(NAME) / "image-user").read_text() == "\n"


def test_probe_launches_get_the_same_confinement(sb):
    sb.sandbox()
    assert sb.run("run", NAME, "--", "true").rc == 0
    plain, guest = sb.probes()
    for p in (plain, guest):
        check_confinement(sb, p)
        assert "-i" not in before_image(p) and "-t" not in before_image(p), p
    assert opt(plain, "--entrypoint") == ["/.bluebox/bluebox"], plain
    assert after_image(plain) == ["__probe"], plain
    assert VMM_ENTRY in before_image(guest), guest
    assert after_image(guest) == ["/.bluebox/bluebox", "__probe"], guest
    assert "--env=BLUEBOX_MODE=probe" in guest, guest


def test_bluefile_settings_reach_the_argv(sb, tmp_path):
    src = tmp_path / "shared"
    src.mkdir()
    sb.sandbox(extra=f"ram_mib: 512\nnetwork: bridge\nreadonly: true\n"
                     f"mounts:\n  - host: {src}\n    guest: /mnt/shared\n")
    r = sb.run("run", NAME, "--", "true")
    assert r.rc == 0, r
    argv = sb.only_workload()
    head = before_image(argv)
    assert opt(argv, "--memory") == ["768m"], argv
    assert "--network=bridge" in head and "--network=none" not in head, argv
    assert "--read-only" in head, argv
    vs = volumes(head)
    assert vs.index(f"{sb.bb.data(NAME)}:/data") < vs.index(f"{src}:/mnt/shared:ro"), argv
    assert "--privileged" not in argv


@pytest.mark.parametrize("cmd", [["build"], ["run", "--", "true"], ["shell"], ["up"]],
                         ids=["build", "run", "shell", "up"])
@pytest.mark.parametrize("host,words", [
    ("/", "the host's whole filesystem"),
    ("/var/run", "podman's among them"),
    ("{home}", "your home directory"),
    ("{tmp}", "bluebox's own home"),
    ("{bbhome}/sandboxes", "bluebox's own home"),
], ids=["root", "var-run", "user-home", "above-bluebox-home", "in-bluebox-home"])
def test_mounts_that_hand_over_the_host_are_refused(sb, tmp_path, cmd, host, words):
    host = host.format(home=sb.bb.user_home, tmp=tmp_path, bbhome=sb.bb.home)
    sb.sandbox(extra=f"mounts:\n  - host: {host}\n    guest: /mnt/h\n", built=cmd[0] != "build")
    r = sb.run(cmd[0], NAME, *cmd[1:])
    assert r.rc == 1, r
    msg = r.etext
    assert msg.count("\n") == 1 and f"mount {host} -> /mnt/h is refused" in msg, r
    assert words in msg and "Mount a project directory" in msg, r
    assert not [c for c in sb.calls() if c[:1] in (["run"], ["build"], ["create"])], sb.calls()


def test_a_project_directory_in_the_home_is_mounted(sb):
    src = sb.bb.user_home / "src" / "proj"
    src.mkdir(parents=True)
    sb.sandbox(extra=f"mounts:\n  - host: {src}\n    guest: /p\n    mode: rw\n")
    r = sb.run("run", NAME, "--", "true")
    assert r.rc == 0, r
    assert f"{src}:/p:rw" in volumes(before_image(sb.only_workload()))


# ---- isolation and its cache -----------------------------------------------------------

def test_first_run_verifies_and_records_the_cache(sb):
    sb.sandbox()
    assert not (sb.bb.home / "verify.json").exists()
    r = sb.run("run", NAME, "--", "echo", "hi")
    assert r.rc == 0, r
    assert r.out == b"hi\n", r
    assert b"re-verified" not in r.err and b"not isolated" not in r.err, r
    # Whatever else the first run says, it says it on stderr as bluebox.
    assert all(line.startswith(b"bluebox: verified isolation")
               for line in r.err.splitlines()), r
    runs = sb.runs()
    assert len(runs) == 3, runs
    assert [("__probe" in c) for c in runs] == [True, True, False], runs
    assert VMM_ENTRY not in runs[0] and VMM_ENTRY in runs[1], runs
    e = sb.cache_entry()
    release, _ = host_kernel()
    assert e["guest"] == FAKE_GUEST and e["baseline"] == release, e
    assert re.fullmatch(r"[0-9a-f]{16}", e["fingerprint"]), e


def test_second_run_is_a_cache_hit(sb):
    sb.sandbox()
    assert sb.run("run", NAME, "--", "true").rc == 0
    before = (sb.bb.home / "verify.json").read_bytes()
    sb.bb.podman_log.write_text("")
    r = sb.run("run", NAME, "--", "echo", "again")
    assert (r.rc, r.out, r.err) == (0, b"again\n", b""), r
    assert sb.probes() == [], sb.calls()
    assert len(sb.workloads()) == 1
    assert (sb.bb.home / "verify.json").read_bytes() == before


def touch_later(path):
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))


def replace_copy(path):
    data = path.read_bytes()
    mode = path.stat().st_mode
    path.unlink()
    path.write_bytes(data)
    path.chmod(mode)


@pytest.mark.parametrize("change", ["touch kernel", "replace kernel", "touch vmm", "replace vmm",
                                    "replace podman"])
def test_changed_runtime_reverifies(sb, change):
    sb.sandbox()
    sb.prime()
    what, which = change.split()
    target = {"kernel": sb.kernel, "vmm": sb.vmm, "podman": sb.podman}[which]
    (touch_later if what == "touch" else replace_copy)(target)
    r = sb.run("run", NAME, "--", "echo", "ok")
    assert r.rc == 0, r
    assert r.out == b"ok\n", r
    # it says which file changed (the bundle covers the kernel and bluebox-vmm too)
    assert r.err.startswith(b"bluebox: re-verified isolation (" + bytes(str(target), "utf-8")), r
    assert r.err.endswith(b" changed since the last check)\n") and r.err.count(b"\n") == 1, r
    assert len(sb.probes()) == 2, sb.calls()
    # and the new state is remembered: the next run is a hit again
    sb.bb.podman_log.write_text("")
    r = sb.run("run", NAME, "--", "true")
    assert (r.rc, r.err) == (0, b""), r
    assert sb.probes() == []


def test_changed_runtime_that_is_not_isolated_refuses(sb):
    sb.sandbox()
    sb.prime()
    touch_later(sb.kernel)
    release, _ = host_kernel()
    r = sb.run("run", NAME, "--", "echo", "should not run",
               env={"BB_STANDIN_GUEST_KERNEL": release})
    assert r.rc == 1, r
    assert r.out == b"", r
    assert b"not isolated" in r.err, r
    assert sb.workloads() == [], sb.calls()
    # and it stays refused: the failed check is not remembered as a pass
    r = sb.run("run", NAME, "--", "true", env={"BB_STANDIN_GUEST_KERNEL": release})
    assert r.rc == 1 and b"not isolated" in r.err, r
    assert sb.workloads() == []


@pytest.mark.parametrize("same", ["release", "boot_id"])
@pytest.mark.parametrize("cmd", ["run", "verify", "build"])
def test_guest_sharing_the_host_kernel_is_refused(sb, same, cmd):
    sb.sandbox(built=cmd != "build")
    release, boot_id = host_kernel()
    env = ({"BB_STANDIN_GUEST_KERNEL": release} if same == "release"
           else {"BB_STANDIN_GUEST_BOOT_ID": boot_id})
    args = {"run": ["run", NAME, "--", "echo", "leak"], "verify": ["verify", NAME],
            "build": ["build", NAME]}[cmd]
    r = sb.run(*args, env=env)
    assert r.rc == 1, r
    err = r.etext
    if cmd == "build":  # first, where the build's steps run
        posture, _, err = err.partition("\n")
        assert posture.startswith("build: each RUN step runs in a uml guest"), r
    assert err.startswith("bluebox: ") and err.endswith("\n") and err.count("\n") == 1, r
    assert "not isolated" in err, r
    assert f"shares the {'kernel release' if same == 'release' else 'boot_id'}" in err, r
    assert "This is a container, not a microVM" in err, r
    assert sb.workloads() == [], sb.calls()
    assert len(sb.probes()) == 2
    assert sb.cache_entry() is None, sb.cache()
    if cmd == "build":
        assert r.out == f"built {sb.bb.image(NAME)}\n".encode(), r
        assert "built, but isolation is not verified" in err, r
    else:
        assert r.out == b"", r


CORRUPTIONS = {
    "empty": lambda good: b"",
    "truncated": lambda good: good[:len(good) // 2],
    "garbage": lambda good: b"\x00\xffnot json",
    "trailing": lambda good: good + b"{}",
    "null": lambda good: b"null",
    "array": lambda good: b"[]",
    "version 2": lambda good: good.replace(b'"version": 1', b'"version": 2'),
    "no version": lambda good: good.replace(b'"version": 1', b'"v": 1'),
    "backends list": lambda good: b'{"version": 1, "backends": []}',
    "fingerprint number": lambda good: json.dumps(
        {"version": 1, "backends": {"uml": {"fingerprint": 5}}}).encode(),
    "duplicate key": lambda good: good.replace(b'"version": 1',
                                               b'"version": 1, "version": 1'),
}


@pytest.mark.parametrize("how", list(CORRUPTIONS))
def test_corrupt_cache_is_a_miss(sb, how):
    sb.sandbox()
    sb.prime()
    path = sb.bb.home / "verify.json"
    good = path.read_bytes()
    new = CORRUPTIONS[how](good)
    assert new != good
    path.write_bytes(new)
    r = sb.run("run", NAME, "--", "echo", "ok")
    assert r.rc == 0, r
    assert r.out == b"ok\n", r
    assert len(sb.probes()) == 2, sb.calls()
    assert sb.cache_entry()["guest"] == FAKE_GUEST


@pytest.mark.parametrize("how", list(CORRUPTIONS))
def test_corrupt_cache_is_never_a_pass(sb, how):
    """A cache that cannot be trusted makes bluebox check again, and the check refuses."""
    sb.sandbox()
    sb.prime()
    path = sb.bb.home / "verify.json"
    path.write_bytes(CORRUPTIONS[how](path.read_bytes()))
    release, _ = host_kernel()
    r = sb.run("run", NAME, "--", "echo", "leak", env={"BB_STANDIN_GUEST_KERNEL": release})
    assert r.rc == 1, r
    assert b"not isolated" in r.err, r
    assert sb.workloads() == [], sb.calls()


@pytest.mark.parametrize("entry", ["guest equals baseline", "fingerprint only"])
def test_malformed_cache_entry_is_not_a_pass(sb, entry):
    sb.sandbox()
    sb.prime()
    path = sb.bb.home / "verify.json"
    c = json.loads(path.read_text())
    e = c["backends"]["uml"]
    if entry == "guest equals baseline":
        e["guest"] = e["baseline"]
    else:
        c["backends"]["uml"] = {"fingerprint": e["fingerprint"]}
    path.write_text(json.dumps(c))
    release, _ = host_kernel()
    r = sb.run("run", NAME, "--", "echo", "leak", env={"BB_STANDIN_GUEST_KERNEL": release})
    assert r.rc == 1 and b"not isolated" in r.err, r
    assert sb.workloads() == [], sb.calls()


def test_cache_of_another_backend_does_not_count(sb):
    sb.sandbox()
    sb.prime()
    path = sb.bb.home / "verify.json"
    c = json.loads(path.read_text())
    c["backends"] = {"krun": c["backends"]["uml"]}
    path.write_text(json.dumps(c))
    r = sb.run("run", NAME, "--", "true")
    assert r.rc == 0, r
    assert len(sb.probes()) == 2, sb.calls()


def test_verify_prints_both_kernels_and_always_probes(sb):
    sb.sandbox()
    sb.prime()
    release, _ = host_kernel()
    r = sb.run("verify", NAME)
    assert r.rc == 0, r
    first, posture = r.out.decode().splitlines()
    assert first == f"isolated: host {release}, guest {FAKE_GUEST} (uml)", r
    # the posture line says what the boundary is, and what it is not
    assert posture.startswith(f"isolation: uml guest kernel {FAKE_GUEST} (ptrace boundary, "
                              "weaker than KVM) · network none · /data rw · mounts: none · "
                              "caps 6 · "), r
    assert posture.endswith(" · standard"), r
    assert r.err == b"", r
    assert len(sb.probes()) == 2 and sb.workloads() == [], sb.calls()


def test_posture_says_uml_gives_one_cpu(sb):
    """cpus: is not silently ignored: uml's guest has one CPU, and the posture line says so."""
    sb.sandbox(extra="cpus: 4\n")
    sb.prime()
    r = sb.run("verify", NAME)
    assert r.rc == 0, r
    posture = r.out.decode().splitlines()[1]
    assert posture.endswith(" · 1 CPU (uml has no SMP; cpus: 4 ignored) · standard"), r
    sb.sandbox(extra="cpus: 1\n")
    r = sb.run("verify", NAME)
    assert r.rc == 0 and "CPU" not in r.out.decode(), r


def test_failing_probe_is_reported_not_passed(sb):
    """A probe that prints nonsense is not a kernel id."""
    sb.sandbox()
    r = sb.run("run", NAME, "--", "echo", "leak",
               env={"BB_STANDIN_GUEST_KERNEL": "two words"})
    assert r.rc == 1, r
    assert b"not isolated" not in r.err and r.err.startswith(b"bluebox: "), r
    assert sb.workloads() == [], sb.calls()
    assert sb.cache_entry() is None


# ---- refusals before anything runs -----------------------------------------------------

def test_run_unbuilt_sandbox(sb):
    sb.sandbox(built=False)
    r = sb.run("run", NAME, "--", "true")
    assert r.rc == 1, r
    assert r.out == b"", r
    assert r.err == f"bluebox: {NAME} is not built yet: bluebox build {NAME}\n".encode(), r
    assert sb.runs() == []


def home_files(sb):
    return sorted(str(p.relative_to(sb.bb.home)) for p in sb.bb.home.rglob("*"))


@pytest.mark.parametrize("args", [["run", NAME, "--", "true"], ["shell", NAME], ["verify", NAME],
                                  ["build", NAME], ["up", NAME]])
def test_more_ram_than_the_backend_can_give_is_refused_before_anything_runs(sb, args):
    """The Bluefile takes ram_mib up to 1048576; bluebox-vmm (uml) at most 65536. The backend's
    limit is checked once, before podman is asked for anything."""
    sb.sandbox(extra="backend: uml\nram_mib: 100000\n")
    before = home_files(sb)
    r = sb.run(*args, env={"BLUEBOX_BACKEND": None})
    assert r.rc == 1, r
    assert r.out == b"", r
    assert r.err == (b"bluebox: ram_mib 100000 is more than the uml backend can give a guest "
                     b"(at most 65536); lower ram_mib in the Bluefile\n"), r
    assert sb.calls() == [], sb.calls()
    assert home_files(sb) == before


@pytest.mark.parametrize("args", [["run", NAME], ["run", NAME, "--"]])
def test_run_without_command_is_usage_error(sb, args):
    sb.sandbox()
    r = sb.run(*args)
    assert r.rc == 2, r
    assert r.out == b"", r
    assert r.err == (f"bluebox: run needs a command: bluebox run {NAME} -- <cmd…>\n"
                     .encode()), r
    assert sb.calls() == []


def test_run_missing_sandbox(sb):
    r = sb.run("run", "nope", "--", "true")
    assert r.rc == 1, r
    assert b"nope" in r.err, r
    assert sb.runs() == []


# ---- shell -----------------------------------------------------------------------------

def test_shell_piped(sb):
    sb.sandbox()
    sb.prime()
    r = sb.run("shell", NAME, input=b"echo from-shell\nexit 4\n")
    assert r.rc == 4, r
    assert r.out == b"from-shell\n", r
    argv = sb.only_workload()
    check_confinement(sb, argv)
    assert after_image(argv) == ["/bin/sh", "-l"], argv
    assert "-i" in before_image(argv) and "-t" not in before_image(argv), argv
    assert "--env=BLUEBOX_MODE=shell" in argv, argv


def test_shell_on_a_terminal_gets_t(sb):
    sb.sandbox()
    sb.prime()
    r = sb.bb.run_tty("shell", NAME, answer="exit 6\n", timeout=5)
    assert r.rc == 6, r
    argv = sb.only_workload()
    assert after_image(argv) == ["/bin/sh", "-l"], argv
    head = before_image(argv)
    assert "-i" in head and "-t" in head, argv


# ---- doctor ----------------------------------------------------------------------------

DOCTOR_LINE = re.compile(r"  (ok  |warn|FAIL)  \S.*|          fix: \S.*")


def test_doctor_reports_every_check(sb):
    r = sb.run("doctor")
    text = r.text
    assert r.rc == 0, r
    assert r.err == b"", r
    lines = text.splitlines()
    assert lines and all(DOCTOR_LINE.fullmatch(l) for l in lines), text
    assert not any(l.startswith("  FAIL") for l in lines), text
    podman = [l for l in lines if re.match(r"  ok    podman\s", l)]
    assert podman and str(sb.podman) in podman[0], text
    assert any(re.match(r"  ok    user-mode-linux\s", l) for l in lines), text
    assert ["--version"] in sb.calls()
    assert sb.runs() == [], "doctor must not boot anything"


def test_doctor_without_podman_fails(sb, tmp_path):
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    r = sb.run("doctor", env={"PATH": str(empty)})
    assert r.rc == 1, r
    lines = r.text.splitlines()
    assert all(DOCTOR_LINE.fullmatch(l) for l in lines), r
    assert any(re.match(r"  FAIL  podman\s+not installed", l) for l in lines), r
    fails = sum(l.startswith("  FAIL") for l in lines)
    assert r.err == f"bluebox: {fails} check{'s' if fails != 1 else ''} broken\n".encode(), r


# ---- destroy ---------------------------------------------------------------------------

def strays_ps(sb):
    """The ps that finds this home's leftover containers of the sandbox: both labels."""
    return ["ps", "-aq", "--filter", f"label=bluebox.sandbox={NAME}", "--filter",
            f"label=bluebox.home={sb.bb.home_id()}"]


def test_destroy_removes_stray_containers_by_label(sb):
    sb.sandbox()
    r = sb.run("destroy", NAME, env={"BB_STANDIN_PS_IDS": "abc123 def456"})
    assert r.rc == 0, r
    calls = sb.calls()
    ps = strays_ps(sb)
    assert ps in calls, calls
    rm = ["rm", "-f", "-t", "0", "abc123", "def456"]
    assert rm in calls, calls
    assert calls.index(ps) < calls.index(rm)
    assert not sb.bb.sandbox_dir(NAME).exists()


def test_destroy_without_stray_containers_removes_none(sb):
    sb.sandbox()
    r = sb.run("destroy", NAME)
    assert r.rc == 0, r
    assert strays_ps(sb) in sb.calls()
    assert sb.removes() == [], sb.calls()


# ---- messages that say what to do ------------------------------------------------------

def test_doctor_summary_follows_bluebox_backend(sb):
    """With BLUEBOX_BACKEND=uml set, krun's absence is not what decides: the summary says uml,
    and that BLUEBOX_BACKEND chose it."""
    r = sb.run("doctor")
    assert r.rc == 0, r
    line = [l for l in r.text.splitlines() if re.match(r"  (ok  |warn)  backend\s", l)]
    assert len(line) == 1, r.text
    assert line[0].startswith("  ok    backend") and "uml" in line[0], r.text
    assert "BLUEBOX_BACKEND" in line[0] and "cannot run" not in line[0], r.text
    # what krun lacks is no warning while krun is not the backend
    krun = [l for l in r.text.splitlines() if re.match(r"  (ok  |warn)  (krun|/dev/kvm)\s", l)]
    assert krun and all(l.startswith("  ok") for l in krun), r.text
    assert any("not needed: BLUEBOX_BACKEND=uml" in l for l in krun), r.text
    # without it the default's verdict stands, and says it is the default
    r = sb.run("doctor", env={"BLUEBOX_BACKEND": None})
    line = [l for l in r.text.splitlines() if re.match(r"  (ok  |warn)  backend\s", l)]
    assert len(line) == 1 and "the default" in line[0], r.text


@pytest.mark.skipif(shutil.which("krun") is not None, reason="krun is installed here")
def test_krun_preflight_names_the_backend_that_runs_here(sb):
    """/dev/kvm but no krun: the refusal says how to get krun and that uml runs here."""
    if not kvm_openable():
        pytest.skip("needs an openable /dev/kvm (the no-KVM refusal is another message)")
    sb.sandbox()
    r = sb.run("run", NAME, "--", "true", env={"BLUEBOX_BACKEND": None})
    assert r.rc != 0, r
    msg = r.etext
    assert "no krun on PATH: install crun built with libkrun" in msg, r
    assert "sudo ln -sf" in msg, r
    assert "backend: uml" in msg and "runs on this host" in msg, r
    assert sb.runs() == [], sb.calls()


# A private /dev where /dev/kvm is a regular file (what `exec 3<>/dev/kvm` in a shell leaves
# on a host without KVM), then bluebox: nothing outside the mount namespace changes.
FAKE_KVM = r"""
set -e
mkdir -p "$T/dev"
mount --rbind /dev "$T/dev"
mount -t tmpfs -o mode=755 bb-dev /dev
for n in null zero urandom random tty; do touch /dev/$n; mount --bind "$T/dev/$n" /dev/$n; done
: > /dev/kvm
exec "$@"
"""


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None,
                    reason="needs root and unshare(1) for a private /dev")
def test_a_regular_file_at_dev_kvm_is_no_kvm(sb):
    """A file at /dev/kvm opens, but it is no KVM device (podman refuses to pass it): doctor,
    krun's and qemu's preflights say so instead of going ahead and failing in podman."""
    sb.sandbox()

    def fake(*args, env=None):
        e = {"T": str(sb.bb.tmp / "fakedev"), **(env or {})}
        return sb.run(*args, env=e)

    real_bin = sb.bb.bin
    wrapper = sb.bb.tmp / "fake-kvm.sh"
    wrapper.write_text("#!/bin/sh\nexec unshare -m --propagation private sh -c "
                       f"'{FAKE_KVM}' sh {real_bin} \"$@\"\n")
    wrapper.chmod(0o755)
    sb.bb.bin = str(wrapper)
    try:
        r = fake("doctor", env={"BLUEBOX_BACKEND": None})
        line = [l for l in r.text.splitlines() if re.match(r"  (ok  |warn)  /dev/kvm\s", l)]
        assert len(line) == 1 and line[0].startswith("  warn"), r.text
        assert "not a device node" in line[0], r.text
        accel = [l for l in r.text.splitlines() if "qemu acceleration" in l]
        assert accel and accel[0].endswith("KVM: /dev/kvm is not a device node"), r.text
        r = fake("run", NAME, "--", "true", env={"BLUEBOX_BACKEND": None})
        assert r.rc != 0 and "/dev/kvm is not a device node" in r.etext, r
        r = fake("run", NAME, "--", "true", env={"BLUEBOX_BACKEND": "qemu",
                                                  "BLUEBOX_QEMU_ACCEL": None})
        assert r.rc != 0 and "/dev/kvm is not a device node" in r.etext, r
        assert sb.runs() == [], sb.calls()
    finally:
        sb.bb.bin = real_bin
    assert not (Path("/dev/kvm").exists() and not Path("/dev/kvm").is_char_device())


@pytest.mark.parametrize("cached", [True, False], ids=["cache-hit", "cache-miss"])
def test_deleted_image_says_build(sb, cached):
    """image-id is recorded but podman lost the image (podman rmi): not podman's "image not
    known" but what to do."""
    sb.sandbox()
    if cached:
        sb.prime()
    env = {"BB_STANDIN_GONE_IMAGES": sb.bb.image(NAME)}
    r = sb.run("run", NAME, "--", "echo", "hi", env=env)
    assert r.rc == 1, r
    assert r.err.endswith(f"bluebox: {NAME} is not built: bluebox build {NAME} (its image is "
                          "gone from podman)\n".encode()), r
    assert r.out == b"", r


def test_stale_bluefile_warns_and_runs_the_old_image(sb):
    sb.sandbox()
    sb.prime()
    touch_later(sb.bb.bluefile(NAME))
    r = sb.run("run", NAME, "--", "echo", "ok")
    assert (r.rc, r.out) == (0, b"ok\n"), r
    assert r.err == (f"bluebox: warning: {NAME}'s Bluefile changed since it was built; run: "
                     f"bluebox build {NAME}\n").encode(), r
    # a run whose image is there asks podman nothing more than before (no `image exists`)
    assert not [c for c in sb.calls() if c[:2] == ["image", "exists"]], sb.calls()
    # a build (here: its image-id) clears it
    touch_later(sb.bb.sandbox_dir(NAME) / "image-id")
    touch_later(sb.bb.sandbox_dir(NAME) / "image-id")
    r = sb.run("run", NAME, "--", "true")
    assert (r.rc, r.err) == (0, b""), r


def test_a_misspelt_launch_path_is_refused(sb):
    sb.sandbox()
    r = sb.run("run", NAME, "--", "true", env={"BLUEBOX_LAUNCH": "podmn"})
    assert r.rc != 0 and b"BLUEBOX_LAUNCH=podmn is neither direct" in r.err, r
    assert not sb.runs(), sb.calls()
