// RFC 3339 instants compared exactly: whole seconds since the epoch plus the fraction's digits as
// written. A Date would round to milliseconds, and SPEC §10 compares exact durations (300.5 s old
// is older than 300 s).

export interface Instant {
  seconds: bigint;
  fraction: string; // the digits after the decimal point, possibly empty
}

const RFC3339 = /^(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)$/;

export function parseTime(text: string): Instant {
  const m = RFC3339.exec(text);
  if (m === null) throw new Error("not RFC 3339");
  const [y, mo, d, h, mi, s] = m.slice(1, 7).map(Number) as [number, number, number, number, number, number];
  const leap = (y % 4 === 0 && y % 100 !== 0) || y % 400 === 0;
  const days = [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][mo - 1] ?? 0;
  if (mo < 1 || mo > 12 || d < 1 || d > days || h > 23 || mi > 59 || s > 59) throw new Error("not a date");
  let seconds = BigInt(Date.UTC(y, mo - 1, d, h, mi, s) / 1000);
  if (y < 100) {
    // Date.UTC reads years 0..99 as 1900..1999; step from year 2000 instead.
    const ref = new Date(Date.UTC(2000, mo - 1, d, h, mi, s));
    ref.setUTCFullYear(y);
    seconds = BigInt(ref.getTime() / 1000);
  }
  const zone = m[8]!;
  if (zone !== "Z") {
    const sign = zone[0] === "-" ? -1n : 1n;
    const zh = BigInt(zone.slice(1, 3));
    const zm = BigInt(zone.slice(4, 6));
    if (zh > 23n || zm > 59n) throw new Error("bad offset");
    seconds -= sign * (zh * 3600n + zm * 60n);
  }
  return { seconds, fraction: m[7] ?? "" };
}

/** `later - earlier` in seconds, as a fraction num / den, exactly. */
export function secondsBetween(earlier: Instant, later: Instant): { num: bigint; den: bigint } {
  const digits = Math.max(earlier.fraction.length, later.fraction.length);
  const den = 10n ** BigInt(digits);
  const scaled = (t: Instant) => t.seconds * den + BigInt(t.fraction.padEnd(digits, "0") || "0");
  return { num: scaled(later) - scaled(earlier), den };
}

/** Whether a duration exceeds whole `limit` seconds. */
export const exceeds = (d: { num: bigint; den: bigint }, limit: number) => d.num > BigInt(limit) * d.den;
