"""The host side of allow: and secrets: with real podman and uml guests (the VMM's side —
DNS, the proxy, substitution — is tests/integration/test_egress.py and test_secrets.py).

What is checked here: a secret's value reaches podman only as fd 3 (--preserve-fds=1), also
for `up`'s detached container; it is in no `podman inspect`, no argv and no environment of
any process on the machine (podman, conmon, the VMM: /proc/<pid>/cmdline and environ), and
the guest's environment holds the placeholder; the connection log is the VMM's bind mount,
0600; a secret that cannot be read stops the boot before podman, naming no value."""
import json
import os
import re
import stat
import subprocess
import uuid
from pathlib import Path

import pytest

from test_podman_build import env, podman  # noqa: F401  (session fixture + helper)
from test_runtime import IMAGE, UML, Home

PH_RE = re.compile(rb"BLUEBOX_SECRET_[0-9a-f]{32}")


def token(tag):
    return f"bbtest-{tag}-{uuid.uuid4().hex}"


def processes_holding(value):
    """pids (not ours) whose argv or environment holds value."""
    hits = []
    needle = value.encode()
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or int(d.name) == os.getpid():
            continue
        for f in ("cmdline", "environ"):
            try:
                if needle in (d / f).read_bytes():
                    hits.append((d.name, f, (d / "cmdline").read_bytes()[:200]))
            except OSError:
                pass
    return hits


def conmon_of(cid):
    """pids of conmon processes whose argv names the container id."""
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            cmd = (d / "cmdline").read_bytes()
        except OSError:
            continue
        if cmd.split(b"\0")[0].endswith(b"conmon") and cid.encode() in cmd:
            out.append(int(d.name))
    return out


@pytest.fixture
def home(env, bluebox_bin):  # noqa: F811
    h = Home(bluebox_bin)
    yield h
    h.close()


def secret_box(home, file_token):
    f = home.dir / "token.txt"
    f.write_text(file_token + "\n")
    f.chmod(0o600)
    name = home.sandbox(f"egress-{os.getpid()}", f"""base: {IMAGE}
backend: uml
ram_mib: 256
network: bridge
allow:
  - api.example.com
  - "*.example.org:8443"
secrets:
  - name: API_TOKEN
    from_env: BB_TEST_TOKEN
    hosts: [api.example.com]
  - name: FILE_TOKEN
    from_file: {f}
    hosts: [a.example.org]
""")
    r = home("build", name)
    assert r.returncode == 0, r
    assert b"network allow 2 hosts, 2 secrets" in r.stdout + r.stderr, r
    return name


def test_detached_podman_keeps_a_preserved_fd(env):  # noqa: F811
    """What `up` relies on: `podman run -d --preserve-fds=1` hands fd 3 to a detached
    container's process (conmon keeps it until the process starts)."""
    name = f"bluebox-pfd-{uuid.uuid4().hex[:8]}"
    secret = token("pfd")
    fd = os.memfd_create("bluebox-test", 0)
    os.write(fd, secret.encode())
    os.lseek(fd, 0, os.SEEK_SET)
    try:
        subprocess.run(["podman", "run", "-d", "--pull=never", "--network=none",
                        "--preserve-fds=1", f"--name={name}", IMAGE, "sh", "-c",
                        "cat <&3; echo; sleep 2"],
                       # fd 3 is kept: the closing of other fds comes after preexec_fn
                       pass_fds=(fd, 3), preexec_fn=lambda: os.dup2(fd, 3), check=True,
                       capture_output=True, cwd="/")
        podman("wait", name)
        assert podman("logs", name).stdout.strip() == secret
        assert secret not in podman("inspect", name).stdout
    finally:
        os.close(fd)
        podman("rm", "-f", "-t", "0", name, check=False)


