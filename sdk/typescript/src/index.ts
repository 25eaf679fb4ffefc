/**
 * bluebox-sdk: drive bluebox sandboxes from Node through the local API (`bluebox serve`,
 * started on first use). Zero runtime dependencies; Node >= 18.
 *
 * ```ts
 * import { Sandbox } from "bluebox-sdk";
 * await new Sandbox("demo").withUp(async (box) => {
 *   const r = await box.exec("uname -a");
 *   console.log(r.exitCode, r.stdoutText);
 * });
 * ```
 */
import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import * as fs from "node:fs";
import * as http from "node:http";
import * as os from "node:os";
import * as path from "node:path";

/** A command: a string runs as `sh -c <string>`; an array is an argv (no shell). */
export type Command = string | readonly string[];

/** Bytes or text (text is sent as UTF-8). */
export type Data = string | Uint8Array;

/** Options of exec, run and stream. */
export interface CommandOptions {
  /** Fed to the command's standard input. */
  stdin?: Data;
  /** Seconds; overrides the Bluefile's `timeout_seconds`. */
  timeout?: number;
  /** Extra environment variables. */
  env?: Record<string, string>;
  /** Working directory in the guest (absolute). */
  cwd?: string;
}

/** Options of a Client. */
export interface ClientOptions {
  /** The server's socket (default: where `bluebox serve` listens for this BLUEBOX_HOME). */
  socket?: string;
  /** The bluebox executable that starts the server (default `$BLUEBOX_BIN`, else `bluebox` on PATH). */
  binary?: string;
  /** Start `bluebox serve` when no server answers (default true). */
  autostart?: boolean;
  /** The started server's `--idle` (default "15m"). */
  idle?: string;
}

const SUN_PATH_MAX = 103;
const START_WAIT_MS = 30000; // a loaded host can take seconds to start it; a dead one is seen at once
const STREAM_CAP = 16 << 20;
const MAX_BODY = 64 << 20; // the server's request limit

// ---------------------------------------------------------------------------------- errors

/**
 * An error from the API or the SDK. `code` is the API's code (`no_sandbox`, `not_up`, `is_up`, `refused`, `not_built`,
 * `bad_name`, `bad_request`, `too_large`, `not_found`, `method`, `internal`) or the SDK's own
 * (`no_server`, `bad_socket`, `command_failed`); `status` the HTTP status, if there was one.
 */
export class BlueboxError extends Error {
  readonly code: string;
  readonly status?: number;
  constructor(message: string, code = "internal", status?: number) {
    super(message);
    this.name = new.target.name;
    this.code = code;
    this.status = status;
  }
}
/** No sandbox by that name (`no_sandbox`), or an unknown route (`not_found`). */
export class NotFound extends BlueboxError {}
/** The sandbox must be up for this (`not_up`): call `up()` first. */
export class NotUp extends BlueboxError {}
/** The sandbox was never built (`not_built`): run `bluebox build NAME` first. */
export class NotBuilt extends BlueboxError {}
/** The sandbox must be down for this (`is_up`), e.g. `restore`. */
export class IsUp extends BlueboxError {}
/**
 * A guard of the operation said no (`refused`): a fork asked to reset or snapshot, a sandbox
 * that is not a fork asked to diff/apply/discard, /data in use by a run. The message says why
 * and what to do instead.
 */
export class Refused extends BlueboxError {}
/** The server refused the request (`bad_request`, `bad_name`, `too_large`, `method`). */
export class BadRequest extends BlueboxError {}
/** No server answers on the socket and none could be started. */
export class NoServer extends BlueboxError {}
/** The socket path cannot be used. */
export class BadSocket extends BlueboxError {}
/** Thrown by `Result.check()` for a command that exited non-zero or timed out. */
export class CommandFailed extends BlueboxError {
  readonly result: Result;
  constructor(result: Result) {
    const what = result.timedOut ? "timed out" : `exited ${result.exitCode}`;
    const tail = result.stderrText.trim().split("\n").pop();
    super(`command ${what}${tail ? `: ${tail}` : ""}`, "command_failed");
    this.result = result;
  }
}

