import { readFileSync } from 'node:fs';

/**
 * What a heap snapshot (.heapsnapshot, from v8.writeHeapSnapshot) holds per kind of object: the
 * bytes and count of each (node type, constructor or closure name). Comparing the summaries of
 * two snapshots taken before and after N devices connected gives the bytes each device costs
 * per kind, which is where memory per connection goes (issue: memory per connected device).
 */
export interface HeapKind {
  kind: string;
  bytes: number;
  count: number;
}

interface Snapshot {
  snapshot: { meta: { node_fields: string[]; node_types: [string[], ...unknown[]] } };
  nodes: number[];
  strings: string[];
}

export function summariseHeap(file: string): Map<string, HeapKind> {
  const snap = JSON.parse(readFileSync(file, 'utf8')) as Snapshot;
  const fields = snap.snapshot.meta.node_fields;
  const width = fields.length;
  const typeAt = fields.indexOf('type');
  const nameAt = fields.indexOf('name');
  const sizeAt = fields.indexOf('self_size');
  const types = snap.snapshot.meta.node_types[0];
  const kinds = new Map<string, HeapKind>();
  for (let i = 0; i < snap.nodes.length; i += width) {
    const type = types[snap.nodes[i + typeAt]!] ?? '?';
    // Strings and code are named by their content: group them by type alone.
    const named = type === 'object' || type === 'closure' || type === 'native';
    const kind = named ? `${type}:${snap.strings[snap.nodes[i + nameAt]!] ?? '?'}` : type;
    const entry = kinds.get(kind) ?? { kind, bytes: 0, count: 0 };
    entry.bytes += snap.nodes[i + sizeAt]!;
    entry.count += 1;
    kinds.set(kind, entry);
  }
  return kinds;
}

/** The kinds that grew most from `before` to `after`, per `per` (e.g. the devices connected between them). */
export function heapGrowth(
  before: Map<string, HeapKind>,
  after: Map<string, HeapKind>,
  per: number,
  top = 25,
): Array<{ kind: string; bytesEach: number; countEach: number }> {
  const rows = [...after.values()].map((a) => {
    const b = before.get(a.kind);
    return {
      kind: a.kind,
      bytesEach: (a.bytes - (b?.bytes ?? 0)) / per,
      countEach: (a.count - (b?.count ?? 0)) / per,
    };
  });
  return rows.sort((x, y) => y.bytesEach - x.bytesEach).slice(0, top);
}
