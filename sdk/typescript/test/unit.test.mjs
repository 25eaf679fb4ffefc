// The TypeScript SDK against tests/sdk/fakeserver.py (a stand-in for `bluebox serve`): requests
// sent, values and typed errors returned, streaming, withUp, the socket path, autostart.
// The real server and uml sandboxes: e2e.test.mjs, driven by tests/integration/test_sdk_typescript.py.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { test, before, after } from "node:test";
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
const sdk = require("../dist/index.js");
const { Client, Sandbox, Result, NotFound, NotUp, IsUp, Refused, NoServer, BadSocket, CommandFailed, BlueboxError } = sdk;

const FAKE = path.resolve(path.dirname(new URL(import.meta.url).pathname), "../../../tests/sdk/fakeserver.py");
const PY = "/usr/bin/python3";
const dir = fs.mkdtempSync(path.join(os.tmpdir(), "bb-ts-unit-"));
const sock = path.join(dir, "s.sock");
const log = path.join(dir, "requests.log");
let server;
let client;

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const requests = () =>
  fs.existsSync(log) ? fs.readFileSync(log, "utf8").trim().split("\n").map((l) => JSON.parse(l)) : [];

before(async () => {
  server = spawn(PY, [FAKE, "--socket", sock], { stdio: "inherit", env: { ...process.env, FAKE_LOG: log } });
  for (let i = 0; i < 250 && !fs.existsSync(sock); i++) await sleep(20);
  client = new Client({ socket: sock, autostart: false });
});

after(() => {
  server.kill("SIGKILL");
  fs.rmSync(dir, { recursive: true, force: true });
});

test("version and sandboxes", async () => {
  assert.equal(await client.version(), "0.0.0-fake");
  const infos = await client.sandboxes();
  assert.deepEqual(infos.map((i) => i.name), ["box", "other"]);
  assert.equal(infos[0].warmTarget, 0);
  assert.equal(infos[0].backend, "uml");
});

test("a command is a shell string or an argv; Result", async () => {
  const box = client.sandbox("box");
  assert.equal(await box.up(), true);
  assert.equal(await box.up(), false);
  const r = await box.exec("echo $((6*7)); echo err >&2; exit 3");
  assert.ok(r instanceof Result);
  assert.equal(r.exitCode, 3);
  assert.equal(r.stdoutText, "42\n");
  assert.equal(r.stderrText, "err\n");
  assert.equal(r.ok, false);
  assert.throws(() => r.check(), (e) => e instanceof CommandFailed && e.result === r && /exited 3: err/.test(e.message));
  const r2 = await box.exec(["printf", "%s|", "a b", "$HOME"], { stdin: "x", env: { K: "V" }, cwd: "/", timeout: 5 });
  assert.equal(r2.stdoutText, "a b|$HOME|");
  assert.equal(r2.check(), r2);
  const sent = requests().filter((q) => q.path.endsWith("/exec")).map((q) => q.body);
  assert.deepEqual(sent[0], { command: "echo $((6*7)); echo err >&2; exit 3" });
  assert.deepEqual(sent[1], { argv: ["printf", "%s|", "a b", "$HOME"], stdin: "eA==", env: { K: "V" }, cwd: "/", timeout_seconds: 5 });
  assert.deepEqual((await box.exec("cat", { stdin: Buffer.from([0, 255]) })).stdout, Buffer.from([0, 255]));
  await assert.rejects(box.exec([]), TypeError);
  const t = await box.run(["sleep", "5"], { timeout: 0.3 });
  assert.equal(t.exitCode, 124);
  assert.equal(t.timedOut, true);
});

test("typed errors", async () => {
  await assert.rejects(client.sandbox("nope").up(), (e) => e instanceof NotFound && e instanceof BlueboxError && e.code === "no_sandbox" && e.status === 404);
  await client.sandbox("other").down();
  await assert.rejects(client.sandbox("other").exec("true"), (e) => e instanceof NotUp && e.code === "not_up" && e.status === 409);
  await assert.rejects(client.sandbox("other").stream("true"), NotUp);
  await client.sandbox("box").up();
  await assert.rejects(client.sandbox("box").restore("s1"), IsUp);
  await assert.rejects(client.sandbox("../version").down(), NotFound);
  assert.equal(requests().at(-1).path, "/v1/sandboxes/..%2Fversion/down");
});

test("fork, diff, apply, discard", async () => {
  const parent = client.sandbox("other");
  await assert.rejects(parent.diff(), (e) => e instanceof Refused && e.code === "refused" && e.status === 409);
  const f = await parent.fork("other-f");
  assert.ok(f instanceof Sandbox);
  assert.equal(f.name, "other-f");
  assert.deepEqual(requests().at(-1), { method: "POST", path: "/v1/sandboxes/other/fork", body: { fork: "other-f" } });
  await assert.rejects(f.fork("other-ff"), Refused);
  await f.up();
  await f.writeFile("/data/new.txt", "x");
  assert.deepEqual(await f.diff(), { parent: "other", changes: [{ kind: "A", path: "/data/new.txt" }], skipped: 0 });
  await assert.rejects(f.apply(), IsUp);
  await f.down();
  assert.deepEqual((await f.apply()).changes.map((c) => c.path), ["/data/new.txt"]);
  assert.equal((await f.diff()).changes.length, 0);
  await f.up();
  await f.writeFile("/data/gone.txt", "y");
  await f.down();
  assert.equal((await f.discard()).changes.length, 1);
  assert.equal((await f.diff()).changes.length, 0);
});

