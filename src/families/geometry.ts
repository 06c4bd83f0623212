// The check every family's preprocessor makes when it is built: its patch geometry must be the tower's.
import { TesseraError } from '../errors.js';

/**
 * Pixel rows cut for another patch size, temporal depth or merge window would be refused much later as a
 * pixel count or grid that does not fit, blaming the image. Refused here, naming both settings:
 * [preprocessor key, its value, tower key, the tower's value (undefined: the tower does not say)].
 */
export function checkGeometry(where: string, pairs: [string, number, string, number | undefined][]): void {
  for (const [preKey, pre, towerKey, tower] of pairs)
    if (tower !== undefined && pre !== tower)
      throw new TesseraError(
        'ERR_CONFIG_INVALID',
        `${where}: the preprocessor config's ${preKey} ${pre} contradicts the tower's ${towerKey} ${tower}: the tower could not take its pixel rows`,
      );
}
