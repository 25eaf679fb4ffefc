"""The uml guest's boot trims, on real podman and a real guest kernel: what a boot
must not do, whatever it costs (the costs are bench/boot_profile.py's, never asserted here).
Needs root, podman, user-mode-linux and build/bluebox-vmm."""
import json
import os

import pytest

from test_podman_build import env  # noqa: F401  (session fixture)
from test_runtime import IMAGE, UML, Home

# The kernel's modprobe helper pointed at a spy in the image (`sysctl.` words apply before
# init runs): every module request of the boot leaves a line in /modprobe.log. Before the
# switch to the RAM layer the root is the image itself, whose files the layer shows after.
SPY = ("blueprint:\n  write_files:\n    - path: /bb-modprobe-spy\n      mode: \"0755\"\n"
       "      content: |\n        #!/bin/sh\n        echo \"$*\" >> /modprobe.log\n")


@pytest.fixture
def home(env, bluebox_bin):  # noqa: F811
    h = Home(bluebox_bin)
    yield h
    h.close()


@UML
@pytest.mark.parametrize("network", ["none", "bridge"])
def test_a_boot_asks_the_kernel_for_no_module(home, network):
    """The init asked for its network device with if_nametoindex(), which for a device that is
    not there (network: none) makes the kernel run the image's modprobe for netdev-vec0, twice
    per boot: 20-60 ms of an exec that cannot find anything."""
    name = home.sandbox(f"trim-{os.getpid()}-{network}",
                        f"base: {IMAGE}\nbackend: uml\nram_mib: 256\nnetwork: {network}\n{SPY}")
    r = home("build", name)
    assert r.returncode == 0, r
    probe = "test -x /bb-modprobe-spy && echo spy-there; cat /modprobe.log 2>/dev/null; true"
    r = home("run", name, "--", "sh", "-c", probe,
             env={"BLUEBOX_UML_ARGS": "sysctl.kernel.modprobe=/bb-modprobe-spy"})
    assert r.returncode == 0, r
    out = r.stdout.decode()
    assert out.startswith("spy-there\n"), out
    assert out == "spy-there\n", f"the boot asked for modules: {out!r}"


HOTPLUG_SPY = ("blueprint:\n  write_files:\n    - path: /bb-hotplug-spy\n      mode: \"0755\"\n"
               "      content: |\n        #!/bin/sh\n        echo \"$*\" >> /hotplug.log\n")


@UML
def test_a_boot_registers_only_its_lines_and_runs_no_uevent_helper(home):
    """`con=null ssl=null` registered all 16 console and 64 serial lines, and the kernel ran
    its uevent helper (/sbin/hotplug) for each device and for every module the init loads:
    on uml every exec, even of a missing file, is a new host process. Only the two lines in
    use are there, and no uevent helper runs once the init has started (the helper pointed at
    a spy in the image by a `sysctl.` word, which applies before init runs)."""
    name = home.sandbox(f"trim-hp-{os.getpid()}",
                        f"base: {IMAGE}\nbackend: uml\nram_mib: 256\nnetwork: none\n"
                        f"{HOTPLUG_SPY}")
    r = home("build", name)
    assert r.returncode == 0, r
    probe = ("ls /sys/class/tty; echo helper=$(cat /proc/sys/kernel/hotplug); "
             "test -x /bb-hotplug-spy && echo spy-there; cat /hotplug.log 2>/dev/null; true")
    r = home("run", name, "--", "sh", "-c", probe,
             env={"BLUEBOX_UML_ARGS": "sysctl.kernel.hotplug=/bb-hotplug-spy"})
    assert r.returncode == 0, r
    out = r.stdout.decode().split()
    ttys = {t for t in out if t.startswith("tty") and t != "tty"}
    assert ttys == {"tty0", "ttyS0"}, out
    assert "helper=" in out, out
    tail = out[out.index("helper=") + 1:]
    assert tail[:1] == ["spy-there"], out
    assert tail[1:] == [], f"the uevent helper ran after the init started: {tail[1:]}"


@UML
def test_the_direct_launch_maps_guest_ram_from_huge_pages(home):
    """The tmpfs UML maps the guest's RAM from asks for transparent huge pages on the direct
    launch where the host kernel has them for tmpfs (huge=within_size: small files there stay
    small); the guest boots with it."""
    if not os.path.exists("/sys/kernel/mm/transparent_hugepage/shmem_enabled"):
        pytest.skip("the host kernel has no transparent huge pages for tmpfs")
    name = home.sandbox(f"trim-huge-{os.getpid()}",
                        f"base: {IMAGE}\nbackend: uml\nram_mib: 256\nnetwork: none\n")
    assert home("build", name).returncode == 0
    r = home("run", name, "--", "true", env={"BLUEBOX_LAUNCH": "direct"})
    assert r.returncode == 0, r
    configs = list((home.dir / "home" / "direct" / "tpl").glob(f"{name}-*/config.json"))
    assert len(configs) == 1, configs
    mounts = json.loads(configs[0].read_text())["mounts"]
    mem = [m for m in mounts if m["destination"] == "/.bluebox/mem"]
    assert len(mem) == 1 and "huge=within_size" in mem[0]["options"], mem
