"""The Bluefile's `allow:` against the machine's own package registries, end to end
on uml with the Debian test image: with the Debian mirror allowed and the npm registry not,
`apt-get update` in the guest succeeds and an npm request fails fast with a denial in
`bluebox logs <name> --net`; then the reverse (the registry's package metadata comes through
over HTTPS, verified by the guest against the machine's own CA bundle, and apt fails fast with
a logged denial).

Both names come from this machine's configuration at run time: the mirror from apt's sources
(/etc/apt/sources.list*), the registry from `npm config get registry`. No registry host name is
written here. Needs root, podman, uml and BLUEBOX_TEST_DEBIAN=1 (the debootstrap image)."""
import json
import os
import ssl
import subprocess
import urllib.request
from pathlib import Path

import pytest

from test_podman_build import env  # noqa: F401  (session fixture: setup.sh, --debian)
from test_runtime import UML, Home

DEBIAN = pytest.mark.skipif(os.environ.get("BLUEBOX_TEST_DEBIAN") != "1",
                            reason="set BLUEBOX_TEST_DEBIAN=1 (debootstrap image, ~90 s once)")
PACKAGE = "left-pad"  # any package: its metadata document is what npm fetches first
FAST = 10.0  # seconds: a refusal is an immediate error, far below any client's timeout
APT_HELPER = "/usr/lib/apt/apt-helper"  # apt's own https method (GnuTLS): no curl in minbase


def apt_hosts():
    """Every host of an enabled http(s) deb source in this machine's apt configuration."""
    src = Path("/etc/apt/sources.list")
    files = ([src] if src.exists() else []) + sorted(Path("/etc/apt/sources.list.d").glob("*"))
    uris = []
    for f in files:
        text = f.read_text(errors="replace")
        if f.suffix == ".sources":
            for stanza in text.split("\n\n"):
                fields = {}
                for line in stanza.splitlines():
                    if line and not line.startswith(("#", " ")) and ":" in line:
                        k, _, v = line.partition(":")
                        fields[k.strip().lower()] = v.split()
                if fields.get("enabled", ["yes"])[0].lower() != "no":
                    uris += fields.get("uris", [])
        elif f.suffix == ".list" or f == src:
            for line in text.splitlines():
                w = [x for x in line.split("#", 1)[0].split() if not x.startswith("[")]
                if len(w) >= 3 and w[0] == "deb":
                    uris.append(w[1])
    hosts = []
    for u in uris:
        if u.startswith(("http://", "https://")):
            h = u.split("//", 1)[1].split("/", 1)[0].split(":", 1)[0]
            if h not in hosts:
                hosts.append(h)
    return hosts


