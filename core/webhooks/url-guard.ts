import { BlockList, isIP } from 'node:net';
import { lookup as dnsLookup, type LookupAddress } from 'node:dns';

/**
 * Server-side request forgery guard for webhook receivers: loopback, private, link-local
 * (169.254.169.254, the cloud metadata address), carrier-grade NAT, multicast and reserved
 * ranges are refused unless the operator allows them (WEBHOOK_ALLOW_PRIVATE=true). At creation
 * the URL's literal address, or every address its name resolves to, is checked; at EVERY
 * connection the resolved addresses are checked again (a DNS name that later resolves to
 * 127.0.0.1 is refused too); redirects are never followed.
 */
const blocked = new BlockList();
for (const [net, prefix] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.0.2.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['198.51.100.0', 24],
  ['203.0.113.0', 24],
  ['224.0.0.0', 4],
  ['240.0.0.0', 4],
] as const)
  blocked.addSubnet(net, prefix, 'ipv4');
for (const [net, prefix] of [
  // 64:ff9b:1::/48 is local-use NAT64: where it carries the IPv4 address depends on
  // the operator's prefix length, so the whole range counts as internal.
  ['::', 128],
  ['::1', 128],
  ['fc00::', 7],
  ['fe80::', 10],
  ['ff00::', 8],
  ['2001:db8::', 32],
  ['100::', 64],
  ['64:ff9b:1::', 48],
] as const)
  blocked.addSubnet(net, prefix, 'ipv6');

/**
 * The eight 16-bit groups of an IPv6 literal (zone id dropped, dotted-quad tail expanded), or
 * null when it is not one. Written out because the forms that embed an IPv4 address must be
 * recognised however the literal is spelled (`::127.0.0.1` and `::7f00:1` are the same).
 */
