"""The podman build that `bluebox build` runs is confined.

On backend: uml the build steps (package scripts, run:, runcmd) run in a uml guest through
bluebox's OCI runtime (runtime/buildvm.h); with --host-kernel they run on the host's
kernel in a podman build container. These tests read the argv the stand-in podman recorded
(tests/cli/standin_podman.py) for a real `bluebox build`: for the host-kernel fallback,
capabilities cut to what a package manager needs, a process limit, a memory limit (as root,
where podman enforces it), and no network for an offline sandbox (but for its package
install); for the default, bluebox's runtime and the VMM's capabilities.
tests/integration/test_podman_build.py checks the same flags against the real podman.
"""
import pytest

from test_run import NAME, Standin, kvm_openable

BUILD_CAPS = "CHOWN,DAC_OVERRIDE,FOWNER,FSETID,SETUID,SETGID,SETFCAP"
VM_CAPS = "CHOWN,DAC_OVERRIDE,FOWNER,FSETID,SETUID,SETGID,SETFCAP,SYS_ADMIN,SETPCAP"


@pytest.fixture
def sb(bb):
    s = Standin(bb)
    yield s
    s.cleanup()


def builds(sb, extra, *flags):
    """`bluebox build` of a fresh sandbox (on the host's kernel unless told otherwise); the
    argv of each podman build it ran."""
    sb.sandbox(extra="ram_mib: 512\n" + extra, built=False)
    r = sb.run("build", *(flags or ("--host-kernel",)), NAME)
    assert r.rc == 0, r
    return [c for c in sb.calls() if c[:1] == ["build"]]


def options(argv):
    return [a for a in argv if a.startswith("-")]


def assert_confined(argv, caps=BUILD_CAPS):
    opts = options(argv)
    assert "--cap-drop=all" in opts, argv
    assert [o for o in opts if o.startswith("--cap-add")] == [f"--cap-add={caps}"], argv
    assert "--ulimit=nproc=1024:1024" in opts, argv
    assert "--memory=768m" in opts, argv  # the tests run as root: podman enforces it
    assert "--pull=never" in opts, argv
    for bad in ("--privileged", "--network=host", "--userns=host", "--pid=host",
                "--ipc=host", "--security-opt=seccomp=unconfined"):
        assert bad not in opts, argv
    assert not [o for o in opts if o.startswith(("-v", "--volume", "--device", "--secret",
                                                 "--ssh"))], argv


def network_of(argv):
    return [o for o in options(argv) if o.startswith("--network")]


@pytest.mark.parametrize("extra, network", [
    ("", ["--network=none"]),
    ("run:\n  - echo hi\nblueprint:\n  runcmd:\n    - echo there\n", ["--network=none"]),
    ("network: bridge\n", []),
    ("network: bridge\npackages:\n  - jq\nrun:\n  - echo hi\n", []),
], ids=["offline", "offline-run-steps", "bridge", "bridge-packages"])
def test_build_is_confined(sb, extra, network):
    b = builds(sb, extra)
    assert len(b) == 1, b
    assert_confined(b[0])
    assert network_of(b[0]) == network, b[0]
    assert "-t" in b[0], b[0]


@pytest.mark.parametrize("extra, network", [
    ("run:\n  - echo hi\n", ["--network=none"]),
    ("network: bridge\npackages:\n  - jq\n", []),
], ids=["offline", "bridge"])
def test_uml_builds_in_the_guest_by_default(sb, extra, network):
    """The default on uml: every podman build runs its steps through bluebox's runtime,
    whose container holds the VMM's capabilities (the step keeps BUILD_CAPS in the guest),
    and says so; the Containerfile podman reads carries the guest label, the kept one not."""
    b = builds(sb, extra, "-q")
    assert len(b) == 1, b
    assert_confined(b[0], VM_CAPS)
    assert network_of(b[0]) == network, b[0]
    rt = [o for o in options(b[0]) if o.startswith("--runtime=")]
    assert len(rt) == 1 and rt[0].endswith("/oci-runtime"), b[0]
    assert b[0][b[0].index("-f") + 1].endswith("/Containerfile.guest"), b[0]
    assert "LABEL" not in sb.bb.containerfile(NAME).read_text()


