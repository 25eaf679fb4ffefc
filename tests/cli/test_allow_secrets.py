"""allow:, secrets: and the connection log against the STAND-IN podman (tests/cli/test_run.py
says what the stand-in is and is not). The stand-in runs the workload on the host as the
process podman was, with podman's fds and environment: so these tests see what podman would
get — the argv, fd 3 (--preserve-fds=1), podman's environment — and that no secret value is
anywhere but in fd 3. Enforcement itself is the VMM's (tests/integration/test_egress.py);
the real podman path of the secrets is tests/integration/test_egress_host.py."""
import json
import os
import re
import stat

import pytest

from test_run import NAME, Standin, before_image, opt, volumes

TOKEN = "tok-ENV-3b1f2c9d8e7a"  # never to be seen outside fd 3
FILE_TOKEN = "tok-FILE-5a6b7c8d9e0f"
PH_RE = re.compile(r"BLUEBOX_SECRET_[0-9a-f]{32}")
POLICY = ("network: bridge\n"
          "allow:\n  - api.example.com\n  - \"*.example.org:8443\"\n  - 192.0.2.0/24\n")


@pytest.fixture
def sb(bb):
    s = Standin(bb)
    yield s
    s.cleanup()


def secret_file(sb, mode=0o600, text=FILE_TOKEN + "\n"):
    p = sb.bb.tmp / "token.txt"
    p.write_text(text)
    p.chmod(mode)
    return p


def with_secrets(sb, path):
    sb.sandbox(extra=POLICY + "secrets:\n"
               "  - {name: API_TOKEN, from_env: BB_TEST_TOKEN, hosts: [api.example.com]}\n"
               f"  - {{name: FILE_TOKEN, from_file: {path}, hosts: [a.example.org]}}\n")


def net_log(sb):
    return sb.bb.home / "logs" / "net" / f"{NAME}.log"


def test_secrets_reach_podman_only_as_fd_3(sb):
    """fd 3 holds the JSON with the values and placeholders; podman's argv has the
    placeholders and never a value; podman's environment and bluebox's own (its parent,
    /proc/<pid>/environ) hold no value: from_env is taken out of it before podman starts."""
    with_secrets(sb, secret_file(sb))
    out = sb.bb.tmp / "seen"
    script = (f'cat <&3 > {out}.fd3; tr "\\0" "\\n" < /proc/self/environ > {out}.env; '
              f'tr "\\0" "\\n" < /proc/$PPID/environ > {out}.parent; cat /proc/self/cmdline '
              f'> {out}.cmdline')
    r = sb.run("run", NAME, "--", "sh", "-c", script, env={"BB_TEST_TOKEN": TOKEN})
    assert r.rc == 0, r
    secrets = json.loads((sb.bb.tmp / "seen.fd3").read_text())
    assert [s["name"] for s in secrets] == ["API_TOKEN", "FILE_TOKEN"]
    assert [s["value"] for s in secrets] == [TOKEN, FILE_TOKEN]
    assert [s["hosts"] for s in secrets] == [["api.example.com"], ["a.example.org"]]
    for s in secrets:
        assert PH_RE.fullmatch(s["placeholder"]), s
    assert secrets[0]["placeholder"] != secrets[1]["placeholder"]
    argv = sb.only_workload()
    head = before_image(argv)
    # fd 3 the secrets' memfd, fd 4 the VM's lifeline (src/launch/lifeline.h)
    assert "--preserve-fds=2" in head and "--env=BLUEBOX_SECRETS_FD=3" in head, argv
    assert "--env=BLUEBOX_LIFELINE_FD=4" in head, argv
    assert f"--env=API_TOKEN={secrets[0]['placeholder']}" in head, argv
    assert f"--env=FILE_TOKEN={secrets[1]['placeholder']}" in head, argv
    for where in ("seen.env", "seen.parent", "seen.cmdline"):
        text = (sb.bb.tmp / where).read_text()
        assert TOKEN not in text and FILE_TOKEN not in text, where
    for call in sb.calls():
        assert not any(TOKEN in a or FILE_TOKEN in a for a in call), call
    assert TOKEN not in r.etext + r.text and FILE_TOKEN not in r.etext + r.text
    # a fresh placeholder per boot
    assert sb.run("run", NAME, "--", "true", env={"BB_TEST_TOKEN": TOKEN}).rc == 0
    again = [a for a in before_image(sb.workloads()[-1]) if a.startswith("--env=API_TOKEN=")]
    assert again and again[0] != f"--env=API_TOKEN={secrets[0]['placeholder']}"


def test_probe_gets_no_secrets(sb):
    with_secrets(sb, secret_file(sb))
    assert sb.run("run", NAME, "--", "true", env={"BB_TEST_TOKEN": TOKEN}).rc == 0
    assert sb.probes()
    for p in sb.probes():
        assert "--preserve-fds=1" not in p and not any("API_TOKEN" in a for a in p), p
        assert any(a.startswith("--env=BLUEBOX_NET_ALLOW=") for a in p), p