test("files and snapshots", async () => {
  const box = client.sandbox("box");
  await box.up();
  assert.equal(await box.writeFile("/data/a.txt", "hi\n"), 3);
  assert.equal(await box.writeFile("/data/b.bin", Buffer.from([0, 255]), 0o600), 2);
  assert.deepEqual(await box.readFile("/data/a.txt"), Buffer.from("hi\n"));
  assert.deepEqual(await box.listDir("/data"), [
    { name: "a.txt", type: "file", size: 3, mode: "0644" },
    { name: "b.bin", type: "file", size: 2, mode: "0600" },
  ]);
  await assert.rejects(box.writeFile("/data/x", "", "rw"), RangeError);
  await assert.rejects(box.readFile("/data/missing"), NotFound);
  assert.equal(await box.snapshot("before"), "before");
  assert.deepEqual((await box.snapshots()).map((s) => s.name), ["s1"]);
});

test("stream: chunks arrive as they happen, then the Result", async () => {
  const box = client.sandbox("box");
  await box.up();
  const t0 = Date.now();
  const s = await box.stream("echo one; sleep 1; echo two");
  const seen = [];
  for await (const { stream, data } of s) seen.push([stream, data.toString(), Date.now() - t0]);
  assert.deepEqual(seen.map(([a, b]) => [a, b]), [["stdout", "one\n"], ["stdout", "two\n"]]);
  assert.ok(seen[0][2] < 800 && seen[1][2] >= 800, JSON.stringify(seen));
  const r = await s.result();
  assert.equal(r.stdoutText, "one\ntwo\n");
  assert.equal(r.ok, true);
  const r2 = await (await box.stream(["sh", "-c", "exit 5"], { fresh: true })).result();
  assert.equal(r2.exitCode, 5);
  assert.equal(requests().at(-1).path, "/v1/sandboxes/box/run/stream");
});

test("stream: leaving the loop early kills the command", async () => {
  const box = client.sandbox("box");
  await box.up();
  for await (const c of await box.stream("echo start; sleep 30; echo never")) {
    assert.equal(c.data.toString(), "start\n");
    break;
  }
  for (let i = 0; i < 100 && !requests().some((q) => q.killed); i++) await sleep(50);
  assert.ok(requests().some((q) => q.killed), "the server did not see the client go");
});

test("withUp downs only what it upped, even on a throw", async () => {
  const box = new Sandbox("other", client);
  await box.down();
  const n0 = requests().length;
  assert.equal(await box.withUp(async (b) => (await b.exec("echo hi")).stdoutText), "hi\n");
  assert.deepEqual(requests().slice(n0).map((q) => q.path.split("/").pop()), ["up", "exec", "down"]);
  await assert.rejects(box.withUp(() => { throw new Error("boom"); }), /boom/);
  assert.equal((await client.sandboxes())[1].up, false);
  await box.up();
  await box.withUp(() => {});
  assert.equal((await client.sandboxes())[1].up, true);
});

test("socket path is the server's", () => {
  const saved = { ...process.env };
  try {
    process.env.BLUEBOX_HOME = "/srv/bb/";
    assert.equal(sdk.socketPath(), "/srv/bb/bluebox.sock");
    delete process.env.BLUEBOX_HOME;
    process.env.HOME = "/home/u";
    assert.equal(sdk.socketPath(), "/home/u/.bluebox/bluebox.sock");
    const long = "/var/" + "x".repeat(100);
    process.env.BLUEBOX_HOME = long;
    process.env.XDG_RUNTIME_DIR = "/run/user/7";
    const h = createHash("sha256").update(long).digest().subarray(0, 6).toString("hex");
    assert.equal(sdk.socketPath(), `/run/user/7/bluebox-${h}.sock`);
    process.env.XDG_RUNTIME_DIR = "/run/" + "r".repeat(90);
    assert.throws(() => sdk.socketPath(), (e) => e instanceof BadSocket && /XDG_RUNTIME_DIR is too long/.test(e.message));
    delete process.env.XDG_RUNTIME_DIR;
    assert.throws(() => sdk.socketPath(), (e) => e instanceof BadSocket && /too long/.test(e.message));
  } finally {
    process.env = saved;
  }
});

test("no server without autostart", async () => {
  const c = new Client({ socket: path.join(dir, "none.sock"), autostart: false });
  await assert.rejects(c.version(), (e) => e instanceof NoServer && e.code === "no_server" && /start one: bluebox serve/.test(e.message));
});

test("autostart runs serve detached, then the request goes through", async () => {
  const s2 = path.join(dir, "auto.sock");
  const args = path.join(dir, "args");
  const pidfile = path.join(dir, "pid");
  const bin = path.join(dir, "bluebox");
  fs.writeFileSync(bin, `#!/bin/sh\necho "$@" > ${args}\necho $$ > ${pidfile}\nexec ${PY} ${FAKE} "$@"\n`, { mode: 0o755 });
  try {
    const c = new Client({ socket: s2, binary: bin, idle: "2m" });
    assert.equal((await c.sandboxes())[0].name, "box");
    assert.deepEqual(fs.readFileSync(args, "utf8").trim().split(" "), ["serve", "--socket", s2, "--idle", "2m"]);
  } finally {
    if (fs.existsSync(pidfile)) process.kill(Number(fs.readFileSync(pidfile, "utf8")), "SIGKILL");
  }
  const bad = path.join(dir, "bad");
  fs.writeFileSync(bad, "#!/bin/sh\necho 'bluebox: cannot serve here' >&2\nexit 1\n", { mode: 0o755 });
  await assert.rejects(new Client({ socket: path.join(dir, "x.sock"), binary: bad }).version(),
    (e) => e instanceof NoServer && /exited with status 1: bluebox: cannot serve here/.test(e.message));
  await assert.rejects(new Client({ socket: path.join(dir, "x.sock"), binary: path.join(dir, "missing") }).version(), NoServer);
});
