import { EventEmitter } from 'node:events';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import { protocol } from '@electric-sql/pglite';
import { Parser } from 'pg-protocol/dist/parser.js';
import { appRoot } from '../shared/app-root';
import type { Logger } from '../logger';
import type { ThreadOptions, ThreadReply, ThreadRequest } from './pglite-thread';
import { serializeBind, type BindConfig } from './bind-message';

/**
 * Where the thread's code is: beside this module when the service runs from its sources (tsx,
 * vitest: the worker registers tsx first), `server/pglite-thread.js` of the artifact when it runs
 * from `npm run build`'s output (deploy/build.ts bundles it as an entry of its own).
 */
function threadSource(): { code: string; eval: true } | { file: string; eval: false } {
  const here = import.meta.url;
  if (here.endsWith('.ts')) {
    const tsx = tsxEsmApi(here);
    const entry = new URL('./pglite-thread.ts', here).href;
    return {
      eval: true,
      code: `import(${JSON.stringify(tsx)}).then((m) => { m.register(); return import(${JSON.stringify(entry)}); })`,
    };
  }
  return { eval: false, file: path.join(appRoot(here), 'server', 'pglite-thread.js') };
}

/**
 * The ESM entry of tsx's API (its CommonJS one cannot register hooks in a worker), found through
 * tsx's package.json: vitest's module runner (global setup) has no `import.meta.resolve`.
 */
function tsxEsmApi(from: string): string {
  const require = createRequire(from);
  const manifest = require.resolve('tsx/package.json');
  const pkg = JSON.parse(fs.readFileSync(manifest, 'utf8')) as {
    exports: { './esm/api': { import: { default: string } } };
  };
  return pathToFileURL(path.join(path.dirname(manifest), pkg.exports['./esm/api'].import.default)).href;
}

interface Pending {
  resolve(bytes: Uint8Array): void;
  reject(error: Error): void;
  /** When a statement was sent (ms, performance.now); a ping has none. */
  sentAt?: number;
}

/**
 * How long a statement may hold the thread before a health probe stops counting the thread as
 * busy and asks it to answer: knex's wait for the one connection (database.ts) is as long, so a
 * thread that hung longer is failing requests anyway.
 */
const BUSY_IS_UP_MS = 60_000;

/** One run of the thread: from its start to its exit. */
/**
 * The thread's name: Node gives it to the operating system's thread too (Linux: at most 15
 * characters), so `top -H` and /proc/<pid>/task/<tid>/comm tell the database's CPU apart from the
 * event loop's (bench/lib/server-child.ts reads it that way).
 */
export const EMBEDDED_DATABASE_THREAD_NAME = 'embedded-db';

class ThreadRun {
  readonly worker: Worker;
  readonly ready: Promise<void>;
  readonly pending = new Map<number, Pending>();
  exited: Error | null = null;
  private lastError: Error | null = null;

  constructor(dataDir: string, onExit: (run: ThreadRun, error: Error) => void) {
    const source = threadSource();
    this.worker = new Worker(source.eval ? source.code : source.file, {
      eval: source.eval,
      name: EMBEDDED_DATABASE_THREAD_NAME,
      workerData: { dataDir } satisfies ThreadOptions,
    });
    let opened: { resolve(): void; reject(error: Error): void };
    this.ready = new Promise<void>((resolve, reject) => (opened = { resolve, reject }));
    // Nobody may await `ready` (a run that died idle): its rejection is reported through onExit.
    this.ready.catch(() => undefined);
    this.worker.on('message', (reply: ThreadReply) => {
      if (reply.kind === 'ready') {
        opened.resolve();
        return;
      }
      if (reply.kind === 'openFailed') {
        this.lastError = new Error(`the embedded database could not be opened: ${reply.message}`);
        opened.reject(this.lastError);
        return;
      }
      const request = this.pending.get(reply.id);
      if (!request) return;
      this.pending.delete(reply.id);
      if (reply.kind === 'result') request.resolve(reply.bytes);
      else if (reply.kind === 'failed')
        request.reject((this.lastError = new Error(`the embedded database failed: ${reply.message}`)));
      else request.resolve(new Uint8Array(0));
    });
    this.worker.on('error', (error) => (this.lastError = error));
    this.worker.on('exit', (code) => {
      const error = new Error(
        `the embedded database thread exited (code ${code})${this.lastError ? `: ${this.lastError.message}` : ''}`,
        { cause: this.lastError ?? undefined },
      );
      this.exited = error;
      opened.reject(this.lastError ?? error);
      for (const request of this.pending.values()) request.reject(error);
      this.pending.clear();
      onExit(this, error);
    });
  }
}

