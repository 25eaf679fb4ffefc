"""bluebox ps: this home's containers, podman's (and the warm pool's) from `podman ps` with
the home's label filter, direct launches from their run directories (tests/integration/
test_direct_launch.py covers those, which need root and runc)."""

PS_STUB = """#!/bin/sh
printf '%s\\n' "$*" >> "$BB_TEST_PODMAN_LOG"
[ "$1" = ps ] || exit 0
printf 'bluebox-web-1-ab12\\tweb\\tUp 3 seconds ago\\t4242\\n'
printf 'bluebox-pool-web-x-1\\tweb\\trunning\\t4343\\n'
printf 'bluebox-db-2-cd34\\tdb\\tExited (0) 1 minute ago\\t0\\n'
"""


def stub(bb):
    p = bb.tmp / "stubbin" / "podman"
    p.write_text(PS_STUB)
    p.chmod(0o755)


def rows(r):
    assert r.rc == 0, r
    lines = r.out.splitlines()
    assert lines[0].split() == ["CONTAINER", "SANDBOX", "LAUNCH", "STATUS", "PID"], r
    return [ln.split() for ln in lines[1:]]


def test_ps_lists_this_homes_podman_containers(bb):
    stub(bb)
    assert rows(bb("ps")) == [["bluebox-web-1-ab12", "web", "podman", "running", "4242"],
                              ["bluebox-pool-web-x-1", "web", "pool", "running", "4343"],
                              ["bluebox-db-2-cd34", "db", "podman", "exited", "-"]]
    call = bb.podman_log.read_text().splitlines()[-1]
    assert call.startswith(f"ps -a --filter label=bluebox.home={bb.home_id()} "), call


def test_ps_of_one_sandbox_and_quiet(bb):
    stub(bb)
    assert rows(bb("ps", "db")) == [["bluebox-db-2-cd34", "db", "podman", "exited", "-"]]
    r = bb("ps", "-q", "web")
    assert (r.rc, r.out) == (0, "bluebox-web-1-ab12\nbluebox-pool-web-x-1\n"), r


def test_ps_with_nothing_running_prints_the_header_only(bb):
    assert rows(bb("ps")) == []
    r = bb("ps", "-q")
    assert (r.rc, r.out) == (0, ""), r
