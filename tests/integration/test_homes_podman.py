"""Homes on real podman (root): first what needs no VM to boot (the
podman objects of an up VM made the way `up` makes them, so bluebox's own podman calls —
inspect templates, label filters, ports, rm, rmi, untag — meet the real podman), then the
same end to end with the uml backend.

5: two BLUEBOX_HOMEs with a sandbox of the same name: up in one; down, up, destroy in the
   other leave the first running, answering and its image in place; a VM killed behind
   bluebox's back is not shown as up.
6: reset, restore and destroy --data refuse while a `run` has /data, leave /data intact,
   and work once the run ends — or once the VM of a run killed with SIGKILL is gone.
"""
import json
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from test_podman_build import env, podman  # noqa: F401  (session fixture + helper)
from test_runtime import Home, containers_of, running_container

REPO = Path(__file__).resolve().parents[2]
IMAGE = "localhost/bluebox-test/busybox:latest"

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("podman") is None,
    reason="integration tests need root and podman")
UML = pytest.mark.skipif(
    not (REPO / "build" / "bluebox-vmm").exists() or not Path("/usr/bin/linux.uml").exists(),
    reason="needs build/bluebox-vmm and user-mode-linux")

BLUEFILE = f"base: {IMAGE}\nbackend: uml\nram_mib: 256\nnetwork: none\n"


@pytest.fixture
def two_homes(env, bluebox_bin):  # noqa: F811
    a, b = Home(bluebox_bin), Home(bluebox_bin)
    yield a, b
    for h in (a, b):
        for n in h.names:
            h("down", n)
        h.close()


def image_of(h, name):
    env = h("env", name).stdout.decode()
    return re.search(r"^BLUEBOX_IMAGE='([^']*)'$", env, re.M).group(1)


def up_container(h, name):
    return json.loads((h.dir / "home" / "run" / f"{name}.json").read_text())["container"]


def image_id(ref):
    return podman("image", "inspect", "--format", "{{.Id}}", ref).stdout.strip()


def running(container):
    r = podman("container", "inspect", "--format", "{{.State.Running}}", container, check=False)
    return r.stdout.strip() == "true"


def built(h, name):
    h.sandbox(name, BLUEFILE)
    r = h("build", name)
    assert r.returncode == 0, r


def defined(h, name):
    """A sandbox with its image tag in place, built or not: the tests below need no boot
    (where uml cannot boot, build's isolation check fails after the image is tagged)."""
    h.sandbox(name, BLUEFILE)
    h("build", name)
    assert podman("image", "exists", image_of(h, name), check=False).returncode == 0


def home_id_of(h, name):
    return image_of(h, name).rsplit(":", 1)[1]


def fake_up(h, name, container, home_label=True):
    """The VM `up` would leave, without booting one: a detached container with the agent
    port published on loopback and the labels, and the home's state naming it."""
    labels = ["--label", f"bluebox.sandbox={name}"]
    if home_label:
        labels += ["--label", f"bluebox.home={home_id_of(h, name)}"]
    started = int(time.time())
    podman("run", "-d", "--name", container, *labels, "--publish=127.0.0.1::7700", IMAGE,
           "sleep", "600")
    addr = podman("port", container, "7700/tcp").stdout.strip()
    state = h.dir / "home" / "run" / f"{name}.json"
    state.parent.mkdir(mode=0o700, exist_ok=True)
    state.write_text(json.dumps({"container": container, "addr": addr, "token": "t" * 64,
                                 "kernel": "6.1.0", "started": started}))
    state.chmod(0o600)


def ls_state(h, name):
    r = h("ls")
    row = next(l for l in r.stdout.decode().splitlines() if l.startswith(name + " "))
    return " ".join(row.split()[1:3]) if "(dead)" in row else row.split()[1], r


def exists(container):
    return podman("container", "exists", container, check=False).returncode == 0