const BY_CODE: Record<string, new (m: string, c: string, s?: number) => BlueboxError> = {
  no_sandbox: NotFound,
  not_found: NotFound,
  not_up: NotUp,
  is_up: IsUp,
  refused: Refused,
  not_built: NotBuilt,
  bad_request: BadRequest,
  bad_name: BadRequest,
  too_large: BadRequest,
  method: BadRequest,
  no_server: NoServer,
  bad_socket: BadSocket,
};

const CODE_OF_STATUS: Record<number, string> = { 400: "bad_request", 404: "not_found", 405: "method", 413: "too_large" };

function errorFor(message: string, code: string, status?: number): BlueboxError {
  const Cls = BY_CODE[code] ?? BlueboxError;
  return new Cls(message, code, status);
}

// ---------------------------------------------------------------------------------- values

/** What a command did. A non-zero exit is a Result, not an exception; `check()` makes it one. */
export class Result {
  constructor(
    readonly exitCode: number,
    readonly stdout: Buffer = Buffer.alloc(0),
    readonly stderr: Buffer = Buffer.alloc(0),
    readonly durationMs = 0,
    readonly timedOut = false,
    readonly truncated = false,
  ) {}

  /** True when the command exited 0. */
  get ok(): boolean {
    return this.exitCode === 0 && !this.timedOut;
  }
  /** stdout as UTF-8 text. */
  get stdoutText(): string {
    return this.stdout.toString("utf8");
  }
  /** stderr as UTF-8 text. */
  get stderrText(): string {
    return this.stderr.toString("utf8");
  }
  /** This Result when `ok`; else throws CommandFailed. */
  check(): this {
    if (!this.ok) throw new CommandFailed(this);
    return this;
  }

  /** @internal */
  static fromJSON(o: any): Result {
    return new Result(
      Number(o.exit_code),
      Buffer.from(o.stdout ?? "", "base64"),
      Buffer.from(o.stderr ?? "", "base64"),
      Number(o.duration_ms ?? 0),
      Boolean(o.timed_out),
      Boolean(o.truncated),
    );
  }
}

/** One row of `Client.sandboxes()`. */
export interface SandboxInfo {
  name: string;
  up: boolean;
  warm: number;
  warmTarget: number;
  network: string;
  backend: string;
  base: string;
  error?: string;
}

/** One entry of `listDir()`: `mode` is octal text such as "0644". */
export interface Entry {
  name: string;
  type: "file" | "dir" | "link" | "other";
  size: number;
  mode: string;
}

/** One snapshot of a sandbox's /data. */
export interface Snapshot {
  name: string;
  created: string;
  bytes: number;
}

/** One change in a fork's /data over its parent's: added, modified or deleted. */
export interface Change {
  kind: "A" | "M" | "D";
  path: string;
}

/** A fork's changes (`diff()`), or those `apply()` merged or `discard()` dropped. */
export interface Changes {
  parent: string;
  changes: Change[];
  /** entries too deep to take */
  skipped: number;
}

function changesOf(r: any): Changes {
  return {
    parent: String(r.parent ?? ""),
    changes: (r.changes ?? []).map((c: any) => ({ kind: c.change, path: String(c.path) })),
    skipped: Number(r.skipped ?? 0),
  };
}

/** One piece of live output from `stream()`. */
export interface Chunk {
  stream: "stdout" | "stderr";
  data: Buffer;
}

// ---------------------------------------------------------------------------------- socket

function homeRoot(): string {
  const h = process.env.BLUEBOX_HOME;
  if (h) {
    if (!h.startsWith("/")) throw new BadSocket(`BLUEBOX_HOME must be an absolute path, got "${h}"`, "bad_socket");
    return h;
  }
  const home = process.env.HOME ?? "";
  if (!home.startsWith("/")) throw new BadSocket("HOME is not set; set HOME or BLUEBOX_HOME", "bad_socket");
  return join(home, ".bluebox");
}

// bluebox's path_join: a's trailing slashes (but a lone "/") and b's leading ones collapse
function join(a: string, b: string): string {
  let la = a.length;
  while (la > 1 && a[la - 1] === "/") la--;
  return a.slice(0, la) + "/" + b.replace(/^\/+/, "");
}