@UML
def test_secrets_stay_out_of_podman_and_the_guest_environment(home):
    env_token, file_token = token("env"), token("file")
    name = secret_box(home, file_token)
    run_env = {"BB_TEST_TOKEN": env_token}
    # run: the guest's variables are placeholders
    r = home("run", name, "--", "sh", "-c",
             "echo API=$API_TOKEN; echo FILE=$FILE_TOKEN; cat /proc/self/environ /proc/1/environ",
             env=run_env, timeout=180)
    assert r.returncode == 0, r
    out = r.stdout + r.stderr
    assert env_token.encode() not in out and file_token.encode() not in out, r
    api = re.search(rb"API=(\S+)", r.stdout).group(1)
    assert PH_RE.fullmatch(api), r
    assert PH_RE.fullmatch(re.search(rb"FILE=(\S+)", r.stdout).group(1)), r
    # up: a detached container; look while it runs
    r = home("up", name, env=run_env, timeout=240)
    assert r.returncode == 0, r
    try:
        cid = podman("ps", "-q", "--no-trunc", "--filter", f"label=bluebox.sandbox={name}"
                     ).stdout.split()
        assert len(cid) == 1, cid
        inspect = podman("inspect", cid[0]).stdout
        assert env_token not in inspect and file_token not in inspect
        cfg = json.loads(inspect)[0]
        envs = cfg["Config"]["Env"]
        assert any(PH_RE.fullmatch(e.split("=", 1)[1].encode()) for e in envs
                   if e.startswith("API_TOKEN=")), envs
        assert "BLUEBOX_SECRETS_FD=3" in envs, envs
        mounts = {m["Destination"]: m for m in cfg["Mounts"]}
        log = home.dir / "home" / "logs" / "net" / f"{name}.log"
        assert mounts["/.bluebox/net.log"]["Source"] == str(log), mounts
        assert stat.S_IMODE(log.stat().st_mode) == 0o600
        assert conmon_of(cid[0]), "no conmon found for the container: nothing was looked at"
        assert processes_holding(env_token) == []
        assert processes_holding(file_token) == []
        r = home("exec", name, "--", "sh", "-c", "echo API=$API_TOKEN; cat /proc/self/environ")
        assert r.returncode == 0, r
        assert env_token.encode() not in r.stdout + r.stderr, r
        assert PH_RE.fullmatch(re.search(rb"API=(\S+)", r.stdout).group(1)), r
    finally:
        home("down", name)


@UML
def test_a_secret_that_cannot_be_read_stops_the_boot(home):
    file_token = token("file")
    name = secret_box(home, file_token)
    r = home("run", name, "--", "true", env={"BB_TEST_TOKEN": ""}, timeout=120)
    assert r.returncode == 1, r
    assert b"secret API_TOKEN: its value is empty" in r.stderr, r
    home_env = dict(home.env)
    home_env.pop("BB_TEST_TOKEN", None)
    (home.dir / "token.txt").chmod(0o644)
    r = home("up", name, env={"BB_TEST_TOKEN": token("env")}, timeout=120)
    assert r.returncode == 1, r
    assert b"can be read by others (mode 0644)" in r.stderr, r
    assert file_token.encode() not in r.stderr + r.stdout
    assert podman("ps", "-aq", "--filter", f"label=bluebox.sandbox={name}").stdout.strip() == ""


def subuid(user):
    return int(next(line.split(":")[1] for line in open("/etc/subuid")
                    if line.startswith(user + ":")))


@UML
def test_strict_rootless_log_is_the_sandbox_roots_and_logs_net_reads_it(env, bluebox_bin):  # noqa: F811
    """Under strict isolation the VMM is a subordinate UID: the log is handed to it (0600), so
    the user cannot open it, and `logs --net` reads it through podman's user namespace."""
    user = env["BLUEBOX_TEST_USER"]
    h = Home(bluebox_bin, user=user)
    try:
        name = h.sandbox(f"egress-strict-{os.getpid()}", f"base: {IMAGE}\nbackend: uml\n"
                         "ram_mib: 256\nisolation: strict\nnetwork: bridge\n"
                         "allow: [api.example.com]\n")
        r = h("build", name)
        assert r.returncode == 0, r
        r = h("run", name, "--", "true", timeout=180)
        assert r.returncode == 0, r
        log = h.dir / "home" / "logs" / "net" / f"{name}.log"
        st = log.stat()
        assert st.st_uid == subuid(user) and stat.S_IMODE(st.st_mode) == 0o600, st
        with open(log, "a") as f:  # as the VMM would (root here keeps the owner)
            f.write(json.dumps({"time": "2026-12-01T00:00:00Z", "name": "api.example.com",
                                "port": 443, "decision": "allow", "rule": "api.example.com",
                                "bytes_up": 1, "bytes_down": 2, "ms": 3}) + "\n")
        r = h("logs", name, "--net")
        assert r.returncode == 0, r
        assert b"api.example.com:443  allow" in r.stdout, r
    finally:
        h.close()
