"""bluebox on the host as it is: no test containers.conf.

Every other integration module runs podman with CONTAINERS_CONF=/etc/bluebox-test/
containers.conf, whose default_ulimits fit this host's hard limits (README.md here). These
tests unset it, as a user's shell has it: on this CI machine kind (root without
CAP_SYS_RESOURCE, hard nofile 20000) podman's defaults then fail every plain container
("error setting rlimit type 7: operation not permitted"), and bluebox must pass limits that
fit on every path it takes: build (and its isolation baseline), run (the direct launch and
`podman run`), up/exec, and doctor's own plain container. One uml sandbox, built once.
"""
import os
import resource
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from test_podman_build import env  # noqa: F401  (session fixture: setup.sh)

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("podman") is None or not Path("/usr/bin/linux.uml").exists(),
    reason="needs root, podman and user-mode-linux",
)

NAME = f"limits-{os.getpid()}"
IMAGE = "localhost/bluebox-test/busybox:latest"


def host_env(home):
    """The environment of a user who never heard of the test containers.conf."""
    e = {k: v for k, v in os.environ.items()
         if k not in ("CONTAINERS_CONF", "CONTAINERS_CONF_OVERRIDE", "BLUEBOX_BACKEND")}
    e["BLUEBOX_HOME"] = str(home)
    return e


def podman_defaults_fail():
    """Whether plain podman fails here without the test containers.conf (what makes these
    tests mean something; on a host where it does not, they still check that nothing broke)."""
    r = subprocess.run(["podman", "run", "--rm", "--network=none", IMAGE, "true"],
                       env=host_env("/nonexistent"), capture_output=True, text=True)
    return r.returncode != 0 and "rlimit" in r.stderr


@pytest.fixture(scope="module")
def box(env, bluebox_bin):  # noqa: F811
    home = Path(tempfile.mkdtemp(prefix="bluebox-it-limits-", dir="/var/tmp"))

    def bb(*args, extra=None):
        return subprocess.run([bluebox_bin, *args], env={**host_env(home), **(extra or {})},
                              capture_output=True, text=True, timeout=300)

    assert bb("new", NAME).returncode == 0
    (home / "sandboxes" / NAME / "Bluefile").write_text(
        f"base: {IMAGE}\nbackend: uml\nrun:\n  - echo built > /built\n")
    build = bb("build", NAME)
    yield bb, build
    bb("down", NAME)
    bb("destroy", NAME, "--data", "-y")
    shutil.rmtree(home, ignore_errors=True)


def test_build_verifies_isolation(box):
    """The build and its isolation check (a plain baseline container and a uml probe) run."""
    _, build = box
    assert build.returncode == 0, build
    assert "isolated: host" in build.stdout, build
    assert "isolation is not verified" not in build.stderr, build


@pytest.mark.parametrize("launch", ["direct", "podman"])
def test_run(box, launch):
    bb, _ = box
    r = bb("run", NAME, "--", "cat", "/built", extra={"BLUEBOX_LAUNCH": launch})
    assert r.returncode == 0, r
    assert r.stdout == "built\n", r


def test_up_exec_down(box):
    bb, _ = box
    r = bb("up", NAME)
    assert r.returncode == 0, r
    r = bb("exec", NAME, "--", "sh", "-c", "echo $((6 * 7))")
    assert r.returncode == 0 and r.stdout == "42\n", r
    assert bb("down", NAME).returncode == 0


def test_doctor_starts_a_plain_container(box):
    """doctor's plain container starts with bluebox's limits, and says what plain podman
    does here."""
    bb, _ = box
    r = bb("doctor")
    line = [l for l in r.stdout.splitlines() if l.startswith(("  ok    plain container",
                                                               "  warn  plain container",
                                                               "  FAIL  plain container"))]
    assert len(line) == 1 and line[0].startswith("  ok"), r
    if podman_defaults_fail():
        nofile = min(resource.getrlimit(resource.RLIMIT_NOFILE)[1], 1048576)
        assert f"with bluebox's --ulimit=nofile={nofile}:{nofile} " in line[0], r
        assert "podman's defaults do not fit here (Error: " in line[0], r
