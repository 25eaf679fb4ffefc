"""Two BLUEBOX_HOMEs with a sandbox of the same name must not reach each other's podman
objects, an up VM killed behind bluebox's back is not shown as up,
and sandboxes made before names carried the home's id keep working.

The podman here is the conftest stub: it logs every call and answers `container inspect`,
`image inspect`, `image exists` and `port` from the test's environment, so these tests
check what bluebox asks podman to remove. tests/integration/test_homes_podman.py does the same
with the real podman and a real up VM.
"""
import importlib.util
from pathlib import Path
import json

# tests/cli's conftest by path: `import conftest` finds tests/integration's when both
# directories are collected in one run, as make check does.
_spec = importlib.util.spec_from_file_location("cli_conftest", Path(__file__).with_name("conftest.py"))
_conftest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_conftest)
Bluebox, home_id = _conftest.Bluebox, _conftest.home_id

LEGACY_IMAGE = "localhost/bluebox/s:latest"
IID = "ab" * 32


def other_home(bb, tmp_path, tag):
    """Another home of the same user (so the same podman store), with its own podman log."""
    d = tmp_path / tag
    d.mkdir()
    return Bluebox(bb.bin, d)


def built(bb, name="s", iid=IID):
    bb.new(name)
    (bb.sandbox_dir(name) / "image-id").write_text(f"sha256:{iid}\n")


def write_state(bb, name, container, addr="127.0.0.1:40000"):
    state = {"container": container, "addr": addr, "token": "t" * 64, "kernel": "6.1",
             "started": 1}
    bb.run_file(name).parent.mkdir(parents=True, exist_ok=True)
    bb.run_file(name).write_text(json.dumps(state))


def removals(bb):
    return [c for c in bb.podman_calls() if c.split()[0] in ("rm", "rmi", "untag")]


def test_names_and_labels_carry_the_home(bb, tmp_path):
    other = other_home(bb, tmp_path, "o")
    bb.new("s")
    other.new("s")
    assert bb.home_id() != other.home_id()
    assert bb.env_of("s")["BLUEBOX_IMAGE"] == f"localhost/bluebox/s:{bb.home_id()}"
    assert other.env_of("s")["BLUEBOX_IMAGE"] == f"localhost/bluebox/s:{other.home_id()}"


def test_home_id_follows_the_canonical_path(bb, tmp_path):
    bb.new("s")
    link = tmp_path / "link"
    link.symlink_to(bb.home)
    r = bb.run("env", "s", env={"BLUEBOX_HOME": str(link)})
    assert f"BLUEBOX_IMAGE='localhost/bluebox/s:{bb.home_id()}'" in r.out.splitlines(), r
    assert home_id(link) == bb.home_id()


def test_down_in_another_home_leaves_this_homes_vm(bb, tmp_path):
    """Home A is up; home B (same sandbox name) runs down, up's cleanup and destroy."""
    a = bb
    b = other_home(bb, tmp_path, "b")
    a.new("s")
    write_state(a, "s", a.up_container("s"))
    b.new("s")
    vms = f"{a.up_container('s')}=aaaa|true|s|{a.home_id()}|0"
    for args in (["down", "s"], ["destroy", "s", "--data", "-y"]):
        r = b.run(*args, env={"BB_TEST_CONTAINERS": vms, "BB_TEST_IMAGES": a.image("s")})
        assert r.rc == 0, r
    calls = b.podman_calls()
    assert not any(a.up_container("s") in c or "bluebox-up-s " in c + " " or "aaaa" in c
                   for c in removals(b)), calls
    assert not any(a.image("s") in c or LEGACY_IMAGE in c for c in removals(b)), calls
    # the strays b prunes are b's own: both labels in the filter
    assert f"ps -aq --filter label=bluebox.sandbox=s --filter label=bluebox.home={b.home_id()}" \
        in calls, calls
    assert a.run_file("s").exists()


def test_a_foreign_container_under_this_homes_name_is_left_alone(bb):
    """Whatever the name says, the labels decide: a container of another home is kept."""
    bb.new("s")
    write_state(bb, "s", bb.up_container("s"))
    vm = f"{bb.up_container('s')}=f0f0|true|s|{'0' * 12}|0"
    r = bb.run("down", "s", env={"BB_TEST_CONTAINERS": vm})
    assert r.rc == 0, r
    assert removals(bb) == [], bb.podman_calls()
    assert not bb.run_file("s").exists()  # this home's state is this home's


def test_down_removes_this_homes_vm_by_id(bb):
    bb.new("s")
    write_state(bb, "s", bb.up_container("s"))
    vm = f"{bb.up_container('s')}=c0ffee|true|s|{bb.home_id()}|0"
    r = bb.run("down", "s", env={"BB_TEST_CONTAINERS": vm})
    assert (r.rc, r.out) == (0, "down s\n"), r
    assert removals(bb) == ["rm -f -t 0 --ignore c0ffee"], bb.podman_calls()