def test_podman_objects_stay_with_their_home(two_homes):
    a, b = two_homes
    name = f"hp-{os.getpid()}"
    defined(a, name)
    defined(b, name)
    assert home_id_of(a, name) != home_id_of(b, name)
    vm = f"bluebox-up-{name}-{home_id_of(a, name)}"
    try:
        fake_up(a, name, vm)
        assert ls_state(a, name)[0] == "up"
        assert b("down", name).returncode == 0
        r = b("destroy", name, "--data", "-y")
        assert r.returncode == 0, r
        b.names.remove(name)
        assert running(vm), "another home's down or destroy removed this home's VM"
        assert podman("image", "exists", image_of(a, name), check=False).returncode == 0
        # a leftover of this home's run (same labels) stops reset until it is gone
        podman("run", "-d", "--name", f"{vm}-run", "--label", f"bluebox.sandbox={name}",
               "--label", f"bluebox.home={home_id_of(a, name)}", IMAGE, "sleep", "600")
        (a.data(name) / "keep").write_text("precious\n")
        r = a("down", name)
        assert r.returncode == 0 and not exists(vm), r
        r = a("reset", name, "-y")
        assert r.returncode == 1 and f"container {vm}-run" in r.stderr.decode(), r
        assert (a.data(name) / "keep").read_text() == "precious\n"
        podman("rm", "-f", "-t", "0", f"{vm}-run")
        assert a("reset", name, "-y").returncode == 0
        # killed behind bluebox's back
        fake_up(a, name, vm)
        podman("kill", vm)
        state, r = ls_state(a, name)
        assert state == "up (dead)", r
        assert f"{name} is marked up but its VM is not running" in r.stderr.decode(), r
        assert a("down", name).returncode == 0 and not exists(vm)
    finally:
        podman("rm", "-f", "-t", "0", "--ignore", vm, f"{vm}-run", check=False)


def test_old_named_objects_of_this_home_are_adopted(two_homes):
    a, b = two_homes
    name = f"ho-{os.getpid()}"
    old_vm, old_image = f"bluebox-up-{name}", f"localhost/bluebox/{name}:latest"
    defined(a, name)
    defined(b, name)
    new_image = image_of(a, name)
    try:
        # a's sandbox as the old naming left it: the old tag, an old-named unlabelled VM
        podman("tag", new_image, old_image)
        podman("untag", new_image, new_image)
        (a.dir / "home" / "sandboxes" / name / "image-ref").unlink()
        fake_up(a, name, old_vm, home_label=False)
        assert ls_state(a, name)[0] == "up"
        assert b("down", name).returncode == 0 and running(old_vm)
        r = b("destroy", name, "--data", "-y")
        assert r.returncode == 0, r
        b.names.remove(name)
        assert podman("image", "exists", old_image, check=False).returncode == 0
        assert a("down", name).returncode == 0 and not exists(old_vm)
        # the next boot adopts the image (the boot itself may fail where uml cannot boot);
        # the old tag stays for homes that share the image (both built the same Bluefile)
        a("run", name, "--", "true")
        assert podman("image", "exists", new_image, check=False).returncode == 0
        assert image_id(new_image) == image_id(old_image)
        # an old-named VM whose port is not the one the state recorded is another's
        fake_up(a, name, old_vm, home_label=False)
        state = a.dir / "home" / "run" / f"{name}.json"
        s = json.loads(state.read_text())
        s["addr"] = "127.0.0.1:1"
        state.write_text(json.dumps(s))
        assert ls_state(a, name)[0] == "up (dead)"
        assert a("down", name).returncode == 0 and running(old_vm)
    finally:
        podman("rm", "-f", "-t", "0", "--ignore", old_vm, check=False)
        podman("rmi", old_image, check=False)


@UML
def test_another_home_cannot_touch_this_homes_vm_or_image(two_homes):
    a, b = two_homes
    name = f"hx-{os.getpid()}"
    built(a, name)
    built(b, name)
    assert image_of(a, name) != image_of(b, name)
    r = a("up", name)
    assert r.returncode == 0, r
    vm = up_container(a, name)
    labels = podman("container", "inspect", "--format", "{{json .Config.Labels}}", vm).stdout
    assert json.loads(labels).get("bluebox.sandbox") == name
    assert json.loads(labels).get("bluebox.home") == vm.rsplit("-", 1)[1]

    assert b("down", name).returncode == 0
    assert running(vm), "down in another home took this home's VM down"
    r = b("up", name)
    assert r.returncode == 0, r
    assert running(vm), "up in another home removed this home's VM"
    assert up_container(b, name) != vm
    assert b("down", name).returncode == 0
    r = b("destroy", name, "--data", "-y")
    assert r.returncode == 0, r
    b.names.remove(name)
    assert running(vm)
    assert podman("image", "exists", image_of(a, name), check=False).returncode == 0
    r = a("exec", name, "--", "echo", "still here")
    assert (r.returncode, r.stdout) == (0, b"still here\n"), r
    row = next(l for l in a("ls").stdout.decode().splitlines() if l.startswith(name + " "))
    assert row.split()[1] == "up" and row.split()[2] != "(dead)", row

    # killed behind bluebox's back: ls says so, down cleans up
    podman("kill", vm)
    r = a("ls")
    row = next(l for l in r.stdout.decode().splitlines() if l.startswith(name + " "))
    assert row.split()[1:3] == ["up", "(dead)"], r
    assert f"{name} is marked up but its VM is not running" in r.stderr.decode(), r
    assert a("down", name).returncode == 0
    assert containers_of(name) == []


