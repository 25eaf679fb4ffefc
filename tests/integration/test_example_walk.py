"""The walk for shipped examples (docs/bluefile.md, "Shipped examples"), end to end on real
podman and the uml backend:
`bluebox new x --from <example>`, `bluebox build x`, `bluebox run x -- <cmd>` and its output,
for the examples whose base image this machine can make (tiny-busybox from busybox-static,
named as the Bluefile names its base, as the pull message tells a user to do; ai-agent, on
setup.sh --debian's image, in test_guest_users). And for an example whose base cannot be had
(tiny-alpine, with pulls pointed at a local port that refuses), the build's clear pull
message, quickly, with nothing built or left running. scripts/try-examples.sh walks every
example by hand. Needs root."""
import os
import re
import shutil
import socket
import time
from pathlib import Path

import pytest

from test_podman_build import env, podman  # noqa: F401  (session fixture + helper)
from test_runtime import UML, Home

BUSYBOX = "localhost/bluebox-test/busybox:latest"

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0 or shutil.which("podman") is None,
                       reason="integration tests need root and podman"),
    UML,
]

# example, the local image its base is made from, the command, a regex its output must match.
# ai-agent is walked by test_guest_users (built as shipped, on the Debian test image, and
# used as its agent user): its ~300 packages take 6 min to build even on the host's kernel
# here, too much to build twice.
WALKS = [
    pytest.param("tiny-busybox", BUSYBOX, ["uname", "-a"], r"^Linux \S+ \d", id="tiny-busybox"),
]


def base_of(example):
    text = (Path(__file__).resolve().parents[2] / "examples" / example / "Bluefile").read_text()
    return re.search(r"(?m)^base:\s*(\S+)", text).group(1)


@pytest.fixture
def named_base(env):  # noqa: F811
    """named_base(local, ref): make ref name the local image (podman tag) unless ref is here
    already; the tags made are removed afterwards."""
    made = []

    def name(local, ref):
        if podman("image", "exists", ref, check=False).returncode != 0:
            if podman("image", "exists", local, check=False).returncode != 0:
                pytest.skip(f"{local} is not here (tests/integration/setup.sh makes it)")
            podman("tag", local, ref)
            made.append(ref)
        return ref

    yield name
    for ref in made:
        podman("untag", ref, ref, check=False)  # only this name (alone, untag drops all)


@pytest.fixture
def home(env, bluebox_bin):  # noqa: F811
    h = Home(bluebox_bin)
    h.env["BLUEBOX_BACKEND"] = "uml"  # the examples name no backend; krun cannot run here
    yield h
    h.close()


@pytest.mark.parametrize("example,local,cmd,want", WALKS)
def test_example_walks_new_build_run(home, named_base, example, local, cmd, want):
    named_base(local, base_of(example))
    name = f"x-{example}"
    r = home("new", name, "--from", example)
    assert r.returncode == 0, r
    home.names.append(name)
    r = home("build", name, timeout=900)
    assert r.returncode == 0, r.stderr.decode()[-3000:]
    assert f"built localhost/bluebox/{name}:" in r.stdout.decode() + r.stderr.decode()
    r = home("run", name, "--", *cmd, timeout=300)
    out = r.stdout.decode()
    assert r.returncode == 0, r
    assert re.search(want, out), out


def refused_port():
    """A local TCP port nothing listens on (bound, then closed): a connection is refused at
    once, so a pull fails in seconds instead of waiting on a network timeout."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_example_whose_base_cannot_be_pulled_says_so(home, tmp_path):
    example = "tiny-alpine"
    ref = base_of(example)
    if podman("image", "exists", ref, check=False).returncode == 0:
        pytest.skip(f"{ref} is here, so its pull cannot fail")
    conf = tmp_path / "registries.conf"
    conf.write_text('unqualified-search-registries = []\n[[registry]]\n'
                    f'prefix = "docker.io"\nlocation = "127.0.0.1:{refused_port()}"\n'
                    'insecure = true\n')
    name = f"x-{example}"
    assert home("new", name, "--from", example).returncode == 0
    home.names.append(name)
    t0 = time.monotonic()
    r = home("build", name, env={"CONTAINERS_REGISTRIES_CONF": str(conf)}, timeout=120)
    took = time.monotonic() - t0
    err = r.stderr.decode()
    assert r.returncode == 1, r
    assert f"cannot get the base image {ref}: podman pull failed" in err, err
    assert f"podman pull {ref}, or make it locally and name it so (podman tag <image> {ref})" \
        in err, err
    assert took < 100, took  # refused at once; podman retries 3 times, 1 s apart
    # nothing built, nothing pulled, nothing running
    assert podman("image", "exists", ref, check=False).returncode != 0
    assert not podman("images", "-q", "--filter", f"reference=localhost/bluebox/{name}").stdout
    assert not podman("ps", "-aq", "--filter", f"label=bluebox.sandbox={name}").stdout.split()
    r = home("run", name, "--", "true", env={"CONTAINERS_REGISTRIES_CONF": str(conf)})
    assert r.returncode != 0