def test_policy_and_log_reach_the_argv(sb):
    sb.sandbox(extra=POLICY)
    r = sb.run("run", NAME, "--", "true")
    assert r.rc == 0, r
    head = before_image(sb.only_workload())
    assert opt(head, "--env") and "--network=bridge" in head
    assert ("--env=BLUEBOX_NET_ALLOW=api.example.com,*.example.org:8443,192.0.2.0/24"
            in head), head
    assert f"--env=BLUEBOX_SANDBOX={NAME}" in head
    assert f"{net_log(sb)}:/.bluebox/net.log:rw" in volumes(head), head
    assert "--env=BLUEBOX_NET_LOG=/.bluebox/net.log" in head
    # no secrets, no secrets fd: the only one preserved is the lifeline, as fd 3
    assert "--preserve-fds=1" in head and "--env=BLUEBOX_LIFELINE_FD=3" in head, head
    assert not any(a.startswith("--env=BLUEBOX_SECRETS_FD=") for a in head), head
    st = net_log(sb).stat()
    assert stat.S_IMODE(st.st_mode) == 0o600 and st.st_size == 0


def test_plain_bridge_has_no_policy_variables(sb):
    sb.sandbox(extra="network: bridge\n")
    assert sb.run("run", NAME, "--", "true").rc == 0
    head = before_image(sb.only_workload())
    assert not any("NET_ALLOW" in a or "net.log" in a or "SANDBOX=" in a for a in head), head
    assert not net_log(sb).exists()


