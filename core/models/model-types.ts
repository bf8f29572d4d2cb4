/** A fixture model registered in an account (devices and firmware belong to one). */
export interface FixtureModel {
  id: string;
  name: string;
  description: string;
  createdAt: string;
}
