import { describe, expect, it } from 'vitest';
import { otaCommandPayload } from '#broker/device-messages';
import { MAX_OTA_COMMAND_BYTES, OtaCommand } from '#protocol/payloads';

/** The OTA command's `delta` (docs/device-protocol.md "Delta images"): sent when it fits, never at the cost of the command. */
describe('OTA command with a delta', () => {
  const job = (urlLength: number) => ({
    jobId: '0b6f3c9e-4a52-4a86-9d0c-1f1b7e0f2a11',
    version: '1.4.3',
    model: 'LX-200',
    url: `https://fleet.example.com/${'u'.repeat(urlLength)}`,
    sha256: 'a'.repeat(64),
    size: 1_048_576,
    signature: { value: `${'A'.repeat(86)}==`, keyId: 'f'.repeat(16) },
    delta: {
      from: '1.4.2',
      url: `https://fleet.example.com/${'d'.repeat(urlLength)}/delta`,
      sha256: 'b'.repeat(64),
      size: 23_817,
      format: 'bsdiff40' as const,
    },
  });

  it('carries the delta beside the full image, and devices read it with the open schema', () => {
    const command = otaCommandPayload(job(150));
    expect(command.delta).toMatchObject({ from: '1.4.2', format: 'bsdiff40', size: 23_817 });
    expect(command.sha256).toBe('a'.repeat(64));
    expect(OtaCommand.parse(JSON.parse(JSON.stringify(command))).delta?.sha256).toBe('b'.repeat(64));
  });

  it('goes without the delta when both links would pass the size limit', () => {
    const command = otaCommandPayload(job(900));
    expect(command.delta).toBeUndefined();
    expect(Buffer.byteLength(JSON.stringify(command))).toBeLessThanOrEqual(MAX_OTA_COMMAND_BYTES);
  });

  it('refuses a delta of an unknown format', () => {
    const bad = { ...job(100), delta: { ...job(100).delta, format: 'vcdiff' as unknown as 'bsdiff40' } };
    expect(() => otaCommandPayload(bad)).toThrow();
  });
});