def test_log_rotates_at_boot_over_4_mib(sb):
    sb.sandbox(extra=POLICY)
    log = net_log(sb)
    log.parent.mkdir(parents=True)
    log.write_bytes(b'{"name":"old"}\n' * (4 * 1024 * 1024 // 15 + 10))
    log.chmod(0o644)
    big = log.stat().st_size
    assert sb.run("run", NAME, "--", "true").rc == 0
    old = log.with_name(log.name + ".1")
    assert old.stat().st_size == big
    assert log.stat().st_size == 0 and stat.S_IMODE(log.stat().st_mode) == 0o600
    # under the limit: kept, appended to, made private
    log.write_text('{"name":"kept"}\n')
    log.chmod(0o644)
    assert sb.run("run", NAME, "--", "true").rc == 0
    assert log.read_text() == '{"name":"kept"}\n'
    assert stat.S_IMODE(log.stat().st_mode) == 0o600


@pytest.mark.parametrize("case", ["env-missing", "file-missing", "file-readable", "file-crlf"])
def test_unreadable_secret_is_a_clear_error_before_podman(sb, case):
    path = secret_file(sb, mode=0o640 if case == "file-readable" else 0o600,
                       text=("a" + FILE_TOKEN + "\nsecond\n") if case == "file-crlf" else
                       FILE_TOKEN)
    if case == "file-missing":
        path.unlink()
    with_secrets(sb, path)
    env = {"BB_TEST_TOKEN": None if case == "env-missing" else TOKEN}
    r = sb.run("run", NAME, "--", "true", env=env)
    assert r.rc != 0, r
    msg = r.etext
    want = {
        "env-missing": "secret API_TOKEN: the environment variable BB_TEST_TOKEN is not set",
        "file-missing": f"secret FILE_TOKEN: cannot open its file {path}",
        "file-readable": f"can be read by others (mode 0640); make it yours alone: chmod 600",
        "file-crlf": "holds a line break",
    }[case]
    assert want in msg, r
    assert TOKEN not in r.etext and FILE_TOKEN not in r.etext, r
    assert not sb.workloads(), sb.calls()


def test_posture_and_env_say_the_policy(sb):
    with_secrets(sb, secret_file(sb))
    r = sb.run("verify", NAME)
    assert r.rc == 0, r
    assert " · network allow 3 hosts, 2 secrets · " in r.text, r
    r = sb.run("env", NAME)
    assert r.rc == 0, r
    assert "BLUEBOX_NETWORK='bridge'\n" in r.text, r
    assert "BLUEBOX_NETWORK_REACH='allow 3 hosts, 2 secrets'\n" in r.text, r
    assert "BLUEBOX_ALLOW='api.example.com,*.example.org:8443,192.0.2.0/24'\n" in r.text, r
    assert "BLUEBOX_SECRETS='API_TOKEN,FILE_TOKEN'\n" in r.text, r
    r = sb.run("ls")
    assert r.rc == 0 and r.text.splitlines()[1].split()[5] == "allow", r


def test_krun_refuses_allow(sb):
    sb.sandbox(extra=POLICY)
    for cmd in (["run", NAME, "--", "true"], ["env", NAME], ["up", NAME]):
        r = sb.run(*cmd, env={"BLUEBOX_BACKEND": "krun"})
        assert r.rc != 0, r
        assert ("allow: and secrets: are enforced by bluebox's own VMM network path, which the "
                "krun backend does not have yet") in r.etext, r
        assert "set backend: uml" in r.etext, r
    assert not sb.runs(), sb.calls()


def test_bluefile_errors_name_the_line(bb):
    bb.new("b")
    bb.write_bluefile("b", "allow:\n  - api.example.com\n")
    bb.expect_bluefile_error("b", 2, 3, "allow needs network: bridge")
    bb.write_bluefile("b", "network: bridge\nallow:\n  - a.*.example.com\n")
    bb.expect_bluefile_error("b", 3, 5, "allow[0]: a wildcard is allowed only as a leading")
    bb.write_bluefile("b", "network: bridge\nallow: [a.example.com]\nsecrets:\n"
                           "  - {name: T, from_env: T, hosts: [b.example.com]}\n")
    bb.expect_bluefile_error("b", 4, 36, "secrets[0].hosts[0]: \"b.example.com\" is not "
                                         "covered by allow:")


# ---- logs --net ----------------------------------------------------------------------------

LINES = [
    {"time": "2026-11-30T23:59:01Z", "sandbox": NAME, "name": "api.example.com", "port": 443,
     "decision": "allow", "rule": "api.example.com", "bytes_up": 512, "bytes_down": 2048,
     "ms": 34},
    {"time": "2026-11-30T23:59:02Z", "sandbox": NAME, "name": "evil\x1b[31m.example.net",
     "port": 80, "decision": "deny", "rule": "not in allow", "bytes_up": 0, "bytes_down": 0,
     "ms": 0},
]


def test_logs_net_shows_a_table(sb):
    sb.sandbox(extra=POLICY)
    log = net_log(sb)
    log.parent.mkdir(parents=True)
    log.write_text("".join(json.dumps(x) + "\n" for x in LINES) + "garbage {\n")
    r = sb.run("logs", NAME, "--net")
    assert r.rc == 0, r
    rows = r.text.splitlines()
    assert rows[0].split() == ["TIME", "DESTINATION", "DECISION", "RULE", "BYTES", "UP/DOWN",
                               "MS"], r
    assert rows[1].split() == ["2026-11-30T23:59:01Z", "api.example.com:443", "allow",
                               "api.example.com", "512/2048", "34"], r
    assert "\x1b" not in r.text and "evil\\x1b[31m.example.net:80" in rows[2], r
    assert "1 line of" in r.etext and "could not be read" in r.etext, r
    r = sb.run("logs", NAME, "--net", "-n", "1")
    assert r.rc == 0 and len(r.text.splitlines()) == 2 and "deny" in r.text, r


def test_logs_net_without_a_log(sb):
    sb.sandbox(extra=POLICY)
    r = sb.run("logs", NAME, "--net")
    assert r.rc == 0 and r.text == f"no connections logged for {NAME} yet\n", r
    sb.sandbox(extra="network: bridge\n")
    r = sb.run("logs", NAME, "--net")
    assert r.rc != 0 and "has no allow: list, so it keeps no connection log" in r.etext, r


def test_rename_and_destroy_take_the_net_log_along(sb):
    sb.sandbox(extra=POLICY)
    assert sb.run("run", NAME, "--", "true").rc == 0
    log = net_log(sb)
    for n in (1, 2, 3):  # the three rotated generations
        log.with_name(f"{log.name}.{n}").write_text("{}\n")
    assert sb.run("rename", NAME, "t").rc == 0
    moved = log.with_name("t.log")
    assert moved.exists() and not log.exists()
    assert all(moved.with_name(f"t.log.{n}").exists() for n in (1, 2, 3))
    r = sb.run("destroy", "t", "--yes")
    assert r.rc == 0, r
    assert not moved.exists()
    assert not any(moved.with_name(f"t.log.{n}").exists() for n in (1, 2, 3))


def test_one_variable_for_two_secrets(sb):
    """from_env takes the variable out of the environment; a second secret naming it gets the
    same value, not "not set"."""
    sb.sandbox(extra=POLICY + "secrets:\n"
               "  - {name: A, from_env: BB_TEST_TOKEN, hosts: [api.example.com]}\n"
               "  - {name: B, from_env: BB_TEST_TOKEN, hosts: [a.example.org]}\n")
    out = sb.bb.tmp / "fd3"
    r = sb.run("run", NAME, "--", "sh", "-c", f"cat <&3 > {out}", env={"BB_TEST_TOKEN": TOKEN})
    assert r.rc == 0, r
    secrets = json.loads(out.read_text())
    assert [s["value"] for s in secrets] == [TOKEN, TOKEN]
    assert secrets[0]["placeholder"] != secrets[1]["placeholder"]