# A bluebox from before names carried the home's id (e.g. a build of b8efee1), to make a
# sandbox the old way; without it the old naming is imitated with podman rename/tag.
OLD_BIN = os.environ.get("BLUEBOX_OLD_BIN")


@UML
def test_old_named_up_vm_and_image_keep_working(two_homes):
    """A sandbox built and brought up under the old naming (image <name>:latest, VM
    bluebox-up-<name>; with BLUEBOX_OLD_BIN also without the bluebox.home label): exec
    reaches the VM, ls sees it up, another home's down leaves it, this home's down removes
    it, and the next run adopts the image and drops the old tag."""
    a, b = two_homes
    name = f"old-{os.getpid()}"
    old_vm, old_image = f"bluebox-up-{name}", f"localhost/bluebox/{name}:latest"
    if OLD_BIN:
        a.sandbox(name, BLUEFILE)
        for args in (["build", name], ["up", name]):
            r = subprocess.run([OLD_BIN, *args], env=a.env, capture_output=True, timeout=300,
                               stdin=subprocess.DEVNULL)
            assert r.returncode == 0, r
        assert up_container(a, name) == old_vm
    else:
        built(a, name)
        r = a("up", name)
        assert r.returncode == 0, r
        new_vm, new_image = up_container(a, name), image_of(a, name)
        podman("rename", new_vm, old_vm)
        state = a.dir / "home" / "run" / f"{name}.json"
        s = json.loads(state.read_text())
        s["container"] = old_vm
        state.write_text(json.dumps(s))
        podman("tag", new_image, old_image)
        podman("untag", new_image, new_image)
        (a.dir / "home" / "sandboxes" / name / "image-ref").unlink()

    built(b, name)  # the same name in another home
    assert b("down", name).returncode == 0
    assert running(old_vm)
    r = a("exec", name, "--", "echo", "reached")
    assert (r.returncode, r.stdout) == (0, b"reached\n"), r
    row = next(l for l in a("ls").stdout.decode().splitlines() if l.startswith(name + " "))
    assert row.split()[1] == "up" and row.split()[2] != "(dead)", row
    assert a("down", name).returncode == 0
    assert podman("container", "exists", old_vm, check=False).returncode != 0
    r = a("run", name, "--", "echo", "adopted")
    assert (r.returncode, r.stdout) == (0, b"adopted\n"), r
    assert image_id(image_of(a, name)) == image_id(old_image)


# ---- finding 6 ---------------------------------------------------------------------------

REFUSERS = {"reset": ["reset", "{n}", "-y"], "restore": ["restore", "{n}", "snap", "-y"],
            "destroy --data": ["destroy", "{n}", "--data", "-y"]}


