/**
 * The text form of an IPv6 address as RFC 3986 (section 3.2.2, `IPv6address`) writes RFC 4291's
 * three forms: eight groups, `::` compression, and a dotted IPv4 tail (`::ffff:10.0.0.1`). No zone
 * (`%eth0`), no brackets, no leading zeros in the IPv4 tail. zod's `z.ipv6()` checks an address with
 * the WHATWG URL parser, which accepts exactly these; this pattern is what the published JSON
 * Schema carries, so a validator without `format` support answers the same
 * (test/unit/heartbeat-schema-agreement.test.ts holds the two together on a table of samples).
 */
const H16 = '[0-9A-Fa-f]{1,4}';
const DEC_OCTET = '(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9][0-9]|[0-9])';
const IPV4 = `${DEC_OCTET}(?:\\.${DEC_OCTET}){3}`;
const LS32 = `(?:${H16}:${H16}|${IPV4})`;
/** `[ *n( h16 ":" ) h16 ]`: up to n+1 groups before a `::`. */
const before = (n: number) => (n < 0 ? '' : n === 0 ? `(?:${H16})?` : `(?:(?:${H16}:){0,${n}}${H16})?`);

export const IPV6_PATTERN = new RegExp(
  `^(?:${[
    `(?:${H16}:){6}${LS32}`,
    `::(?:${H16}:){5}${LS32}`,
    `${before(0)}::(?:${H16}:){4}${LS32}`,
    `${before(1)}::(?:${H16}:){3}${LS32}`,
    `${before(2)}::(?:${H16}:){2}${LS32}`,
    `${before(3)}::${H16}:${LS32}`,
    `${before(4)}::${LS32}`,
    `${before(5)}::${H16}`,
    `${before(6)}::`,
  ].join('|')})$`,
);
