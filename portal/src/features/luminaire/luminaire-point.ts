/** One point of the device page's luminaire charts: a reading, an hour or a day. */
export interface LuminairePoint {
  at: string;
  powerW: number | null;
  gearTempC: number | null;
  sourceTempC: number | null;
  lifetimeEnergyKwh: number | null;
}
