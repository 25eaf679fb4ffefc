"""Fixtures shared by the real-podman integration tests.

  bluebox_bin  path of the binary under test (session)
  backend      a test that takes it runs once per VM backend, "uml" and "qemu" (a mark
               `@pytest.mark.backends("uml")` narrows the list); module-scoped, so a
               module's shared sandbox can take it too. qemu runs with BLUEBOX_QEMU_ACCEL set
               to BLUEBOX_TEST_QEMU_ACCEL (default tcg: this machine has no KVM that runs a
               standard guest), set by the test explicitly, never left to bluebox to pick.
               A backend this host lacks is a skip with the reason (tests/integration/
               backends.py; a failure under BLUEBOX_MUST_RUN).

Parallel runs (pytest-xdist, `-n 2 --dist loadgroup`, scripts/check.sh): every test here is
put in the xdist group of its module unless it names one itself, so a module runs on one
worker (its module- and session-scoped VMs are booted once) and modules run side by side.
A test that needs a fixed host resource waits for it (the DNS spies on port 53) or names a
group of its own with @pytest.mark.xdist_group(...). A module whose tests share nothing
(`XDIST_SPREAD = True`: test_escape, each test a whole suite run) has its tests spread over
the workers one by one instead, and a test named in OWN_GROUP (a long one) runs as a unit of
its own beside the rest of its module. Units go out longest first (SECONDS).
"""
import os
from pathlib import Path

import pytest

import backends

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent


@pytest.fixture(scope="session")
def bluebox_bin():
    return os.environ.get("BLUEBOX_BIN", str(REPO / "build" / "bluebox"))


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "backends(*names): the VM backends a test taking `backend` runs on")
    # (pytest-xdist registers it too; without xdist the groups are only unused marks)
    config.addinivalue_line("markers", "xdist_group(name): tests xdist runs on one worker")


def pytest_generate_tests(metafunc):
    if "backend" not in metafunc.fixturenames:
        return
    mark = metafunc.definition.get_closest_marker("backends")
    names = mark.args if mark else backends.ALL
    # module scope: a module's sandboxes for one backend can be shared (module-scoped
    # fixtures that take `backend`), and its tests run grouped by backend
    metafunc.parametrize("backend", [pytest.param(n, id=n, marks=[backends.skip_unless(n)])
                                     for n in names], indirect=True, scope="module")


@pytest.fixture(scope="module")
def backend(request):
    """The backend's name; for qemu, BLUEBOX_QEMU_ACCEL is in the environment (which every
    Home copies) while its tests run, and gone again after."""
    if request.param != "qemu":
        yield request.param
        return
    mp = pytest.MonkeyPatch()
    mp.setenv("BLUEBOX_QEMU_ACCEL", backends.QEMU_ACCEL)
    yield request.param
    mp.undo()


# What each unit of work took on CI (seconds, tests/CI-TIME.md; the last full run's module
# totals and slowest tests): xdist hands units (a group, or one spread test) out in
# collection order and a worker takes the next only when it is nearly done, so the longest
# go first and the many short ones fill the end, and no long one starts last while the other
# worker waits. Within test_escape and for the split-off tests, the single test's time.
SECONDS = {
    "test_escape.py::test_escape_suite_standard_as_root[qemu]": 344,
    "test_escape.py::test_escape_suite_standard_as_root_through_podman[qemu]": 199,
    "test_escape.py::test_escape_suite_standard_as_root[uml]": 160,
    "test_escape.py::test_escape_suite_strict_as_rootless_user[uml]": 137,
    "test_escape.py::test_escape_suite_standard_as_root_through_podman[uml]": 105,
    "test_escape.py::test_escape_suite_strict_as_rootless_user[qemu]": 57,
    "test_escape.py::test_qemu_checks_fail_without_their_protection[qemu]": 40,
    "test_escape": 20,  # each uml run of a weakened bluebox or podman
    "ai-agent": 344,
    "test_pool": 431,
    "test_runtime": 294,
    "test_build_vm": 238,
    "test_guest_users": 227,  # without the ai-agent example, which runs beside it
    "test_fork_vm": 184,
    "test_agent": 127,
    "test_direct_qemu": 121,
    "test_secrets": 104,
    "test_egress_attacks": 91,
    "test_qemu": 89,
    "test_soak": 83,
    "test_qemu_data": 81,
    "test_uml_stdio": 79,
    "test_podman_build": 79,
}
# Tests long enough to run as a unit of their own beside the rest of their module (they share
# only session fixtures with it, which every worker has anyway).
OWN_GROUP = {
    "test_guest_users.py::test_ai_agent_example_works_for_its_agent_user": "ai-agent",
}


def _unit(item):
    """The name of item's unit of work: its group, or the test itself when spread."""
    path = Path(str(item.fspath))
    mark = item.get_closest_marker("xdist_group")
    if mark:
        return mark.args[0] if mark.args else mark.kwargs.get("name", "")
    if getattr(item.module, "XDIST_SPREAD", False):
        return f"{path.name}::{item.name}"
    return path.stem


def _seconds(item):
    path = Path(str(item.fspath))
    if path.parent != HERE:
        return -1  # tests/cli: many short tests, to fill the end
    unit = _unit(item)
    return SECONDS.get(unit, SECONDS.get(path.stem, 10))


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    for item in items:
        path = Path(str(item.fspath))
        if path.parent != HERE or item.get_closest_marker("xdist_group"):
            continue
        own = OWN_GROUP.get(f"{path.name}::{item.name}")
        if own:
            item.add_marker(pytest.mark.xdist_group(own))
        elif not getattr(item.module, "XDIST_SPREAD", False):
            # (a spread module's tests share nothing: each goes to the workers on its own)
            item.add_marker(pytest.mark.xdist_group(path.stem))
    # longest unit first; stable, so each module keeps its own order
    items.sort(key=lambda item: -_seconds(item))
