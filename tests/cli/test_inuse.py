"""reset, restore and destroy refuse while a run or shell has the sandbox's /data,
against the STAND-IN podman of test_run.py (the workload runs on the host and
its /data is the host directory, so "intact" is checked on the host).

Each run and shell holds locks/<name>.use shared for its whole life; the /data commands
take it exclusive without waiting. A run killed with SIGKILL releases it with its death, and
what it leaves — a VM podman keeps running — is found by its labels (the stand-in's `ps`
answers from the containers it started that are still alive).
"""
import os
import signal
import subprocess
import time

import pytest

from test_run import NAME, alive, sb, wait_for  # noqa: F401 (sb is a fixture)

# A workload that says it is ready and runs until the test creates the "go" file.
UNTIL_GO = 'while [ ! -e "$2" ]; do sleep 0.05; done; : > "$1"'

REFUSERS = {
    "reset": ["reset", NAME, "-y"],
    "restore": ["restore", NAME, "snap", "-y"],
    "destroy --data": ["destroy", NAME, "--data", "-y"],
}


def prepared(sb):
    sb.sandbox()
    sb.prime()
    data = sb.bb.data(NAME)
    data.mkdir(parents=True, exist_ok=True)
    (data / "keep.txt").write_text("precious\n")
    r = sb.run("snapshot", NAME, "snap", "-y")
    assert r.rc == 0, r
    return data


def start_until_go(sb):
    ready, go, done = sb.marker("ready"), sb.marker("go"), sb.marker("done")
    p = sb.start("run", NAME, "--", "sh", "-c", f': > "{ready}"; ' + UNTIL_GO, "sh", done, go)
    wait_for(ready, p)
    return p, go, done


def refused(sb, args, needle):
    r = sb.run(*args)
    assert r.rc == 1, r
    err = r.etext
    assert err.startswith("bluebox: ") and err.count("\n") == 1, r
    assert needle in err, r
    return err


@pytest.mark.parametrize("cmd", list(REFUSERS))
def test_data_commands_refuse_during_a_run_and_work_after(sb, cmd):
    data = prepared(sb)
    p, go, done = start_until_go(sb)
    err = refused(sb, REFUSERS[cmd], f"{NAME} is in use by bluebox run (pid {p.pid})")
    assert err.endswith("; wait for it to end or stop it first\n"), err
    assert (data / "keep.txt").read_text() == "precious\n"
    assert sb.bb.sandbox_dir(NAME).exists()
    go.write_text("")
    assert p.wait(timeout=10) == 0
    assert done.exists()  # the workload ran to its end with its /data
    r = sb.run(*REFUSERS[cmd])
    assert r.rc == 0, r


def test_a_shell_holds_data_too(sb):
    prepared(sb)
    ready, go = sb.marker("ready"), sb.marker("go")
    p = subprocess.Popen([sb.bb.bin, "shell", NAME], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=sb.env(),
                         cwd=sb.bb.tmp, start_new_session=True)
    sb.procs.append(p)
    p.stdin.write(f': > "{ready}"; while [ ! -e "{go}" ]; do sleep 0.05; done\n'.encode())
    p.stdin.close()
    wait_for(ready, p)
    refused(sb, ["reset", NAME, "-y"], f"{NAME} is in use by bluebox shell (pid {p.pid})")
    go.write_text("")
    p.wait(timeout=10)
    assert sb.run("reset", NAME, "-y").rc == 0


def test_several_runs_at_once_still_work_and_are_all_named(sb):
    prepared(sb)
    p1, go, _ = start_until_go(sb)
    os.unlink(sb.marker("ready"))
    p2 = sb.start("run", NAME, "--", "sh", "-c",
                  f': > "{sb.marker("ready")}"; while [ ! -e "{go}" ]; do sleep 0.05; done')
    wait_for(sb.marker("ready"), p2)
    err = refused(sb, ["reset", NAME, "-y"], "is in use by ")
    assert f"bluebox run (pid {p1.pid})" in err and f"bluebox run (pid {p2.pid})" in err, err
    assert err.endswith("; wait for them to end or stop them first\n"), err
    go.write_text("")
    assert p1.wait(timeout=10) == 0 and p2.wait(timeout=10) == 0
    assert sb.run("reset", NAME, "-y").rc == 0


def test_after_the_run_is_killed_9(sb):
    """SIGKILL leaves no lock behind; the VM the killed run left is named until it is gone."""
    data = prepared(sb)
    p, go, done = start_until_go(sb)
    p.send_signal(signal.SIGKILL)
    p.wait(timeout=5)
    (vm,) = [n for n in sb.containers() if alive(sb.containers()[n])]
    err = refused(sb, ["reset", NAME, "-y"], f"a VM of {NAME} is still running (container {vm})")
    assert f"podman rm -f {vm}" in err, err
    assert (data / "keep.txt").read_text() == "precious\n"
    assert sb.run("restore", NAME, "snap", "-y").rc == 1
    # its VM ends (here: is stopped as the message says); nothing is left to wait for
    go.write_text("")
    end = time.monotonic() + 10
    while alive(sb.containers()[vm]) and time.monotonic() < end:
        time.sleep(0.05)
    r = sb.run("reset", NAME, "-y")
    assert r.rc == 0, r
    assert sb.run("restore", NAME, "snap", "-y").rc == 0
    assert (data / "keep.txt").read_text() == "precious\n"
    assert sb.run("destroy", NAME, "--data", "-y").rc == 0


def test_a_stale_note_of_a_dead_process_blocks_nothing(sb):
    prepared(sb)
    users = sb.bb.home / "locks" / f"{NAME}.users"
    users.mkdir(parents=True, exist_ok=True)
    (users / "999999").write_text("run\n")  # a pid that is not running
    (users / str(os.getpid())).write_text("run\n")  # alive, but it holds no lock
    r = sb.run("reset", NAME, "-y")
    assert r.rc == 0, r
    assert not users.exists()