/**
 * The embedded database (PGlite) in a worker thread, and knex's way to it: `pgConfig()` is what
 * knex's `connection` function returns for its 'pg' client, as PGlite's own node-postgres adapter
 * does for a PGlite in this thread. A thread that dies (PGlite failing, a bug) fails the queries in
 * flight and the open connection with a database error; the next connection starts a new thread
 * on the same folder, which recovers it as after a crash (the main process still holds the lock).
 */
export class EmbeddedDatabaseThread extends EventEmitter<{ exit: [run: ThreadRun, error: Error] }> {
  private run: ThreadRun;
  private nextId = 1;
  private closing: Promise<void> | null = null;

  private constructor(
    private readonly dataDir: string,
    private readonly logger: Logger | undefined,
  ) {
    super();
    this.run = this.startRun();
  }

  /** Starts the thread on `dataDir` (PGlite's folder); rejects when PGlite cannot open it. */
  static async open(dataDir: string, logger?: Logger): Promise<EmbeddedDatabaseThread> {
    const thread = new EmbeddedDatabaseThread(dataDir, logger);
    try {
      await thread.run.ready;
    } catch (error) {
      await thread.run.worker.terminate();
      throw error;
    }
    return thread;
  }

  private startRun(): ThreadRun {
    return new ThreadRun(this.dataDir, (run, error) => {
      if (this.closing) return;
      this.logger?.error({ err: error }, 'embedded database thread ended; the next connection starts a new one');
      this.emit('exit', run, error);
    });
  }

  /** The running thread, a new one when the last has died; rejects when it cannot open the database. */
  async connect(): Promise<ThreadRun> {
    if (this.closing) throw new Error('the embedded database is closed');
    if (this.run.exited) this.run = this.startRun();
    const run = this.run;
    await run.ready;
    return run;
  }

  /** Runs raw frontend messages on `run`; resolves with the raw backend messages. */
  exec(run: ThreadRun, bytes: Uint8Array): Promise<Uint8Array> {
    if (run.exited) return Promise.reject(run.exited);
    const id = this.nextId++;
    return new Promise<Uint8Array>((resolve, reject) => {
      run.pending.set(id, { resolve, reject, sentAt: performance.now() });
      run.worker.postMessage({ kind: 'exec', id, bytes } satisfies ThreadRequest, [bytes.buffer as ArrayBuffer]);
    });
  }

  /**
   * Whether the thread answers (the health probe): a ping goes between two round trips of
   * whatever holds the one connection, so a long transaction does not look like an outage, as a
   * `select 1` queued behind it for the pool would. A statement that runs long (a VACUUM of a big
   * table, a report) holds the thread itself and the ping waits behind it: the thread is busy,
   * not down (were it gone, its exit would have failed the statement), so the ping answers at
   * once while the statement under way is younger than BUSY_IS_UP_MS. Before, a VACUUM of
   * more than about 4 s made the service answer 503 to every request while it ran.
   */
  async ping(): Promise<void> {
    const run = await this.connect();
    // The oldest statement under way: the first one in the map (ids are set in the order sent).
    const oldest = [...run.pending.values()].find((p) => p.sentAt !== undefined)?.sentAt;
    if (oldest !== undefined && performance.now() - oldest < BUSY_IS_UP_MS) return;
    const id = this.nextId++;
    await new Promise<Uint8Array>((resolve, reject) => {
      run.pending.set(id, { resolve, reject });
      run.worker.postMessage({ kind: 'ping', id } satisfies ThreadRequest);
    });
  }

  /** What knex's `connection` function returns (one connection: the pool's max is 1). */
  pgConfig(): object {
    return { ...CONNECTION_DEFAULTS, connection: new ThreadPgConnection(this) };
  }

  /** Closes PGlite in its thread (its files then complete on disk) and ends the thread. */
  close(timeoutMs = 30_000): Promise<void> {
    this.closing ??= (async () => {
      const run = this.run;
      if (run.exited) return;
      const exited = new Promise<void>((resolve) => run.worker.once('exit', () => resolve()));
      const id = this.nextId++;
      const closed = new Promise<Uint8Array>((resolve, reject) => run.pending.set(id, { resolve, reject }));
      run.worker.postMessage({ kind: 'close', id } satisfies ThreadRequest);
      const timer = setTimeout(() => void run.worker.terminate(), timeoutMs);
      try {
        await closed;
      } finally {
        await exited;
        clearTimeout(timer);
      }
    })();
    return this.closing;
  }

  /** Ends the thread at once, as a crash would (tests of the crash path). */
  async terminate(): Promise<void> {
    await this.run.worker.terminate();
  }
}

const CONNECTION_DEFAULTS = {
  poolSize: 1,
  user: 'postgres',
  password: 'dummy',
  database: 'postgres',
  host: 'localhost',
  port: 5432,
};

type Message = Uint8Array;

