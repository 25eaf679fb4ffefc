"""Untrusted bytes never drive the user's terminal.

A Bluefile (values, run lines), a run log (whatever a guest printed) and file names in
BLUEBOX_HOME can hold terminal escape sequences: `ESC ] 0 ; title BEL` retitles the window,
`ESC [ 2 J` clears the screen, and worse ones exist. On a terminal bluebox shows them
escaped (`\\x1b`, `\\u009b`); piped, `env`, `logs` and `build --dry-run` stay byte-exact, so
`eval "$(bluebox env NAME)"` still gives the exact value. Each test drives the binary with
stdout and stderr on a pseudo-terminal, as a person at a terminal would see it.
"""
import os
import select
import stat
import subprocess
import tty

import pytest

ESC, BEL = b"\x1b", b"\x07"
C1_CSI = "\u009b".encode()  # what a terminal also obeys as CSI, in UTF-8
TITLE = ESC + b"]0;PWNED" + BEL
CLEAR = ESC + b"[2J"
RAW = [ESC, BEL, C1_CSI, b"\x9b"]

# YAML escapes (libyaml takes no raw control bytes): \e ESC, \a BEL, \u009b the C1 CSI.
EVIL_VALUE = TITLE + CLEAR + C1_CSI + b"31m"
BLUEFILE = r'''base: localhost/bluebox-test/busybox:latest
env:
  EVIL: "\e]0;PWNED\a\e[2J\u009b31m"
  PLAIN: "it's $HOME `x`"
run:
  - "echo \e]0;RUNLINE\a \e[2J"
blueprint:
  runcmd:
    - "echo \u009b2J"
'''


def run_pty(bb, *args, env=None, answer=None, timeout=20):
    """Run bluebox with stdout and stderr on one raw pseudo-terminal; return (rc, bytes).
    With `answer`, stdin is that terminal too and `answer` is typed into it."""
    master, slave = os.openpty()
    tty.setraw(slave)  # no \n -> \r\n translation: compare the bytes bluebox wrote
    try:
        p = subprocess.Popen([bb.bin, *[str(a) for a in args]],
                             stdin=subprocess.DEVNULL if answer is None else slave,
                             stdout=slave, stderr=slave, env=bb._env(env), cwd=bb.tmp,
                             start_new_session=True)
        os.close(slave)
        slave = -1
        if answer is not None:
            os.write(master, answer)
        out = b""
        while True:
            r, _, _ = select.select([master], [], [], timeout)
            if not r:
                p.kill()
                raise AssertionError(f"bluebox {args} hung; output so far {out!r}")
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: every slave fd is closed
                break
            if not chunk:
                break
            out += chunk
        return p.wait(timeout=timeout), out
    finally:
        if slave >= 0:
            os.close(slave)
        os.close(master)


def run_piped(bb, *args):
    p = subprocess.run([bb.bin, *[str(a) for a in args]], stdin=subprocess.DEVNULL,
                       capture_output=True, env=bb._env(None), cwd=bb.tmp, timeout=20)
    return p.returncode, p.stdout, p.stderr


def assert_no_raw_escapes(out):
    for b in RAW:
        assert b not in out, f"raw {b!r} reached the terminal: {out!r}"


@pytest.fixture
def evil(bb):
    bb.write_bluefile("s", BLUEFILE)
    return bb


def test_env_on_a_terminal_is_escaped(evil):
    rc, out = run_pty(evil, "env", "s")
    assert rc == 0, out
    assert_no_raw_escapes(out)
    assert b"BLUEBOX_ENV_EVIL='\\x1b]0;PWNED\\x07\\x1b[2J\\u009b31m'\n" in out
    # The plain value is untouched, and the user is told why the other one looks odd.
    assert b"BLUEBOX_ENV_PLAIN='it'\\''s $HOME `x`'\n" in out
    assert b"bluebox: control characters are shown escaped" in out


def test_env_piped_is_byte_exact_and_evals_to_the_value(evil):
    rc, out, err = run_piped(evil, "env", "s")
    assert rc == 0 and err == b"", err
    assert b"BLUEBOX_ENV_EVIL='" + EVIL_VALUE + b"'\n" in out
    script = 'eval "$("$BB" env s)"; printf %s "$BLUEBOX_ENV_EVIL"; printf / ; ' \
             'printf %s "$BLUEBOX_ENV_PLAIN"'
    got = subprocess.run(["sh", "-c", script], capture_output=True, timeout=20,
                         env=evil._env({"BB": evil.bin})).stdout
    assert got == EVIL_VALUE + b"/it's $HOME `x`"


def test_env_without_escapes_prints_no_note(bb):
    bb.write_bluefile("s", "env:\n  A: 'caf\u00e9 \u2603'\n")
    rc, out = run_pty(bb, "env", "s")
    assert rc == 0
    assert "BLUEBOX_ENV_A='caf\u00e9 \u2603'\n".encode() in out
    assert b"shown escaped" not in out


