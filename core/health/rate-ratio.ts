/**
 * Exact one-sided test of a ratio of two Poisson rates (docs/ota.md "Health gate", statistics).
 *
 * Events in two groups with exposures t1 (updated, device-days) and t2 (control) are Poisson with
 * rates λ1 and λ2. Given their total n = x1 + x2, x1 is Binomial(n, p) with
 * p = ρ·t1 / (ρ·t1 + t2), ρ = λ1/λ2 (the conditional test of Przyborowski and Wilenski, 1940).
 * That distribution does not depend on the unknown control rate, which is why it is exact for the
 * small counts of a first batch, and why a control with zero events needs no correction: the
 * test is still defined (all n events in the updated group), only the point estimate of ρ is
 * infinite (the shown estimate adds 0.5 to both counts, Haldane's correction).
 */

/** ln Γ(x) for x > 0 (Lanczos, g = 7, n = 9: about 15 significant digits). */
export function logGamma(x: number): number {
  if (x < 0.5) return Math.log(Math.PI / Math.sin(Math.PI * x)) - logGamma(1 - x);
  const c = [
    0.9999999999998099, 676.5203681218851, -1259.1392167224028, 771.3234287776531, -176.61503916999186,
    12.507343278686905, -0.13857109526572012, 9.984369578019572e-6, 1.5056327351493116e-7,
  ];
  const z = x - 1;
  let a = c[0]!;
  const t = z + 7.5;
  for (let i = 1; i < 9; i++) a += c[i]! / (z + i);
  return 0.5 * Math.log(2 * Math.PI) + (z + 0.5) * Math.log(t) - t + Math.log(a);
}

/** P(X ≥ k) for X ~ Binomial(n, p), summed in log space (n up to millions of events is fine). */
export function binomialUpperTail(k: number, n: number, p: number): number {
  if (k <= 0) return 1;
  if (k > n) return 0;
  if (p <= 0) return 0;
  if (p >= 1) return 1;
  const lp = Math.log(p);
  const lq = Math.log1p(-p);
  const lnN = logGamma(n + 1);
  let sum = 0;
  // Terms fall off geometrically past the mode: stop once they no longer change the sum.
  for (let i = k; i <= n; i++) {
    const term = Math.exp(lnN - logGamma(i + 1) - logGamma(n - i + 1) + i * lp + (n - i) * lq);
    sum += term;
    if (i > n * p && term < sum * 1e-15) break;
  }
  return Math.min(1, sum);
}

export interface RatioCounts {
  /** Events in the updated group. */
  x1: number;
  /** Exposure of the updated group (device-days, > 0). */
  t1: number;
  /** Events in the control group. */
  x2: number;
  /** Exposure of the control group (device-days, > 0). */
  t2: number;
}

/** One-sided p-value of H0: λ1/λ2 ≤ ratio against H1: λ1/λ2 > ratio. */
export function ratioPValue(c: RatioCounts, ratio: number): number {
  const n = c.x1 + c.x2;
  if (n === 0) return 1;
  const p = (ratio * c.t1) / (ratio * c.t1 + c.t2);
  return binomialUpperTail(c.x1, n, p);
}

/**
 * One-sided lower confidence bound of λ1/λ2 at level 1 - alpha: the smallest ratio the data
 * does not reject. The p-value grows with the ratio, so bisection (in log space) finds it.
 * 0 when the updated group has no events.
 */
export function ratioLowerBound(c: RatioCounts, alpha: number): number {
  if (c.x1 === 0) return 0;
  let lo = Math.log(1e-6);
  let hi = Math.log(1e6);
  if (ratioPValue(c, Math.exp(hi)) < alpha) return Math.exp(hi);
  for (let i = 0; i < 60; i++) {
    const mid = (lo + hi) / 2;
    if (ratioPValue(c, Math.exp(mid)) < alpha) lo = mid;
    else hi = mid;
  }
  return Math.exp(lo);
}

/** Point estimate of λ1/λ2 with 0.5 added to both counts, finite when control saw nothing. */
export const ratioEstimate = (c: RatioCounts): number => (c.x1 + 0.5) / c.t1 / ((c.x2 + 0.5) / c.t2);