def test_offline_sandbox_with_packages_downloads_in_a_first_part_only(sb):
    """podman build has no per-step network: the package install is built on its own with
    the network, then run: and the blueprint FROM its image with --network=none."""
    b = builds(sb, "packages:\n  - jq\nrun:\n  - echo hi\nblueprint:\n  runcmd:\n"
                   "    - echo there\n")
    assert len(b) == 2, b
    for argv in b:
        assert_confined(argv)
    fetch, rest = b
    assert network_of(fetch) == [] and "-t" not in fetch, fetch
    assert network_of(rest) == ["--network=none"] and "-t" in rest, rest
    fetch_file = fetch[fetch.index("-f") + 1]
    rest_file = rest[rest.index("-f") + 1]
    assert fetch_file.endswith("/Containerfile.fetch") and rest_file.endswith(
        "/Containerfile.offline"), b
    # What each part held (the build directory is gone; the kept Containerfile is whole).
    whole = sb.bb.containerfile(NAME).read_text()
    assert "RUN apk add --no-cache jq\n" in whole and whole.endswith("WORKDIR /data\n")
    head, _, tail = whole.partition("RUN apk add --no-cache jq\n")
    assert "RUN echo hi\n" in tail and "RUN echo there\n" in tail and "RUN echo" not in head


# ---- the base image: pulled in the open, never by a build step ---------------------------

BASE = "docker.io/library/alpine:latest"


def test_a_missing_base_is_pulled_before_the_build(sb):
    """podman build runs with --pull=never; a base that is not here is pulled first, with
    podman's own output, and the build then finds it."""
    sb.sandbox(built=False)
    r = sb.run("build", NAME, env={"BB_TEST_MISSING": BASE})
    assert r.rc == 0, r
    calls = sb.calls()
    pulls = [i for i, c in enumerate(calls) if c[:1] == ["pull"]]
    builds_at = [i for i, c in enumerate(calls) if c[:1] == ["build"]]
    assert [calls[i] for i in pulls] == [["pull", BASE]], calls
    assert builds_at and pulls[0] < builds_at[0], calls
    assert f"the base image {BASE} is not here yet; pulling it" in r.err.decode(), r
    for i in builds_at:
        assert "--pull=never" in calls[i], calls[i]


def test_a_base_that_is_here_is_not_pulled(sb):
    sb.sandbox(built=False)
    r = sb.run("build", NAME)
    assert r.rc == 0, r
    assert not [c for c in sb.calls() if c[:1] == ["pull"]], sb.calls()


def test_a_base_that_cannot_be_pulled_says_which_and_what_to_do(sb):
    sb.sandbox(built=False)
    before = sorted(p.name for p in (sb.bb.home / "sandboxes" / NAME).iterdir())
    r = sb.run("build", NAME, env={"BB_TEST_MISSING": BASE, "BB_TEST_PULL_EXIT": "125"})
    assert r.rc == 1, r
    err = r.err.decode()
    assert f"bluebox: cannot get the base image {BASE}: podman pull failed (exit 125;" in err, r
    assert f"podman pull {BASE}" in err and f"podman tag <image> {BASE}" in err, r
    assert not [c for c in sb.calls() if c[:1] == ["build"]], sb.calls()
    assert sorted(p.name for p in (sb.bb.home / "sandboxes" / NAME).iterdir()) == before


def test_krun_builds_with_podman_build_runtime_krun(sb):
    """On krun the steps run in krun's microVM: podman build --runtime krun (crun with
    libkrun, not installed here: this is its argv; the KVM lane builds for real), the build's
    capabilities there; without a krun on PATH the build says what to do."""
    krun = {"BLUEBOX_BACKEND": "krun"}
    sb.sandbox(extra="ram_mib: 512\nrun:\n  - echo hi\n", built=False)
    r = sb.run("build", NAME, env=sb.env(krun))
    assert r.rc != 0, r
    err = r.err.decode()
    assert "no krun is on PATH" in err and "--host-kernel" in err, err
    assert "`backend: uml` in the Bluefile" in err, err
    assert not [c for c in sb.calls() if c[:1] == ["build"]]
    fake = sb.podman.parent / "krun"
    fake.write_text("#!/bin/sh\nexit 1\n")
    fake.chmod(0o755)
    r = sb.run("build", "-q", NAME, env=sb.env(krun))
    err = r.err.decode()
    if kvm_openable():
        assert r.rc == 0, r
    else:  # built; only krun's isolation check needs KVM, and says so
        assert r.rc != 0 and "krun needs KVM" in err, r
        assert b"built localhost/bluebox/" in r.out, r
    b = [c for c in sb.calls() if c[:1] == ["build"]]
    assert len(b) == 1, b
    assert_confined(b[0])
    assert [o for o in options(b[0]) if o.startswith("--runtime=")] == [f"--runtime={fake}"]
    assert network_of(b[0]) == ["--network=none"], b[0]
    assert "build: each RUN step runs in a krun guest" in r.out.decode() + err