function ipv6Groups(address: string): number[] | null {
  let text = address.toLowerCase();
  const zone = text.indexOf('%');
  if (zone >= 0) text = text.slice(0, zone);
  if (isIP(text) !== 6) return null;
  const dotted = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (dotted) {
    const [a, b, c, d] = dotted.slice(1).map(Number) as [number, number, number, number];
    text = `${text.slice(0, dotted.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head, tail] = text.split('::') as [string, string | undefined];
  const parse = (part: string) => (part === '' ? [] : part.split(':').map((g) => parseInt(g, 16)));
  const left = parse(head);
  if (tail === undefined) return left;
  const right = parse(tail);
  return [...left, ...Array<number>(8 - left.length - right.length).fill(0), ...right];
}

const ipv4Of = (hi: number, lo: number): string => `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;

/**
 * The IPv4 address an IPv6 address stands for, or null: IPv4-mapped ::ffff:0:0/96,
 * IPv4-translated ::ffff:0:0:0/96, IPv4-compatible ::/96, NAT64 64:ff9b::/96, 6to4 2002::/16.
 * A connection to any of these can end at the embedded IPv4 host.
 */
export function embeddedIpv4(address: string): string | null {
  const g = ipv6Groups(address);
  if (!g || g.length !== 8) return null;
  const zeros = (from: number, to: number) => g.slice(from, to).every((x) => x === 0);
  if (zeros(0, 5) && g[5] === 0xffff) return ipv4Of(g[6]!, g[7]!);
  if (zeros(0, 4) && g[4] === 0xffff && g[5] === 0) return ipv4Of(g[6]!, g[7]!);
  // :: and ::1 are left to the IPv6 rules (unspecified and loopback); both are blocked there.
  if (zeros(0, 6) && (g[6] !== 0 || g[7]! > 1)) return ipv4Of(g[6]!, g[7]!);
  if (g[0] === 0x64 && g[1] === 0xff9b && zeros(2, 6)) return ipv4Of(g[6]!, g[7]!);
  if (g[0] === 0x2002) return ipv4Of(g[1]!, g[2]!);
  return null;
}

/** True for addresses a webhook may not reach without WEBHOOK_ALLOW_PRIVATE. */
export function isPrivateAddress(address: string): boolean {
  const family = isIP(address);
  if (family === 4) return blocked.check(address, 'ipv4');
  const groups = ipv6Groups(address);
  if (groups) {
    const v4 = embeddedIpv4(address);
    if (v4 !== null && blocked.check(v4, 'ipv4')) return true;
    const canonical = groups.map((x) => x.toString(16)).join(':');
    return blocked.check(canonical, 'ipv6');
  }
  return true;
}

/** Names that always mean this machine. */
const LOCAL_NAMES = /^(localhost|localhost\.localdomain|ip6-localhost|ip6-loopback)$|\.localhost$/;

/**
 * The host of a URL as it is looked up: brackets off an IPv6 literal, lowercase, without the
 * trailing dot(s) of a fully qualified name (`localhost.` is `localhost`).
 */
export function normalizedHost(url: URL): string {
  const host = url.hostname.toLowerCase();
  if (host.startsWith('[') && host.endsWith(']')) return host.slice(1, -1);
  return host.replace(/\.+$/, '');
}

/** Problems with a receiver URL before any DNS lookup; null when acceptable. */
export function checkWebhookUrl(raw: string, allowPrivate: boolean): string | null {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return 'must be an absolute http(s) URL';
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') return 'must use http or https';
  if (url.username || url.password) return 'must not contain credentials';
  if (url.hash) return 'must not contain a fragment';
  if (allowPrivate) return null;
  const host = normalizedHost(url);
  if (LOCAL_NAMES.test(host)) return 'must not point to this machine';
  if (isIP(host) && isPrivateAddress(host)) return 'must not point to a loopback, private or link-local address';
  return null;
}

/** Every address a name resolves to (A and AAAA); rejects when it does not resolve. */
export type HostResolver = (hostname: string) => Promise<string[]>;

/** How long a creation waits for DNS before accepting the name (sending checks again). */
const RESOLVE_TIMEOUT_MS = 2000;

export const systemResolver: HostResolver = (hostname) =>
  new Promise((resolve, reject) => {
    dnsLookup(hostname, { all: true }, (error, addresses) =>
      error ? reject(error) : resolve(addresses.map((a) => a.address)),
    );
  });

/**
 * The full creation check: `checkWebhookUrl`, then, for a name, every address it resolves to.
 * A name that does not resolve (yet), or not within 2 s, is accepted: receivers are often
 * registered before their DNS record exists, and every connection is checked when sending.
 * The problem never names the resolved address (it may be internal).
 */
export async function checkWebhookDestination(
  raw: string,
  allowPrivate: boolean,
  resolveHost: HostResolver = systemResolver,
): Promise<string | null> {
  const problem = checkWebhookUrl(raw, allowPrivate);
  if (problem || allowPrivate) return problem;
  const host = normalizedHost(new URL(raw));
  if (isIP(host)) return null;
  let timer: NodeJS.Timeout | undefined;
  const addresses = await Promise.race([
    resolveHost(host).catch(() => [] as string[]),
    new Promise<string[]>((resolve) => {
      timer = setTimeout(() => resolve([]), RESOLVE_TIMEOUT_MS);
    }),
  ]).finally(() => clearTimeout(timer));
  if (addresses.some(isPrivateAddress)) return 'must not resolve to a loopback, private or link-local address';
  return null;
}

/** What a delivery records when the guard refuses a destination: never the resolved address. */
export const DESTINATION_NOT_ALLOWED = 'destination not allowed';

/** A `lookup` for http.request that refuses private addresses after resolving (DNS rebinding). */
export function guardedLookup(allowPrivate: boolean) {
  return (
    hostname: string,
    options: { family?: number | string; all?: boolean },
    callback: (error: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void,
  ): void => {
    dnsLookup(hostname, { all: true, family: Number(options.family) || 0 }, (error, addresses) => {
      if (error) {
        callback(error, '', 0);
        return;
      }
      if (!allowPrivate) {
        if (addresses.some((a) => isPrivateAddress(a.address))) {
          const refused: NodeJS.ErrnoException = new Error(DESTINATION_NOT_ALLOWED);
          refused.code = 'ERR_WEBHOOK_PRIVATE_ADDRESS';
          callback(refused, '', 0);
          return;
        }
      }
      if (options.all) {
        callback(null, addresses);
        return;
      }
      const first = addresses[0];
      if (!first) {
        callback(Object.assign(new Error(`no address for ${hostname}`), { code: 'ENOTFOUND' }), '', 0);
        return;
      }
      callback(null, first.address, first.family);
    });
  };
}