def test_destroy_in_another_home_leaves_this_homes_image(bb, tmp_path):
    a = bb
    b = other_home(bb, tmp_path, "b")
    built(a, "s", IID)
    built(b, "s", "cd" * 32)
    images = f"{a.image('s')} {LEGACY_IMAGE}"
    ids = f"{a.image('s')}={IID} {LEGACY_IMAGE}=sha256:{IID}"
    r = b.run("destroy", "s", "-y", env={"BB_TEST_IMAGES": images, "BB_TEST_IMAGE_IDS": ids})
    assert r.rc == 0, r
    assert removals(b) == [], b.podman_calls()


def test_ls_says_when_an_up_vm_is_not_running(bb):
    bb.new("s")
    bb.new("t")
    write_state(bb, "s", bb.up_container("s"))
    write_state(bb, "t", bb.up_container("t"))
    stopped = f"{bb.up_container('t')}=c0ffee|false|t|{bb.home_id()}|0"
    env = {"BB_TEST_CONTAINERS": stopped}
    r = bb.run("ls", env=env)
    rows = {l.split()[0]: l for l in r.out.splitlines()[1:]}
    assert rows["s"].split()[1:3] == ["up", "(dead)"], r  # its container is gone
    assert rows["t"].split()[1:3] == ["up", "(dead)"], r  # its container stopped
    assert "bluebox: s is marked up but its VM is not running; clean up: bluebox down s\n" \
        in r.err, r
    # another home's running VM under this home's name does not count either
    env = {"BB_TEST_CONTAINERS": f"{bb.up_container('s')}=c0ffee|true|s|{'0' * 12}|0"}
    rows = {l.split()[0]: l for l in bb.run("ls", env=env).out.splitlines()[1:]}
    assert rows["s"].split()[1:3] == ["up", "(dead)"]


# ---- sandboxes made before names carried the home ------------------------------------

def test_old_named_up_vm_is_brought_down(bb):
    """An up VM of the old naming (bluebox-up-s, no bluebox.home label) that this home's
    state names, with the agent port the state recorded, is this home's: down removes it."""
    bb.new("s")
    write_state(bb, "s", "bluebox-up-s", addr="127.0.0.1:41234")
    env = {"BB_TEST_CONTAINERS": "bluebox-up-s=0ld1d|true|s||0",
           "BB_TEST_PORTS": "bluebox-up-s=127.0.0.1:41234"}
    r = bb.run("down", "s", env=env)
    assert (r.rc, r.out) == (0, "down s\n"), r
    assert removals(bb) == ["rm -f -t 0 --ignore 0ld1d"], bb.podman_calls()


def test_old_named_vm_of_another_home_is_left_alone(bb):
    """Same old name, but its port is not the one this home's state recorded: another
    home's VM took the name since."""
    bb.new("s")
    write_state(bb, "s", "bluebox-up-s", addr="127.0.0.1:41234")
    env = {"BB_TEST_CONTAINERS": "bluebox-up-s=0ld1d|true|s||0",
           "BB_TEST_PORTS": "bluebox-up-s=127.0.0.1:45555"}
    r = bb.run("down", "s", env=env)
    assert r.rc == 0, r
    assert removals(bb) == [], bb.podman_calls()


def test_old_named_stopped_vm_is_matched_by_its_creation_time(bb):
    """Stopped, an old-named VM publishes no port: it is this home's when it was made in the
    minute before this home's state was written (the state says started 1000)."""
    bb.new("s")
    state = {"container": "bluebox-up-s", "addr": "127.0.0.1:41234", "token": "t" * 64,
             "kernel": "6.1", "started": 1000}
    bb.run_file("s").parent.mkdir(parents=True)
    for created, removed in ((999, True), (800, False), (1001, False)):
        bb.run_file("s").write_text(json.dumps(state))
        bb.podman_log.write_text("")
        env = {"BB_TEST_CONTAINERS": f"bluebox-up-s=0ld1d|false|s||{created}"}
        r = bb.run("down", "s", env=env)
        assert r.rc == 0, r
        assert removals(bb) == (["rm -f -t 0 --ignore 0ld1d"] if removed else []), created


def test_old_image_tag_is_left_to_the_homes_that_share_it(bb):
    """Two homes that built the same Bluefile share one image ID: the old tag may be the
    other's, so neither destroy nor adoption removes it; adoption adds this home's tag."""
    built(bb, "s", IID)
    env = {"BB_TEST_IMAGES": LEGACY_IMAGE, "BB_TEST_IMAGE_IDS": f"{LEGACY_IMAGE}=sha256:{IID}"}
    r = bb.run("destroy", "s", "-y", env=env)
    assert r.rc == 0, r
    assert removals(bb) == [], bb.podman_calls()


def test_old_image_is_adopted_on_rename(bb):
    built(bb, "old", IID)
    env = {"BB_TEST_IMAGES": LEGACY_IMAGE.replace("/s:", "/old:"),
           "BB_TEST_IMAGE_IDS": f"localhost/bluebox/old:latest=sha256:{IID}"}
    r = bb.run("rename", "old", "new", env=env)
    assert r.rc == 0, r
    calls = bb.podman_calls()
    assert f"tag localhost/bluebox/old:latest {bb.image('new')}" in calls, calls
    assert removals(bb) == [], calls
