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
the workers one by one instead.
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


# The longest modules first (CI's slowest-tests list; ci30's durations on the slow machine):
# xdist hands groups out in collection order, so a long one started last would run on one
# worker while the other waits. Within test_escape, qemu's runs (TCG) are the longest.
LONG_FIRST = ("test_escape", "test_guest_users", "test_pool", "test_build_vm",
              "test_data_limit", "test_runtime", "test_secrets", "test_fork_vm")


def _order(item):
    path = Path(str(item.fspath))
    if path.parent != HERE:
        return (len(LONG_FIRST) + 1, 0)  # tests/cli: many short tests, to fill the end
    rank = LONG_FIRST.index(path.stem) if path.stem in LONG_FIRST else len(LONG_FIRST)
    return (rank, 0 if path.stem == "test_escape" and "qemu" in item.name else 1)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    items.sort(key=_order)  # stable: each module keeps its own order
    for item in items:
        path = Path(str(item.fspath))
        if path.parent != HERE or item.get_closest_marker("xdist_group"):
            continue
        if getattr(item.module, "XDIST_SPREAD", False):
            continue  # tests with nothing to share, spread over the workers one by one
        item.add_marker(pytest.mark.xdist_group(path.stem))