/** The socket `bluebox serve` listens on by default, computed as the server does. */
export function socketPath(): string {
  const root = homeRoot();
  const p = join(root, "bluebox.sock");
  if (Buffer.byteLength(p) <= SUN_PATH_MAX) return p;
  const run = process.env.XDG_RUNTIME_DIR ?? "";
  if (!run.startsWith("/")) {
    throw new BadSocket(
      `the socket path ${p} is too long for a Unix socket and XDG_RUNTIME_DIR is not set; set a shorter BLUEBOX_HOME`,
      "bad_socket",
    );
  }
  const digest = createHash("sha256").update(root).digest("hex").slice(0, 12);
  const fallback = `${run}/bluebox-${digest}.sock`; // as the server writes it (no path_join here)
  if (Buffer.byteLength(fallback) > SUN_PATH_MAX) {
    throw new BadSocket("XDG_RUNTIME_DIR is too long for a Unix socket path", "bad_socket");
  }
  return fallback;
}

// ---------------------------------------------------------------------------------- transport

function isConnectError(e: any): boolean {
  return e && (e.code === "ENOENT" || e.code === "ECONNREFUSED");
}

function b64(d: Data): string {
  return (typeof d === "string" ? Buffer.from(d, "utf8") : Buffer.from(d)).toString("base64");
}

async function errorFromResponse(res: http.IncomingMessage): Promise<BlueboxError> {
  const raw = await readAll(res);
  try {
    const o = JSON.parse(raw.toString("utf8"));
    return errorFor(String(o.error), String(o.code ?? "internal"), res.statusCode);
  } catch {
    // not JSON (the HTTP layer's own 413, say): the code from the status
    const code = CODE_OF_STATUS[res.statusCode ?? 500] ?? "internal";
    return errorFor(raw.toString("utf8").trim() || String(res.statusMessage), code, res.statusCode);
  }
}

function readAll(res: http.IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const parts: Buffer[] = [];
    res.on("data", (c: Buffer) => parts.push(c));
    res.on("end", () => resolve(Buffer.concat(parts)));
    res.on("error", reject);
  });
}

/** A connection to the local bluebox API (`bluebox serve`). */
export class Client {
  /** The socket path this client talks to. */
  readonly socket: string;
  private readonly binary?: string;
  private readonly autostart: boolean;
  private readonly idle: string;
  private starting?: Promise<void>;

  constructor(opts: ClientOptions = {}) {
    this.socket = opts.socket ?? socketPath();
    this.binary = opts.binary;
    this.autostart = opts.autostart ?? true;
    this.idle = opts.idle ?? "15m";
  }

  /** The server's bluebox version. */
  async version(): Promise<string> {
    return String((await this.request("GET", "/v1/version")).version);
  }

  /** Every sandbox in this BLUEBOX_HOME, with its up/warm state. */
  async sandboxes(): Promise<SandboxInfo[]> {
    const list: any[] = await this.request("GET", "/v1/sandboxes");
    return list.map((o) => ({
      name: String(o.name),
      up: Boolean(o.up),
      warm: Number(o.warm ?? 0),
      warmTarget: Number(o.warm_target ?? 0),
      network: String(o.network ?? ""),
      backend: String(o.backend ?? ""),
      base: String(o.base ?? ""),
      ...(o.error != null ? { error: String(o.error) } : {}),
    }));
  }

  /** A handle on the sandbox `name` (nothing is checked until it is used). */
  sandbox(name: string): Sandbox {
    return new Sandbox(name, this);
  }

  /** @internal One request; the parsed JSON, or the typed error for a non-2xx. */
  async request(method: string, route: string, body?: unknown): Promise<any> {
    const res = await this.open(method, route, body);
    if (Math.floor((res.statusCode ?? 500) / 100) !== 2) throw await errorFromResponse(res);
    const raw = await readAll(res);
    return raw.length ? JSON.parse(raw.toString("utf8")) : null;
  }

  /** @internal Send one request; the response (status unchecked). Starts the server once if needed. */
  async open(method: string, route: string, body?: unknown): Promise<http.IncomingMessage> {
    const data = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
    if (data && data.length > MAX_BODY) {
      throw new BadRequest(
        `the request is ${data.length} bytes, over the server's 64 MiB limit (stdin and file content travel base64-encoded: about 48 MiB of data)`,
        "too_large",
        413,
      );
    }
    try {
      return await this.send(method, route, data);
    } catch (e: any) {
      if (!isConnectError(e)) throw e;
      if (!this.autostart) {
        throw new NoServer(`no bluebox server answers on ${this.socket} (${e.code}); start one: bluebox serve`, "no_server");
      }
    }
    await this.start();
    return this.send(method, route, data);
  }

