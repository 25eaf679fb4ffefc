#!/usr/bin/python3
"""Write the seed corpus for the Bluefile fuzz targets: the shipped examples, edge cases
that parse, and one input per rejection rule. Run once after adding a rule; the files are
committed and replayed by `make check`."""
import hashlib
import os
import sys

root = os.path.dirname(os.path.abspath(__file__))
out = os.path.join(root, "corpus", "bluefile")
repo = os.path.dirname(os.path.dirname(root))

cases = [
    "", "# only a comment\n", "---\n", "~\n", "cpus: 2\n",
    "base: docker.io/library/debian:bookworm-slim\npackages: [python3, git]\n",
    "cpus: 99\n", "cpus: 0\n", "cpus: \"2\"\n", "cpus: [1]\n", "cpus: 1e3\n",
    "cpus: 99999999999999999999\n", "ram_mib: 127\n", "ram_mib: -1\n",
    "network: host\n", "network: bridge\nwarm: 2\n", "warm: 1\n", "warm: 9\n",
    "passt: maybe\n", "readonly: yes\n", "timeout_seconds: -5\n",
    "warmup: ['', ok]\n", "isolation: strict\nmounts:\n  - {host: /tmp, guest: /w, mode: rw}\n",
    "backend: firecracker\n", "backend: podman\n", "backend: uml\n",
    "seccomp: /nonexistent.json\n", "pkgmgr: APK\npackages: [x]\n",
    "base: quay.io/x/y\npackages: [x]\n", "packages: ['a;b']\n", "packages: ['-o']\n",
    "packages: ['a b']\n", "packages: ['$(id)']\n", "run: ['echo hi', 'true']\n",
    "run:\n  - |\n    one\n    FROM evil\n", "run:\n  - |\n    ok\n",
    "env:\n  LANG: C.UTF-8\n  A_B: 'x y \"q\" $HOME \\\\'\n", "env:\n  1BAD: x\n",
    "env:\n  A: \"line\\nbreak\"\n", "env: [a]\n",
    "mounts:\n  - host: ~/src\n    guest: /src\n", "mounts:\n  - host: rel\n    guest: /x\n",
    "mounts:\n  - host: /a:b\n    guest: /x\n", "mounts:\n  - host: /a/../b\n    guest: /x\n",
    "mounts:\n  - host: /a\n    guest: /data\n", "mounts:\n  - {host: /a, guest: /x}\n  - {host: /b, guest: /x}\n",
    "mounts:\n  - {host: /a, guest: /x, mode: rx}\n", "mounts:\n  - {host: /a, guest: '/x y'}\n",
    "blueprint:\n  users:\n    - {name: admin, shell: /bin/bash, sudo: true}\n  write_files:\n    - {path: /etc/motd, content: \"hi $x `y`\\n\", mode: '0644'}\n  runcmd: [echo done]\n",
    "blueprint:\n  users:\n    - {name: Admin}\n", "blueprint:\n  users:\n    - {name: a, shell: bash}\n",
    "blueprint:\n  write_files:\n    - {path: 'rel', content: x}\n",
    "blueprint:\n  write_files:\n    - {path: /x, mode: '999'}\n", "blueprint:\n  other: 1\n",
    "cpus: 2\ncpus: 3\n", "cpu: 2\n", "a: &x [1]\nb: *x\n", "cpus: !!int 2\n",
    "a: 1\n---\nb: 2\n", "cpus: [\n", "\"unterminated\n", "- a\n- b\n", "just text\n",
    "lol: &a [x,x,x,x,x,x,x,x,x]\nlol2: &b [*a,*a,*a,*a,*a,*a,*a,*a]\n",
    "env:\n  A: \"nul\\0byte\"\n", "[" * 100 + "\n", "{a: " * 40 + "1" + "}" * 40 + "\n",
    "base: \"with space\"\n", "base: \"\"\n", "\ufeffcpus: 2\n",
]
os.makedirs(out, exist_ok=True)
for c in cases:
    data = c.encode()
    name = hashlib.sha1(data).hexdigest()[:16]
    open(os.path.join(out, name), "wb").write(data)
ex = os.path.join(repo, "examples")
for e in sorted(os.listdir(ex)):
    p = os.path.join(ex, e, "Bluefile")
    if os.path.isfile(p):
        open(os.path.join(out, "example-" + e), "wb").write(open(p, "rb").read())
print(len(os.listdir(out)), "inputs in", out, file=sys.stderr)
