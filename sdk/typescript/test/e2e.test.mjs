// The TypeScript SDK end to end, against a real `bluebox serve` (autostarted here, from no
// server) and a real uml sandbox. Driven by tests/integration/test_sdk_typescript.py, which
// builds the sandbox and sets BLUEBOX_E2E_SANDBOX, BLUEBOX_HOME and BLUEBOX_BIN.
import assert from "node:assert/strict";
import * as net from "node:net";
import * as os from "node:os";
import { test } from "node:test";
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
const { Client, Sandbox, NotFound, NotUp, NotBuilt, IsUp, BadRequest, CommandFailed, socketPath } = require("../dist/index.js");

const NAME = process.env.BLUEBOX_E2E_SANDBOX;
const skip = NAME ? false : "BLUEBOX_E2E_SANDBOX is not set (run by tests/integration/test_sdk_typescript.py)";
const isUp = async (c) => (await c.sandboxes()).find((i) => i.name === NAME).up;
const answers = (p) =>
  new Promise((resolve) => {
    const s = net.connect(p, () => (s.destroy(), resolve(true)));
    s.on("error", () => resolve(false));
  });

test("autostart from no server", { skip }, async () => {
  const sock = socketPath();
  assert.equal(sock, `${process.env.BLUEBOX_HOME}/bluebox.sock`);
  assert.equal(await answers(sock), false, "a server was already there");
  const c = new Client();
  assert.match(await c.version(), /^\d+\.\d+/);
  assert.equal(await answers(sock), true);
  const info = (await c.sandboxes()).find((i) => i.name === NAME);
  assert.equal(info.up, false);
  assert.equal(info.backend, "uml");
});

test("typed errors", { skip }, async () => {
  await assert.rejects(new Sandbox("no-such-box").up(), (e) => e instanceof NotFound && e.code === "no_sandbox" && e.status === 404);
  const box = new Sandbox(NAME);
  await assert.rejects(box.exec("true"), (e) => e instanceof NotUp && e.code === "not_up" && e.status === 409);
  await assert.rejects(box.readFile("/etc/hostname"), NotUp);
  await assert.rejects(box.stream("true"), NotUp);
  await assert.rejects(new Sandbox(process.env.BLUEBOX_E2E_UNBUILT).up(),
    (e) => e instanceof NotBuilt && e.code === "not_built" && e.status === 409 && /bluebox build/.test(e.message));
  await assert.rejects(box.writeFile("/data/huge", Buffer.alloc(49 << 20)), // refused before it is sent
    (e) => e instanceof BadRequest && e.code === "too_large" && e.status === 413);
});

test("run in a fresh VM", { skip }, async () => {
  const box = new Sandbox(NAME);
  const r = await box.run("echo out; echo err >&2; uname -r; exit 3");
  assert.equal(r.exitCode, 3);
  assert.equal(r.stderrText, "err\n");
  const [out, kernel] = r.stdoutText.trim().split("\n");
  assert.equal(out, "out");
  assert.notEqual(kernel, os.release());
  const bin = Buffer.from([0, 1, 2, 255]);
  assert.deepEqual((await box.run(["cat"], { stdin: bin })).stdout, bin);
});

test("withUp: exec, files, stream", { skip }, async () => {
  const box = new Sandbox(NAME);
  const ret = await box.withUp(async (b) => {
    assert.equal(await isUp(b.client), true);
    (await b.exec("echo kept > /tmp/state")).check();
    assert.equal((await b.exec(["cat", "/tmp/state"])).stdoutText, "kept\n");
    assert.equal((await b.exec("echo $G; pwd", { env: { G: "hi" }, cwd: "/tmp" })).stdoutText, "hi\n/tmp\n");
    const bad = await b.exec("echo nope >&2; exit 9");
    assert.throws(() => bad.check(), (e) => e instanceof CommandFailed && e.result.exitCode === 9);
    const t = await b.exec(["sleep", "30"], { timeout: 1 });
    assert.equal(t.exitCode, 124);
    assert.equal(t.timedOut, true);
    const blob = Buffer.alloc(200000, 7);
    assert.equal(await b.writeFile("/data/ts.bin", blob), blob.length);
    assert.deepEqual(await b.readFile("/data/ts.bin"), blob);
    await b.writeFile("/data/ts.sh", "#!/bin/sh\necho ran\n", "0755");
    assert.equal((await b.exec("/data/ts.sh")).stdoutText, "ran\n");
    const ents = Object.fromEntries((await b.listDir("/data")).map((e) => [e.name, e]));
    assert.equal(ents["ts.bin"].size, blob.length);
    assert.equal(ents["ts.sh"].mode, "0755");
    // streaming: the first line arrives while the command still runs
    const t0 = Date.now();
    const seen = [];
    const s = await b.stream("echo one; sleep 2; echo two >&2; exit 4");
    for await (const { stream, data } of s) seen.push([stream, data.toString(), Date.now() - t0]);
    assert.deepEqual(seen.map(([a, d]) => [a, d]), [["stdout", "one\n"], ["stderr", "two\n"]]);
    assert.ok(seen[1][2] - seen[0][2] >= 1500, JSON.stringify(seen));
    const r = await s.result();
    assert.equal(r.exitCode, 4);
    assert.equal(r.stdoutText, "one\n");
    return "done";
  });
  assert.equal(ret, "done");
  assert.equal(await isUp(box.client), false);
});

test("withUp leaves an up sandbox up; restore refused while up", { skip }, async () => {
  const box = new Sandbox(NAME);
  assert.equal(await box.up(), true);
  try {
    await box.withUp(async (b) => assert.equal((await b.exec("true")).ok, true));
    assert.equal(await isUp(box.client), true);
    await assert.rejects(box.restore("anything"), IsUp);
  } finally {
    await box.down();
  }
});

test("run/stream and snapshots", { skip }, async () => {
  const box = new Sandbox(NAME);
  const r = await (await box.stream("for i in 1 2 3; do echo $i; done", { fresh: true })).result();
  assert.equal(r.stdoutText, "1\n2\n3\n");
  assert.equal(await box.snapshot("ts-snap"), "ts-snap");
  assert.ok((await box.snapshots()).some((s) => s.name === "ts-snap"));
  assert.equal(await box.restore("ts-snap"), "ts-snap");
});