  private send(method: string, route: string, data?: Buffer): Promise<http.IncomingMessage> {
    return new Promise((resolve, reject) => {
      const headers: Record<string, string | number> = { Accept: "application/json" };
      if (data) {
        headers["Content-Type"] = "application/json";
        headers["Content-Length"] = data.length;
      }
      const req = http.request({ socketPath: this.socket, method, path: route, headers, agent: false }, resolve);
      req.on("error", reject);
      req.end(data);
    });
  }

  private async answers(): Promise<boolean> {
    try {
      const res = await this.send("GET", "/v1/version");
      await readAll(res);
      return res.statusCode === 200;
    } catch {
      return false;
    }
  }

  /** Start `bluebox serve` detached on this socket and wait until it answers. */
  private start(): Promise<void> {
    // concurrent requests of one client share one start
    this.starting ??= this.doStart().finally(() => (this.starting = undefined));
    return this.starting;
  }

  private async doStart(): Promise<void> {
    const bin = this.binary ?? process.env.BLUEBOX_BIN ?? findOnPath("bluebox");
    if (!bin) {
      throw new NoServer(
        `no bluebox server answers on ${this.socket}, and no bluebox binary to start one: put bluebox on PATH or set BLUEBOX_BIN`,
        "no_server",
      );
    }
    // stderr goes to an unlinked file: read when the server fails to come up
    const errPath = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "bluebox-sdk-")), "serve.err");
    const errFd = fs.openSync(errPath, "w+", 0o600);
    fs.unlinkSync(errPath);
    fs.rmdirSync(path.dirname(errPath));
    try {
      const child = spawn(bin, ["serve", "--socket", this.socket, "--idle", this.idle], {
        detached: true,
        stdio: ["ignore", "ignore", errFd],
      });
      let exited: number | null | undefined;
      let spawnError: Error | undefined;
      child.on("exit", (code) => (exited = code));
      child.on("error", (e) => (spawnError = e));
      child.unref();
      const deadline = Date.now() + START_WAIT_MS;
      while (Date.now() < deadline) {
        if (await this.answers()) return;
        if (spawnError) throw new NoServer(`cannot start ${bin} serve: ${spawnError.message}`, "no_server");
        if (exited !== undefined) {
          await sleep(50); // it may have lost a race to another starter that now serves
          if (await this.answers()) return;
          const why = readFd(errFd).trim();
          throw new NoServer(`${bin} serve exited with status ${exited}${why ? `: ${why}` : ""}`, "no_server");
        }
        await sleep(20);
      }
      throw new NoServer(`${bin} serve did not answer on ${this.socket} within ${START_WAIT_MS / 1000}s`, "no_server");
    } finally {
      fs.closeSync(errFd);
    }
  }
}

function readFd(fd: number): string {
  const size = fs.fstatSync(fd).size;
  const buf = Buffer.alloc(Math.min(size, 65536));
  fs.readSync(fd, buf, 0, buf.length, 0);
  return buf.toString("utf8");
}