def npm_config(key):
    try:
        r = subprocess.run(["npm", "config", "get", key], capture_output=True, text=True,
                           timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    v = r.stdout.strip()
    return v if r.returncode == 0 and v not in ("", "null", "undefined") else None


def npm_registry():
    """(host, base URL, CA bundle) of npm's registry here, or skip with the reason."""
    url = npm_config("registry")
    if not url or not url.startswith(("http://", "https://")):
        pytest.skip(f"npm has no registry configured here ({url!r})")
    host = url.split("//", 1)[1].split("/", 1)[0].split(":", 1)[0]
    ca = npm_config("cafile") or "/etc/ssl/certs/ca-certificates.crt"
    if not Path(ca).is_file():
        pytest.skip(f"npm's CA bundle {ca} is not a file")
    try:
        ctx = ssl.create_default_context(cafile=ca)
        with urllib.request.urlopen(url.rstrip("/") + "/" + PACKAGE, timeout=30,
                                    context=ctx) as r:
            body = r.read()
    except OSError as e:
        pytest.skip(f"environmental limit: npm's registry {url} is not reachable from this "
                    f"machine ({e})")
    assert json.loads(body)["name"] == PACKAGE, body[:200]
    return host, url.rstrip("/"), ca


def timed(tag, cmd):
    """Shell running cmd, then 'took TAG SECONDS' (date's nanoseconds: coreutils in Debian)."""
    return (f"a=$(date +%s.%N); {{ {cmd} ; }} 2>&1 | tail -n 8; "
            f"b=$(date +%s.%N); echo \"took {tag} $a $b\"")


def took(out, tag):
    lines = [ln for ln in out.splitlines() if ln.startswith(f"took {tag} ")]
    assert len(lines) == 1, out
    _, _, a, b = lines[0].split()
    return float(b) - float(a)


@pytest.fixture
def registries(env, bluebox_bin):  # noqa: F811
    """A Debian sandbox whose `allow:` each call rewrites; returns (stdout, JSON log entries,
    `bluebox logs --net` text)."""
    image = os.environ.get("BLUEBOX_TEST_DEBIAN_IMAGE")
    if not image:
        pytest.skip("no Debian test image (tests/integration/setup.sh --debian)")
    h = Home(bluebox_bin)
    name = h.sandbox(f"registries-{os.getpid()}", "")
    bluefile = h.dir / "home" / "sandboxes" / name / "Bluefile"
    log = h.dir / "home" / "logs" / "net" / f"{name}.log"

    def run(allow, script, stdin=b""):
        entries = "".join(f"  - {a}\n" for a in allow)
        bluefile.write_text(f"base: {image}\nbackend: uml\nram_mib: 512\nnetwork: bridge\n"
                            f"allow:\n{entries}")
        r = h("build", name, timeout=900)
        assert r.returncode == 0, r
        assert f"network allow {len(allow)} host".encode() in r.stdout + r.stderr, r
        if log.exists():
            log.unlink()
        r = h("run", name, "--", "sh", "-c", script, input=stdin, timeout=600)
        out = r.stdout.decode()
        print(out)
        assert r.returncode == 0, r
        assert log.stat().st_mode & 0o777 == 0o600, oct(log.stat().st_mode)
        lines = [json.loads(ln) for ln in log.read_text().splitlines()]
        shown = h("logs", name, "--net", "-n", "1000")
        assert shown.returncode == 0, shown
        return out, lines, shown.stdout.decode()

    yield run
    h.close()


def denied(lines, shown, host):
    """The refusal of host is a JSON line of its own and a row of `logs --net`."""
    assert any(e.get("name") == host and e["decision"] == "deny" for e in lines), lines
    assert not any(e.get("name") == host and e["decision"] == "allow" for e in lines), lines
    rows = [ln for ln in shown.splitlines() if host in ln]
    assert rows and all(" deny " in r and " allow " not in r for r in rows), shown


@UML
@DEBIAN
def test_mirror_allowed_npm_denied_then_the_reverse(registries):
    mirrors = apt_hosts()
    if not mirrors:
        pytest.skip("apt has no http(s) Debian mirror configured on this machine")
    npm_host, npm_url, ca = npm_registry()
    if npm_host in mirrors:
        pytest.skip(f"the npm registry and a Debian mirror share the name {npm_host}")
    fetch = (f"{APT_HELPER} -o Acquire::https::CaInfo=/tmp/ca.pem -o Acquire::Retries=0 "
             f"download-file {npm_url}/{PACKAGE} /tmp/meta; echo fetch=$?")
    save_ca = "cat > /tmp/ca.pem; "
    bundle = Path(ca).read_bytes()

    # the mirror allowed, the registry not
    out, lines, shown = registries(mirrors, save_ca + "; ".join([
        "apt-get update >/tmp/apt.out 2>&1; echo update=$?",
        "grep -E '^(W|E|Err):' /tmp/apt.out | sed 's/^/apt-problem /'",
        "echo lists=$(ls /var/lib/apt/lists | grep -c _Packages)",
        timed("npm", fetch),
        "test -s /tmp/meta && echo got-meta; true",
    ]), stdin=bundle)
    assert "update=0" in out and "lists=0" not in out, out
    assert "apt-problem" not in out, out
    assert "fetch=0" not in out and "got-meta" not in out, out
    assert took(out, "npm") < FAST, out
    denied(lines, shown, npm_host)
    assert any(e.get("kind") == "tcp" and e["name"] in mirrors and e["decision"] == "allow"
               and e["bytes_down"] > 0 for e in lines), lines

    # the reverse: the registry allowed (its TLS passes through untouched: the guest checks
    # the registry's certificate itself), the mirror not
    out, lines, shown = registries([npm_host], save_ca + "; ".join([
        fetch,
        f"grep -o '\"name\": *\"{PACKAGE}\"' /tmp/meta | head -1",
        timed("apt", "apt-get -o Acquire::Retries=0 update"),
        "echo lists=$(ls /var/lib/apt/lists | grep -c _Packages)",
    ]), stdin=bundle)
    assert "fetch=0" in out and f'"{PACKAGE}"' in out, out
    # apt warns and exits 0 when no index could be fetched: nothing fetched is the failure
    assert "Failed to fetch" in out and "lists=0" in out, out
    assert took(out, "apt") < FAST, out
    denied(lines, shown, mirrors[0])
    tcp = [e for e in lines if e.get("kind") == "tcp" and e["name"] == npm_host]
    assert tcp and tcp[0]["decision"] == "allow" and tcp[0]["port"] == 443, lines
    assert tcp[0]["bytes_down"] > 0, lines
