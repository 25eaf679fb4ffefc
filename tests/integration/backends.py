"""The VM backends an integration test can run on, and what each needs on this host.

conftest.py parametrises every test that takes a `backend` argument over ALL (or over the
names of its `@pytest.mark.backends(...)` mark); a backend this host cannot run is skipped
with the reason. qemu runs with BLUEBOX_QEMU_ACCEL=QEMU_ACCEL: tcg unless
BLUEBOX_TEST_QEMU_ACCEL says kvm (a host where KVM runs a standard guest kernel)."""
import glob
import importlib.util
import os
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ALL = ("uml", "qemu")
QEMU_ACCEL = os.environ.get("BLUEBOX_TEST_QEMU_ACCEL", "tcg")
QEMU_KERNEL = os.environ.get("BLUEBOX_QEMU_KERNEL") or next(
    iter(sorted(glob.glob("/boot/vmlinuz-*-cloud-amd64"))), None)


def _hostkvm():
    """tests/cli/hostkvm.py, the one test-side answer to "does this host have KVM"."""
    spec = importlib.util.spec_from_file_location("hostkvm", REPO / "tests" / "cli" / "hostkvm.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


kvm_openable = _hostkvm().kvm_openable


def missing(name):
    """Why this host cannot run backend `name` under test, or None."""
    if os.geteuid() != 0 or shutil.which("podman") is None:
        return "integration tests need root and podman"
    if not (REPO / "build" / "bluebox-vmm").exists():
        return "needs build/bluebox-vmm"
    if name == "uml" and not Path("/usr/bin/linux.uml").exists():
        return "needs user-mode-linux"
    if name == "qemu":
        if not Path("/usr/bin/qemu-system-x86_64").exists():
            return "needs qemu-system-x86 (scripts/deps.sh)"
        if QEMU_KERNEL is None:
            return "needs a guest kernel: linux-image-cloud-amd64 (scripts/deps.sh)"
    return None


def skip_unless(name):
    """A mark that skips the test, with the reason, where backend `name` cannot run."""
    reason = missing(name)
    return pytest.mark.skipif(reason is not None, reason=f"{name}: {reason}")
