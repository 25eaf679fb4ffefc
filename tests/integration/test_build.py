"""`bluebox build` on real podman: the image the Bluefile describes is what gets built, a
failed build leaves the previous image and Containerfile usable, and an image whose
isolation cannot be verified on this host is reported as such, never as isolated."""
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from homeid import home_id
from test_podman_build import env, podman  # noqa: F401  (session fixture + helper)

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("podman") is None,
    reason="integration tests need root and podman",
)

BLUEFILE = """\
base: localhost/bluebox-test/busybox:latest
pkgmgr: apk
env:
  Z: 'a "b" $c \\d'
  PLAIN: yes
run:
  - echo one > /one
blueprint:
  write_files:
    - path: /etc/motd
      content: "hi $USER `x`\\n"
      mode: "0600"
  runcmd:
    - echo done > /done
"""


@pytest.fixture
def home(env):  # noqa: F811
    d = Path(tempfile.mkdtemp(prefix="bluebox-it-home-", dir="/var/tmp"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


def bb(bluebox_bin, home, *args):
    """The sandboxes here are krun's (the default), and krun is not installed here: their
    builds run on the host's kernel, asked for (a krun build needs podman build --runtime
    krun; test_build_vm.py covers the guest builds)."""
    e = dict(os.environ, BLUEBOX_HOME=str(home))
    if args[:1] == ("build",):
        args = ("build", "--host-kernel", *args[1:])
    return subprocess.run([bluebox_bin, *args], env=e, capture_output=True, text=True)


def image_of(home, name):
    return f"localhost/bluebox/{name}:{home_id(home)}"


def test_build_produces_the_described_image(bluebox_bin, home):
    name = f"it-{os.getpid()}-a"
    assert bb(bluebox_bin, home, "new", name).returncode == 0
    (home / "sandboxes" / name / "Bluefile").write_text(BLUEFILE)
    try:
        r = bb(bluebox_bin, home, "build", name)
        # No backend boots on this host yet, so isolation cannot be verified: say so, exit 1.
        assert r.returncode == 1, r
        assert f"built {image_of(home, name)}" in r.stdout
        assert "isolation is not verified" in r.stderr
        sd = home / "sandboxes" / name
        assert (sd / "Containerfile").read_text() == bb(bluebox_bin, home, "build", "--dry-run",
                                                        name).stdout
        assert (sd / ".blueprint" / "f0").read_text() == "hi $USER `x`\n"
        iid = (sd / "image-id").read_text().strip()
        inspect = podman("image", "inspect", "--format", "{{.Id}}", image_of(home, name))
        assert iid.endswith(inspect.stdout.strip())
        out = podman("run", "--rm", image_of(home, name), "sh", "-c",
                     'printf "%s|" "$Z" "$PLAIN" "$(pwd)" "$(cat /one /done)"; '
                     'cat /etc/motd; stat -c %a /etc/motd').stdout
        assert out == 'a "b" $c \\d|yes|/data|one\ndone|hi $USER `x`\n600\n'
        assert not any(p.name.startswith(".build-") for p in sd.iterdir())
    finally:
        podman("rmi", "-f", image_of(home, name), check=False)


def test_failed_build_keeps_previous_image_and_containerfile(bluebox_bin, home):
    name = f"it-{os.getpid()}-b"
    assert bb(bluebox_bin, home, "new", name).returncode == 0
    bf = home / "sandboxes" / name / "Bluefile"
    bf.write_text("base: localhost/bluebox-test/busybox:latest\nrun: [echo good > /v]\n")
    try:
        bb(bluebox_bin, home, "build", name)
        sd = home / "sandboxes" / name
        before = (sd / "Containerfile").read_text()
        iid = (sd / "image-id").read_text()
        bf.write_text("base: localhost/bluebox-test/busybox:latest\nrun: ['exit 7']\n")
        r = bb(bluebox_bin, home, "build", name)
        assert r.returncode == 1
        assert "podman build failed" in r.stderr
        assert "unchanged" in r.stderr
        assert (sd / "Containerfile").read_text() == before
        assert (sd / "image-id").read_text() == iid
        assert podman("run", "--rm", image_of(home, name), "cat", "/v").stdout == "good\n"
        assert not any(p.name.startswith(".build-") for p in sd.iterdir())
    finally:
        podman("rmi", "-f", image_of(home, name), check=False)


def test_destroy_removes_the_image(bluebox_bin, home):
    name = f"it-{os.getpid()}-c"
    assert bb(bluebox_bin, home, "new", name).returncode == 0
    (home / "sandboxes" / name / "Bluefile").write_text(
        "base: localhost/bluebox-test/busybox:latest\n")
    bb(bluebox_bin, home, "build", name)
    assert podman("image", "exists", image_of(home, name), check=False).returncode == 0
    r = bb(bluebox_bin, home, "destroy", name)
    assert r.returncode == 0, r
    assert podman("image", "exists", image_of(home, name), check=False).returncode == 1


def test_rename_retags_the_image(bluebox_bin, home):
    name, new = f"it-{os.getpid()}-d", f"it-{os.getpid()}-e"
    assert bb(bluebox_bin, home, "new", name).returncode == 0
    (home / "sandboxes" / name / "Bluefile").write_text(
        "base: localhost/bluebox-test/busybox:latest\n")
    bb(bluebox_bin, home, "build", name)
    try:
        r = bb(bluebox_bin, home, "rename", name, new)
        assert r.returncode == 0, r
        assert podman("image", "exists", image_of(home, new), check=False).returncode == 0
        assert podman("image", "exists", image_of(home, name), check=False).returncode == 1
    finally:
        podman("rmi", "-f", image_of(home, new), image_of(home, name), check=False)
