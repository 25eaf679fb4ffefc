"""The TypeScript SDK (sdk/typescript): built with tsc from its locked devDependencies (npm
ci), its unit tests against the fake server, its end-to-end tests against a real
`bluebox serve` it autostarts and a real uml sandbox (sdk/typescript/test/e2e.test.mjs), and
docs/sdks.md's example compiled and run as written."""
import os
import shutil
import subprocess
import sys

import pytest

from test_podman_build import env  # noqa: F401  (session fixture)
from test_runtime import IMAGE, REPO, UML, Home

sys.path.insert(0, str(REPO / "tests" / "sdk"))
from e2e import docs_block, stop_server  # noqa: E402

TS = REPO / "sdk" / "typescript"
NODE = shutil.which("node")
NPM = shutil.which("npm")

pytestmark = pytest.mark.skipif(not NODE or not NPM, reason="needs node and npm (scripts/deps.sh)")


def node_major():
    return int(subprocess.run([NODE, "--version"], capture_output=True, text=True).stdout.strip()
               .lstrip("v").split(".")[0])


@pytest.fixture(scope="module")
def built():
    """sdk/typescript compiled: `npm ci` (only when node_modules is missing or older than the
    lock), then `npm run build`."""
    assert node_major() >= 18, "the SDK needs Node >= 18"
    mods = TS / "node_modules" / ".package-lock.json"
    if not mods.exists() or mods.stat().st_mtime < (TS / "package-lock.json").stat().st_mtime:
        r = subprocess.run([NPM, "ci", "--no-audit", "--no-fund", "--ignore-scripts"], cwd=TS,
                           capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stdout + r.stderr
    r = subprocess.run([NPM, "run", "--silent", "build"], cwd=TS, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert (TS / "dist" / "index.d.ts").exists()
    return TS


def node_test(file, environ=None, timeout=600):
    r = subprocess.run([NODE, "--test", "--test-reporter=spec", str(file)], cwd=TS,
                       capture_output=True, text=True, timeout=timeout, env=environ)
    assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-3000:]
    assert "# fail 0" in r.stdout or "ℹ fail 0" in r.stdout, r.stdout[-3000:]
    return r.stdout


def test_zero_runtime_dependencies_and_types(built):
    import json
    pkg = json.loads((TS / "package.json").read_text())
    assert not pkg.get("dependencies"), "the SDK has no runtime dependencies"
    assert pkg["types"] == "dist/index.d.ts" and pkg["engines"]["node"] == ">=18"
    dts = (TS / "dist" / "index.d.ts").read_text()
    for name in ("class Client", "class Sandbox", "class Result", "withUp", "class NotUp",
                 "class NotFound", "class CommandFailed", "AsyncIterable<Chunk>"):
        assert name in dts, name


def test_unit_against_the_fake_server(built):
    out = node_test(TS / "test" / "unit.test.mjs", timeout=300)
    assert "autostart" in out


@pytest.fixture(scope="module")
def world(env, bluebox_bin):  # noqa: F811
    home = Home(bluebox_bin)
    name = home.sandbox(f"sdkts-{os.getpid()}", f"base: {IMAGE}\nbackend: uml\nram_mib: 256\n")
    r = home("build", name)
    assert r.returncode == 0, r
    unbuilt = home.sandbox(f"sdkts-unbuilt-{os.getpid()}", f"base: {IMAGE}\nbackend: uml\n")
    sock = home.env["BLUEBOX_HOME"] + "/bluebox.sock"
    try:
        yield home, name, dict(home.env, BLUEBOX_BIN=bluebox_bin, BLUEBOX_E2E_SANDBOX=name,
                               BLUEBOX_E2E_UNBUILT=unbuilt)
    finally:
        stop_server(sock)
        home("down", name)
        home.close()


@UML
@pytest.mark.skipif(os.geteuid() != 0, reason="integration tests need root")
def test_e2e_real_server_and_uml(built, world):
    _, _, environ = world
    out = node_test(TS / "test" / "e2e.test.mjs", environ)
    assert "# skip 0" in out or "ℹ skipped 0" in out, out[-2000:]


@UML
@pytest.mark.skipif(os.geteuid() != 0, reason="integration tests need root")
def test_docs_example(built, world, tmp_path):
    """docs/sdks.md's TypeScript example, compiled with tsc against the package and run."""
    _, name, environ = world
    code = docs_block("TypeScript SDK", "ts")
    assert len(code.splitlines()) <= 12, "the docs/sdks.md example should stay about 10 lines"
    assert '"demo"' in code
    (tmp_path / "example.mts").write_text(code.replace('"demo"', f'"{name}"'))
    mods = tmp_path / "node_modules"
    mods.mkdir()
    (mods / "bluebox-sdk").symlink_to(TS)
    (mods / "@types").symlink_to(TS / "node_modules" / "@types")
    r = subprocess.run([str(TS / "node_modules" / ".bin" / "tsc"), "--strict", "--module", "nodenext",
                        "--target", "es2022", "--types", "node", "example.mts"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    r = subprocess.run([NODE, "example.mjs"], cwd=tmp_path, capture_output=True, text=True,
                       timeout=300, env=environ)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "42\nhello from the host\n", r


@pytest.mark.parametrize("home", ["/srv/bb/", "/home/u/.bluebox", "/var/" + "x" * 100])
def test_socket_path_same_as_python(built, home):
    """Both SDKs look in the same place (Python's is checked against bluebox serve itself)."""
    sys.path.insert(0, str(REPO / "sdk" / "python"))
    import bluebox
    environ = dict(os.environ, BLUEBOX_HOME=home, XDG_RUNTIME_DIR="/run/user/7")
    r = subprocess.run([NODE, "-e", "console.log(require(process.argv[1]).socketPath())",
                        str(TS / "dist" / "index.js")], capture_output=True, text=True, env=environ)
    assert r.returncode == 0, r.stderr
    saved = dict(os.environ)
    try:
        os.environ.update(BLUEBOX_HOME=home, XDG_RUNTIME_DIR="/run/user/7")
        assert r.stdout.strip() == bluebox.socket_path()
    finally:
        os.environ.clear()
        os.environ.update(saved)