def start_run(h, name, env=None):
    p = subprocess.Popen(h.cmd("run", name, "--", "sleep", "30"), env=dict(h.env, **(env or {})),
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    for _ in range(300):
        found = running_container(name)
        if found:
            return p, found[0]
        assert p.poll() is None, p.communicate()
        time.sleep(0.1)
    pytest.fail("the run's VM did not start")


def refusals(h, name, needle, which=tuple(REFUSERS)):
    for cmd in which:
        args = REFUSERS[cmd]
        r = h(*[a.format(n=name) for a in args])
        assert r.returncode == 1 and needle in r.stderr.decode(), (cmd, r)
        assert (h.data(name) / "keep").read_text() == "precious\n", cmd


@UML
def test_data_commands_refuse_during_a_run(env, bluebox_bin):  # noqa: F811
    h = Home(bluebox_bin)
    try:
        name = f"inuse-{os.getpid()}"
        built(h, name)
        (h.data(name) / "keep").write_text("precious\n")
        assert h("snapshot", name, "snap").returncode == 0

        p, _ = start_run(h, name)
        refusals(h, name, f"{name} is in use by bluebox run (pid {p.pid}); wait for it to "
                          "end or stop it first")
        p.send_signal(signal.SIGTERM)  # the run ends (bluebox stops its VM)
        p.communicate(timeout=60)
        r = h("reset", name, "-y")
        assert r.returncode == 0, r
        assert h("restore", name, "snap", "-y").returncode == 0
        assert (h.data(name) / "keep").read_text() == "precious\n"

        # a direct launch (the default) stops its VM when its bluebox is killed: nothing is
        # left to refuse over
        p, vm = start_run(h, name)
        p.send_signal(signal.SIGKILL)
        p.wait()
        for _ in range(100):
            if not containers_of(name):
                break
            time.sleep(0.2)
        assert containers_of(name) == []
        # through podman too: the VM's lifeline (launch/lifeline.h) stops it when its bluebox
        # is killed, and its --rm container goes with it
        p, vm = start_run(h, name, env={"BLUEBOX_LAUNCH": "podman"})
        p.send_signal(signal.SIGKILL)
        p.wait()
        for _ in range(100):
            if not containers_of(name):
                break
            time.sleep(0.2)
        assert containers_of(name) == []
        r = h("reset", name, "-y")
        assert r.returncode == 0, r
        assert h("restore", name, "snap", "-y").returncode == 0
        r = h("destroy", name, "--data", "-y")
        assert r.returncode == 0, r
        h.names.remove(name)
        assert not h.data(name).exists()
    finally:
        h.close()


def parents(image):
    """The image and its parents' IDs, the build's `--layers` steps first."""
    chain = []
    cur = image_id(image)
    while cur:
        chain.append(cur)
        cur = podman("image", "inspect", "--format", "{{.Parent}}", cur).stdout.strip()
    return chain


def others_parents(chain):
    """The IDs that the images of the store outside chain build on."""
    ids = podman("images", "--all", "--no-trunc", "--format", "{{.ID}}").stdout.split()
    chains = set()
    for i in ids:
        i = i.removeprefix("sha256:")
        if i in chain:
            continue
        cur = podman("image", "inspect", "--format", "{{.Parent}}", i, check=False).stdout.strip()
        while cur and cur not in chains:
            chains.add(cur)
            cur = podman("image", "inspect", "--format", "{{.Parent}}", cur,
                         check=False).stdout.strip()
    return chains


def gone(image_id_):
    return podman("image", "exists", image_id_, check=False).returncode != 0


def test_rebuild_and_destroy_leave_no_build_layers_of_this_home(two_homes):
    """A rebuild's replaced image, and on destroy the sandbox's image with its
    untagged build layers, are removed; layers that another home's image still uses stay."""
    a, b = two_homes
    name = f"bl-{os.getpid()}"
    mark = f"{time.time_ns()}"
    base = parents(IMAGE)
    a.sandbox(name, BLUEFILE + f"env:\n  MARK: one-{mark}\n")
    a("build", name)
    first = [i for i in parents(image_of(a, name)) if i not in base]
    assert first, "the build made no layers of its own"
    (a.dir / "home" / "sandboxes" / name / "Bluefile").write_text(
        BLUEFILE + f"env:\n  MARK: two-{mark}\n")
    a("build", name)
    second = [i for i in parents(image_of(a, name)) if i not in base]
    assert all(gone(i) for i in first if i not in second), "a rebuild left the old image"
    # the same Bluefile in another home shares the image and its layers
    b.sandbox(name, BLUEFILE + f"env:\n  MARK: two-{mark}\n")
    b("build", name)
    assert image_id(image_of(b, name)) == second[0]
    assert a("destroy", name, "--data", "-y").returncode == 0
    a.names.remove(name)
    assert not any(gone(i) for i in second), "destroy removed layers another home uses"
    assert b("destroy", name, "--data", "-y").returncode == 0
    b.names.remove(name)
    # a guest build's first step (its LABEL after FROM) is shared by every guest build of the
    # same base: layers that images left in the store (other tests' sandboxes) build on stay
    shared = others_parents(second)
    assert all(gone(i) for i in second if i not in shared), \
        "destroy left the sandbox's build layers"
    assert not any(gone(i) for i in base), "destroy removed the base image"
    assert not list((a.dir / "home" / "locks").glob(f"{name}.*"))