def test_build_dry_run_on_a_terminal_is_escaped(evil):
    rc, out = run_pty(evil, "build", "--dry-run", "s")
    assert rc == 0, out
    assert_no_raw_escapes(out)
    assert b'ENV EVIL="\\x1b]0;PWNED\\x07\\x1b[2J\\u009b31m"\n' in out
    assert b"RUN echo \\x1b]0;RUNLINE\\x07 \\x1b[2J\n" in out
    assert b"RUN echo \\u009b2J\n" in out


def test_build_dry_run_piped_is_byte_exact(evil):
    rc, out, _ = run_piped(evil, "build", "--dry-run", "s")
    assert rc == 0
    assert b"RUN echo " + ESC + b"]0;RUNLINE" + BEL + b" " + CLEAR + b"\n" in out
    assert b'ENV EVIL="' + EVIL_VALUE + b'"\n' in out


def test_env_name_with_escapes_is_refused_in_one_escaped_line(bb):
    bb.write_bluefile("s", 'env:\n  "\\e]0;PWNED\\a": x\n')
    rc, out = run_pty(bb, "env", "s")
    assert rc == 1
    assert_no_raw_escapes(out)
    assert b"\\x1b]0;PWNED\\x07" in out and out.count(b"\n") == 1, out


LOG = (b"\n=== 2026-01-01T00:00:00Z run: 'sh' '-c' 'evil'\n"
       b"hello " + TITLE + CLEAR + b"\r\n" + C1_CSI + b"1m bytes \x9b\x00 end\tcol\n"
       b"=== exit 0 (0.10s)\n")


def test_logs_on_a_terminal_are_escaped(bb):
    bb.new("s")
    bb.log("s").parent.mkdir(parents=True, exist_ok=True)
    bb.log("s").write_bytes(LOG)
    rc, out = run_pty(bb, "logs", "s")
    assert rc == 0, out
    assert_no_raw_escapes(out)
    assert b"\x00" not in out
    # Lines, tabs and CRLF line ends stay as they are; everything else is shown escaped.
    assert out == (b"\n=== 2026-01-01T00:00:00Z run: 'sh' '-c' 'evil'\n"
                   b"hello \\x1b]0;PWNED\\x07\\x1b[2J\r\n\\u009b1m bytes \\x9b\\x00 end\tcol\n"
                   b"=== exit 0 (0.10s)\n")


def test_logs_piped_are_byte_exact(bb):
    bb.new("s")
    bb.log("s").parent.mkdir(parents=True, exist_ok=True)
    bb.log("s").write_bytes(LOG)
    rc, out, _ = run_piped(bb, "logs", "s")
    assert rc == 0 and out == LOG


def test_ls_on_a_terminal_escapes_the_base(bb):
    # base refuses C0 controls; a C1 control in UTF-8 is the one a Bluefile can still carry.
    bb.write_bluefile("s", 'base: "busybox\\u009b2J"\n')
    rc, out = run_pty(bb, "ls")
    assert rc == 0, out
    assert_no_raw_escapes(out)
    assert b"busybox\\u009b2J\n" in out


def test_snapshot_list_on_a_terminal_escapes_file_names(bb):
    bb.new("s")
    snaps = bb.snapshots("s")
    snaps.mkdir(parents=True, exist_ok=True)
    (snaps / os.fsdecode(TITLE + b".tar.gz")).write_bytes(b"")
    rc, out = run_pty(bb, "snapshot", "-l", "s")
    assert rc == 0, out
    assert_no_raw_escapes(out)
    assert b"\\x1b]0;PWNED\\x07.tar.gz" in out


# A podman whose build prints what a hostile Bluefile's steps would: escapes on stdout and
# stderr, a UTF-8 character and a CRLF each cut in two by a pause (so they arrive in two
# reads, and must not be shown as broken bytes).
PODMAN_BUILD_STUB = r'''#!/usr/bin/python3
import sys, time
args = sys.argv[1:]
if args[:2] == ["image", "exists"]:
    sys.exit(0)  # the base is here
if args[:1] != ["build"]:
    sys.exit(1)
out, err = sys.stdout.buffer, sys.stderr.buffer
out.write(b"STEP 2/2: RUN echo \x1b]0;PWNED\x07\nbuilt caf\xc3"); out.flush()
time.sleep(0.2)
out.write(b"\xa9 line\r"); out.flush()
time.sleep(0.2)
out.write(b"\nend\n"); out.flush()
err.write(b"warning \xc2\x9b2J \x1b[2J\n"); err.flush()
for a in args:
    if a.startswith("--iidfile="):
        open(a[len("--iidfile="):], "w").write("sha256:" + "ab" * 32)
'''
BUILD_OUT = (b"STEP 2/2: RUN echo \x1b]0;PWNED\x07\nbuilt caf\xc3\xa9 line\r\nend\n")
BUILD_ERR = b"warning \xc2\x9b2J \x1b[2J\n"