function findOnPath(name: string): string | undefined {
  for (const dir of (process.env.PATH ?? "").split(":")) {
    if (!dir) continue;
    const p = path.join(dir, name);
    try {
      fs.accessSync(p, fs.constants.X_OK);
      if (fs.statSync(p).isFile()) return p;
    } catch {
      /* not here */
    }
  }
  return undefined;
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

let defaultClient: Client | undefined;

function route(name: string, rest: string): string {
  return `/v1/sandboxes/${encodeURIComponent(name)}/${rest}`;
}

function commandBody(cmd: Command, o: CommandOptions = {}): Record<string, unknown> {
  let body: Record<string, unknown>;
  if (typeof cmd === "string") {
    body = { command: cmd };
  } else if (Array.isArray(cmd)) {
    if (cmd.length === 0 || !cmd[0]) throw new TypeError("an argv needs a non-empty first element");
    body = { argv: cmd.map(String) };
  } else {
    throw new TypeError("a command is a string (run by sh -c) or an array of strings (an argv)");
  }
  if (o.stdin !== undefined) body.stdin = b64(o.stdin);
  if (o.timeout !== undefined) {
    if (!(o.timeout > 0)) throw new RangeError("timeout must be > 0 seconds");
    body.timeout_seconds = o.timeout;
  }
  if (o.env && Object.keys(o.env).length) body.env = o.env;
  if (o.cwd !== undefined) body.cwd = o.cwd;
  return body;
}

// ---------------------------------------------------------------------------------- sandbox

/**
 * One sandbox, by name, as `bluebox new`/`build` made it (the API creates none).
 */
export class Sandbox {
  readonly name: string;
  readonly client: Client;

  constructor(name: string, client?: Client) {
    this.name = name;
    this.client = client ?? (defaultClient ??= new Client());
  }

  private call(method: string, rest: string, body?: unknown): Promise<any> {
    return this.client.request(method, route(this.name, rest), body);
  }

  /** Boot the sandbox's long-lived VM. Resolves true when this call booted it, false when it was already up. */
  async up(): Promise<boolean> {
    const r = await this.call("POST", "up", {});
    return !r.already;
  }

  /** Stop the sandbox's VM (not an error when it is not up). */
  async down(): Promise<void> {
    await this.call("POST", "down", {});
  }

  /**
   * Run `fn` with the sandbox up: up first, down afterwards (even when `fn` throws) unless it
   * was already up. Resolves to what `fn` returns.
   */
  async withUp<T>(fn: (box: this) => T | Promise<T>): Promise<T> {
    const started = await this.up();
    try {
      return await fn(this);
    } finally {
      if (started) await this.down();
    }
  }

  /** Run `cmd` in the up VM (state carries over between calls). Rejects with NotUp when it is not up. */
  async exec(cmd: Command, opts?: CommandOptions): Promise<Result> {
    return Result.fromJSON(await this.call("POST", "exec", commandBody(cmd, opts)));
  }

  /** Run `cmd` in a fresh VM (as `bluebox run`). */
  async run(cmd: Command, opts?: CommandOptions): Promise<Result> {
    return Result.fromJSON(await this.call("POST", "run", commandBody(cmd, opts)));
  }

  /**
   * Run `cmd` and see its output as it happens: `for await (const { stream, data } of s)`,
   * then `await s.result()`. On the up VM (as exec), or a fresh VM with `{ fresh: true }`.
   * Rejects (before any output) with NotUp and the like. `s.close()` kills the command.
   */
  async stream(cmd: Command, opts: CommandOptions & { fresh?: boolean } = {}): Promise<ExecStream> {
    const { fresh, ...rest } = opts;
    const res = await this.client.open("POST", route(this.name, fresh ? "run/stream" : "exec/stream"), commandBody(cmd, rest));
    if (Math.floor((res.statusCode ?? 500) / 100) !== 2) throw await errorFromResponse(res);
    return new ExecStream(res);
  }

  /** Write `data` to `path` in the guest with `mode` ("0644" or 0o644). Resolves to the bytes written. */
  async writeFile(file: string, data: Data, mode: string | number = "0644"): Promise<number> {
    const m = typeof mode === "number" ? mode.toString(8).padStart(4, "0") : mode;
    if (!/^[0-7]{3,4}$/.test(m)) throw new RangeError(`mode must be octal such as "0644", got ${JSON.stringify(mode)}`);
    const r = await this.call("POST", "files/write", { path: file, content: b64(data), mode: m });
    return Number(r.bytes ?? 0);
  }

  /** The content of `path` in the guest. */
  async readFile(file: string): Promise<Buffer> {
    const r = await this.call("POST", "files/read", { path: file });
    return Buffer.from(r.content, "base64");
  }

  /** The entries of the directory `path` in the guest. */
  async listDir(dir: string): Promise<Entry[]> {
    const r = await this.call("POST", "files/list", { path: dir });
    return (r.entries ?? []).map((e: any) => ({
      name: String(e.name),
      type: e.type,
      size: Number(e.size ?? 0),
      mode: String(e.mode ?? ""),
    }));
  }

  /** Archive /data as a snapshot (default label: a UTC time stamp); resolves to its name. */
  async snapshot(name?: string): Promise<string> {
    return String((await this.call("POST", "snapshots", name ? { name } : {})).snapshot);
  }

  /** The sandbox's snapshots. */
  async snapshots(): Promise<Snapshot[]> {
    const list: any[] = await this.call("GET", "snapshots");
    return list.map((o) => ({ name: String(o.name), created: String(o.created ?? ""), bytes: Number(o.bytes ?? 0) }));
  }

  /** Replace /data with a snapshot (rejects with IsUp while up). */
  async restore(snapshot: string): Promise<string> {
    return String((await this.call("POST", "restore", { snapshot })).restored);
  }

  /** Make `name` a fork of this sandbox (its /data a layer over this one's); resolves to it. */
  async fork(name: string): Promise<Sandbox> {
    const r = await this.call("POST", "fork", { fork: name });
    return new Sandbox(String(r.fork), this.client);
  }

  /** This fork's changes over its parent's /data (rejects with Refused when it is not a fork). */
  async diff(): Promise<Changes> {
    return changesOf(await this.call("POST", "diff", {}));
  }

  /** Merge this fork's changes into its parent's /data, all or nothing (nothing asks first: call `diff()`). */
  async apply(): Promise<Changes> {
    return changesOf(await this.call("POST", "apply", {}));
  }

  /** Drop this fork's changes (rejects with Refused while the fork is in use). */
  async discard(): Promise<Changes> {
    return changesOf(await this.call("POST", "discard", {}));
  }
}

/**
 * The live output of one command: an async iterator of Chunks; `result()` resolves to the
 * Result (stdout/stderr collected as well, up to 16 MiB each) once the command has exited.
 */
export class ExecStream implements AsyncIterable<Chunk> {
  private readonly res: http.IncomingMessage;
  private readonly out: Buffer[][] = [[], []];
  private readonly len = [0, 0];
  private truncated = false;
  private final?: Result;
  private failure?: BlueboxError;
  private iterating = false;

  /** @internal */
  constructor(res: http.IncomingMessage) {
    this.res = res;
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<Chunk, void, undefined> {
    if (this.iterating) throw new BlueboxError("a stream can be iterated once", "internal");
    this.iterating = true;
    let pending = "";
    let done = false;
    try {
      for await (const piece of this.res) {
        pending += (piece as Buffer).toString("latin1"); // base64 and JSON: ASCII
        let nl: number;
        while ((nl = pending.indexOf("\n")) >= 0) {
          const line = pending.slice(0, nl).trim();
          pending = pending.slice(nl + 1);
          if (!line) continue;
          const chunk = this.event(line);
          if (chunk) yield chunk;
          if (this.final) {
            done = true;
            return;
          }
        }
      }
      if (!this.final) {
        throw (this.failure = new BlueboxError("the server closed the stream before the command's exit", "internal", this.res.statusCode));
      }
    } finally {
      if (!done) this.res.destroy();
    }
  }

  private event(line: string): Chunk | undefined {
    let o: any;
    try {
      o = JSON.parse(line);
    } catch {
      throw (this.failure = new BlueboxError(`the server sent a malformed stream line: ${line.slice(0, 80)}`, "internal"));
    }
    for (const [i, key] of (["stdout", "stderr"] as const).entries()) {
      if (typeof o[key] === "string") {
        const data = Buffer.from(o[key], "base64");
        const room = STREAM_CAP - this.len[i];
        if (data.length > room) this.truncated = true;
        const kept = data.subarray(0, Math.max(room, 0));
        this.out[i].push(kept);
        this.len[i] += kept.length;
        return { stream: key, data };
      }
    }
    if (o.error !== undefined) {
      throw (this.failure = errorFor(String(o.error), String(o.code ?? "internal"), this.res.statusCode));
    }
    if (o.exit_code !== undefined) {
      this.final = new Result(
        Number(o.exit_code),
        Buffer.concat(this.out[0]),
        Buffer.concat(this.out[1]),
        Number(o.duration_ms ?? 0),
        Boolean(o.timed_out),
        this.truncated || Boolean(o.truncated),
      );
    }
    return undefined;
  }

  /** The Result: reads what is left of the stream when it has not been iterated to its end. */
  async result(): Promise<Result> {
    if (this.final) return this.final;
    if (this.failure) throw this.failure;
    if (this.iterating) throw new BlueboxError("result() while the stream is being iterated: finish the loop first", "internal");
    for await (const _ of this) {
      /* drain */
    }
    return this.final!;
  }

  /** Close the connection; a command still running is killed by the server. */
  close(): void {
    this.res.destroy();
  }
}
