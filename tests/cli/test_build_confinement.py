"""The podman build that `bluebox build` runs is confined (issue 12, finding 9).

Build steps (package scripts, run:, runcmd) run on the host's kernel in a podman build
container, not in the sandbox's VM. These tests read the argv the stand-in podman recorded
(tests/cli/standin_podman.py) for a real `bluebox build`: capabilities cut to what a package
manager needs, a process limit, a memory limit (as root, where podman enforces it), no
network for an offline sandbox with nothing to download, and no host entries in /etc/hosts.
tests/integration/test_podman_build.py checks the same flags against the real podman.
"""
import pytest

from test_run import NAME, Standin

BUILD_CAPS = "CHOWN,DAC_OVERRIDE,FOWNER,FSETID,SETUID,SETGID,SETFCAP"


@pytest.fixture
def sb(bb):
    s = Standin(bb)
    yield s
    s.cleanup()


def build_argv(sb, extra):
    sb.sandbox(extra=extra, built=False)
    r = sb.run("build", NAME)
    assert r.rc == 0, r
    builds = [c for c in sb.calls() if c[:1] == ["build"]]
    assert len(builds) == 1, sb.calls()
    return builds[0]


def options(argv):
    return [a for a in argv if a.startswith("-")]


@pytest.mark.parametrize("extra, network", [
    ("", ["--network=none"]),
    ("run:\n  - echo hi\nblueprint:\n  runcmd:\n    - echo there\n", ["--network=none"]),
    ("packages:\n  - jq\n", []),
    ("network: bridge\n", []),
], ids=["offline", "offline-run-steps", "offline-packages", "bridge"])
def test_build_is_confined(sb, extra, network):
    argv = build_argv(sb, "ram_mib: 512\n" + extra)
    opts = options(argv)
    assert "--cap-drop=all" in opts, argv
    assert [o for o in opts if o.startswith("--cap-add")] == [f"--cap-add={BUILD_CAPS}"], argv
    assert "--ulimit=nproc=1024:1024" in opts, argv
    assert "--memory=768m" in opts, argv  # the tests run as root: podman enforces it
    assert [o for o in opts if o.startswith("--network")] == network, argv
    assert "--no-hosts" in opts, argv
    assert "--pull=never" in opts, argv
    for bad in ("--privileged", "--network=host", "--userns=host", "--pid=host",
                "--ipc=host", "--security-opt=seccomp=unconfined"):
        assert bad not in opts, argv
    assert not [o for o in opts if o.startswith(("-v", "--volume", "--device", "--secret",
                                                 "--ssh"))], argv
