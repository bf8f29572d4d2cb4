/** Money is stored in minor units (cents); the API speaks decimal amounts with two places. */
export const toMinor = (amount: number): number => Math.round(amount * 100);
export const fromMinor = (minor: number): number => Math.round(minor) / 100;