def stub_krun(bb):
    """The default backend, krun, builds with podman build --runtime krun: a krun on PATH
    (the stub podman never runs it)."""
    krun = bb.tmp / "stubbin" / "krun"
    krun.write_text("#!/bin/sh\nexit 1\n")
    krun.chmod(0o755)


@pytest.fixture
def build_stub(bb):
    stub = bb.tmp / "stubbin" / "podman"
    stub.write_text(PODMAN_BUILD_STUB)
    stub.chmod(0o755)
    stub_krun(bb)
    bb.write_bluefile("s", "base: localhost/x\n")
    return bb


def test_build_output_on_a_terminal_is_escaped(build_stub):
    rc, out = run_pty(build_stub, "build", "s")
    assert_no_raw_escapes(out)
    assert b"STEP 2/2: RUN echo \\x1b]0;PWNED\\x07\n" in out, out
    assert "built caf\u00e9 line\r\nend\n".encode() in out, out
    assert b"warning \\u009b2J \\x1b[2J\n" in out, out
    assert b"built localhost/bluebox/s:" in out, out


def test_build_output_piped_is_unchanged(build_stub):
    rc, out, err = run_piped(build_stub, "build", "s")
    assert out.startswith(BUILD_OUT), out
    posture, _, err = err.partition(b"\n")  # where the steps run, then podman's
    assert posture.startswith(b"build: "), posture
    assert err.startswith(BUILD_ERR), err


def build_log(bb):
    return bb.home / "logs" / "build" / "s.log"


def test_build_keeps_podmans_whole_output_in_the_build_log(build_stub):
    """Byte-exact and owner-only, whatever was shown."""
    run_pty(build_stub, "build", "s")
    log = build_log(build_stub)
    assert BUILD_OUT in log.read_bytes() and BUILD_ERR in log.read_bytes()
    assert stat.S_IMODE(log.stat().st_mode) == 0o600
    assert stat.S_IMODE(log.parent.stat().st_mode) == 0o700


def test_build_quiet_shows_only_the_step_lines(build_stub):
    rc, out, err = run_piped(build_stub, "build", "s", "-q")
    assert out.startswith(b"STEP 2/2: RUN echo \x1b]0;PWNED\x07\nbuilt localhost/bluebox/s:"), out
    assert b"built caf" not in out and b"end\n" not in out, out
    assert BUILD_ERR not in err, err
    log = build_log(build_stub).read_bytes()
    assert BUILD_OUT in log and BUILD_ERR in log


def test_build_quiet_on_a_terminal_escapes_the_step_lines(build_stub):
    rc, out = run_pty(build_stub, "build", "s", "--quiet")
    assert_no_raw_escapes(out)
    assert b"STEP 2/2: RUN echo \\x1b]0;PWNED\\x07\n" in out, out
    assert b"built caf" not in out and b"warning" not in out, out


def test_a_failed_build_names_the_build_log(bb):
    stub = bb.tmp / "stubbin" / "podman"
    stub.write_text(PODMAN_BUILD_STUB.replace("for a in args:", "sys.exit(3)\nfor a in args:"))
    stub.chmod(0o755)
    stub_krun(bb)
    bb.write_bluefile("s", "base: localhost/x\n")
    rc, out, err = run_piped(bb, "build", "s", "-q")
    assert rc == 1, (out, err)
    assert (f"podman build failed (exit 3); the previous image and Containerfile are unchanged; "
            f"podman's whole output is in {build_log(bb)}").encode() in err, err
    assert BUILD_OUT in build_log(bb).read_bytes()


def test_restore_question_on_a_terminal_is_escaped(bb):
    """The newest snapshot's file name is quoted in the confirmation question."""
    bb.new("s")
    (bb.data("s") / "keep").write_text("x")
    snaps = bb.snapshots("s")
    snaps.mkdir(parents=True, exist_ok=True)
    (snaps / os.fsdecode(TITLE + b".tar.gz")).write_bytes(b"")
    rc, out = run_pty(bb, "restore", "s", answer=b"n\n")
    assert rc == 1, out
    assert_no_raw_escapes(out)
    assert b"\\x1b]0;PWNED\\x07.tar.gz? [y/N] " in out, out


def test_completion_offers_no_snapshot_name_with_control_characters(bb):
    """Shells show completion candidates as they are: a file name bluebox could not have
    made (escapes, a newline) is not offered."""
    bb.new("s")
    snaps = bb.snapshots("s")
    snaps.mkdir(parents=True, exist_ok=True)
    (snaps / os.fsdecode(TITLE + b".tar.gz")).write_bytes(b"")
    (snaps / "two\nlines.tar").write_bytes(b"")
    (snaps / "good.tar.zst").write_bytes(b"")
    rc, out, _ = run_piped(bb, "__complete", "restore", "s", "")
    assert rc == 0
    assert out == b"good\n", out
