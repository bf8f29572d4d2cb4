import fs from 'node:fs';
import path from 'node:path';

/**
 * Open descriptors of the service process, from /proc (Linux): every entry of /proc/<pid>/fd,
 * its sockets matched against /proc/<pid>/net/tcp{,6} by inode. Outbound TCP connections (the
 * PostgreSQL pool, which grows and shrinks on its own schedule) are counted apart; connections
 * accepted on the service's ports are listed one by one with the client's port, which names
 * the fuzz case that opened them.
 */
export interface FdSnapshot {
  /** Every descriptor. */
  total: number;
  /**
   * Descriptors that are neither outbound TCP connections nor files of the embedded database
   * (both come and go on the database's own schedule): what a leak makes grow.
   */
  comparable: number;
  /** Accepted connections on the HTTP or MQTT port: `remotePort` is the client's port. */
  accepted: Array<{ localPort: number; remotePort: number; state: string }>;
  /** What the descriptors are, by kind: `socket`, `pipe`, `anon_inode:[eventfd]`, file paths. */
  kinds: Record<string, number>;
  /** Socket inode -> its kind, for every socket descriptor (to tell which case opened it). */
  sockets: Map<string, string>;
}

const TCP_STATES: Record<string, string> = {
  '01': 'ESTABLISHED',
  '02': 'SYN_SENT',
  '03': 'SYN_RECV',
  '04': 'FIN_WAIT1',
  '05': 'FIN_WAIT2',
  '06': 'TIME_WAIT',
  '07': 'CLOSE',
  '08': 'CLOSE_WAIT',
  '09': 'LAST_ACK',
  '0A': 'LISTEN',
  '0B': 'CLOSING',
};

export function procAvailable(pid: number | undefined): boolean {
  if (pid === undefined) return false;
  try {
    fs.readdirSync(`/proc/${pid}/fd`);
    return true;
  } catch {
    return false;
  }
}

export function fdSnapshot(pid: number, servicePorts: number[]): FdSnapshot {
  const dir = `/proc/${pid}/fd`;
  const targets: string[] = [];
  for (const name of fs.readdirSync(dir)) {
    try {
      targets.push(fs.readlinkSync(path.join(dir, name)));
    } catch {
      // closed between readdir and readlink
    }
  }
  const tcp = new Map<string, { localPort: number; remotePort: number; state: string }>();
  for (const table of ['tcp', 'tcp6']) {
    let text: string;
    try {
      text = fs.readFileSync(`/proc/${pid}/net/${table}`, 'utf8');
    } catch {
      continue;
    }
    for (const line of text.split('\n').slice(1)) {
      const cols = line.trim().split(/\s+/);
      if (cols.length < 10) continue;
      const localPort = parseInt(cols[1]!.split(':')[1]!, 16);
      const remotePort = parseInt(cols[2]!.split(':')[1]!, 16);
      tcp.set(cols[9]!, { localPort, remotePort, state: TCP_STATES[cols[3]!] ?? cols[3]! });
    }
  }
  const kinds: Record<string, number> = {};
  const sockets = new Map<string, string>();
  const accepted: FdSnapshot['accepted'] = [];
  // Not comparable: database connections and files.
  let outbound = 0;
  for (const target of targets) {
    const socket = /^socket:\[(\d+)\]$/.exec(target);
    let kind = target.replace(/\[\d+\]$/, '');
    if (target.includes(`${path.sep}pglite${path.sep}`)) {
      kind = 'embedded database file';
      outbound += 1;
    } else if (socket) {
      const conn = tcp.get(socket[1]!);
      if (!conn) kind = 'socket without a TCP connection (closed, or not TCP)';
      else if (conn.state === 'LISTEN') kind = `listening socket :${conn.localPort}`;
      else if (servicePorts.includes(conn.localPort)) {
        kind = `accepted connection on :${conn.localPort}`;
        accepted.push(conn);
      } else {
        kind = `outbound connection to :${conn.remotePort}`;
        outbound += 1;
      }
      sockets.set(socket[1]!, kind);
    }
    kinds[kind] = (kinds[kind] ?? 0) + 1;
  }
  return { total: targets.length, comparable: targets.length - outbound, accepted, kinds, sockets };
}

/** What grew between two snapshots, by kind: `{"accepted connection on :8080": +3}`. */
export function fdGrowth(before: FdSnapshot, after: FdSnapshot): Record<string, number> {
  const out: Record<string, number> = {};
  for (const kind of new Set([...Object.keys(before.kinds), ...Object.keys(after.kinds)])) {
    const delta = (after.kinds[kind] ?? 0) - (before.kinds[kind] ?? 0);
    if (delta > 0) out[kind] = delta;
  }
  return out;
}

/** Upload temp files (`DATA_DIR/firmware/.tmp-*`): none may outlive the request that wrote it. */
export function tempUploads(dataDir: string): string[] {
  try {
    return fs
      .readdirSync(path.join(dataDir, 'firmware'))
      .filter((name) => name.startsWith('.tmp-'))
      .sort();
  } catch {
    return [];
  }
}