/**
 * What node-postgres's Client drives: its Connection's methods and events. Unlike PGlite's
 * adapter, which runs each message on its own, the messages of one round trip (parse, bind,
 * describe, execute ... sync) are held until the sync, flush or simple query that ends it and go
 * to the thread at once; the answer is parsed here with node-postgres's own protocol parser
 * (pg-protocol), so its messages and DatabaseError (code, constraint, detail) are exactly what
 * node-postgres and knex see from a server. PGlite's port of that parser decoded each field through
 * a TextDecoder: it took 408 ms of the main thread's 2.1 s while 5,500 devices connected
 * (bench/connection-capacity.bench.ts --profile, embedded database).
 */
class ThreadPgConnection extends EventEmitter {
  _connecting = false;
  _ending = false;
  parsedStatements: Record<string, string> = {};
  submittedNamedStatements: Record<string, unknown> = {};
  readonly stream = { destroy: () => this.end() };
  private run: ThreadRun | null = null;
  private held: Message[] = [];
  private inFlight: Promise<unknown> = Promise.resolve();
  private readonly parser = new Parser();
  private broken = false;
  private readonly onThreadExit = (run: ThreadRun, error: Error) => {
    if (run === this.run) this.fail(error);
  };

  constructor(private readonly thread: EmbeddedDatabaseThread) {
    super();
    thread.on('exit', this.onThreadExit);
  }

  connect(): void {
    this._connecting = true;
    this.thread.connect().then(
      (run) => {
        this.run = run;
        // A thread that died between its start and now was not seen by onThreadExit.
        if (run.exited) this.fail(run.exited);
        else this.emit('readyForQuery', { name: 'readyForQuery', length: 5, status: 'I' });
      },
      (error: unknown) => this.fail(error as Error),
    );
  }

  /** The thread died under this connection: one 'error', which node-postgres and knex end it on. */
  private fail(error: Error): void {
    if (this.broken) return;
    this.broken = true;
    this.emit('error', error);
  }

  // No TLS, no startup or password exchange: the thread is the server, already open.
  requestSsl(): void {}
  startup(): void {}
  password(): void {}
  cancel(): void {}
  ref(): void {}
  unref(): void {}

  query(text: string): void {
    this.send(protocol.serialize.query(text), true);
  }
  parse(query: Parameters<typeof protocol.serialize.parse>[0]): void {
    this.send(protocol.serialize.parse(query), false);
  }
  bind(config: BindConfig): void {
    this.send(serializeBind(config), false);
  }
  describe(msg: Parameters<typeof protocol.serialize.describe>[0]): void {
    this.send(protocol.serialize.describe(msg), false);
  }
  execute(config: Parameters<typeof protocol.serialize.execute>[0]): void {
    this.send(protocol.serialize.execute(config), false);
  }
  close(msg: Parameters<typeof protocol.serialize.close>[0]): void {
    this.send(protocol.serialize.close(msg), false);
  }
  flush(): void {
    this.send(protocol.serialize.flush(), true);
  }
  sync(): void {
    this.send(protocol.serialize.sync(), true);
  }
  sendCopyFromChunk(chunk: ArrayBuffer): void {
    this.send(protocol.serialize.copyData(chunk), false);
  }
  endCopyFrom(): void {
    this.send(protocol.serialize.copyDone(), true);
  }
  sendCopyFail(message: string): void {
    this.send(protocol.serialize.copyFail(message), true);
  }

  end(): void {
    this.thread.off('exit', this.onThreadExit);
    this.held = [];
    // As PGlite's adapter: 'end' once what was sent has been answered; nothing is heard after it.
    void this.inFlight.then(() => this.emit('end'));
    for (const name of this.eventNames()) if (name !== 'newListener') this.removeAllListeners(name);
  }

  private send(message: Message, endsRoundTrip: boolean): void {
    this.held.push(message);
    if (!endsRoundTrip) return;
    const messages = this.held;
    this.held = [];
    const run = this.run;
    if (!run) {
      this.fail(new Error('the embedded database connection is not open'));
      return;
    }
    this.inFlight = this.thread.exec(run, concat(messages)).then(
      (answer) => {
        this.parser.parse(Buffer.from(answer.buffer, answer.byteOffset, answer.byteLength), (reply) =>
          this.deliver(reply),
        );
      },
      (error: unknown) => this.fail(error as Error),
    );
  }

  private deliver(reply: { name: string }): void {
    if (this.listenerCount('message') > 0) this.emit('message', reply);
    this.emit(reply.name === 'error' ? 'errorMessage' : reply.name, reply);
  }
}

function concat(parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((sum, part) => sum + part.byteLength, 0));
  let offset = 0;
  for (const part of parts) {
    out.set(part, offset);
    offset += part.byteLength;
  }
  return out;
}
