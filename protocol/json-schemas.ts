import { z } from 'zod';
import { Heartbeat, StatusMessage, OtaCommand, OtaProgress, ConfigMessage, ConfigReported } from './payloads';
import { CredentialsMessage, CredentialsAck, CertificateRequest } from './credential-payloads';
import { UpdateLock } from './lock-payloads';
import { LuminaireReading } from './luminaire-fields';

/**
 * JSON Schemas of every protocol v1 payload, generated from the zod schemas the broker and the
 * simulator use. docs/device-protocol.md embeds exactly these (a test compares them), so the
 * firmware engineers' document cannot drift from what the service accepts.
 */
export function protocolJsonSchemas(): Record<string, unknown> {
  const schemas = {
    Heartbeat,
    StatusMessage,
    OtaCommand,
    OtaProgress,
    ConfigMessage,
    ConfigReported,
    CredentialsMessage,
    CredentialsAck,
    CertificateRequest,
    UpdateLock,
    LuminaireReading,
  };
  return Object.fromEntries(
    Object.entries(schemas).map(([name, schema]) => [
      name,
      z.toJSONSchema(schema as z.ZodType, { io: 'input', unrepresentable: 'any' }),
    ]),
  );
}

/** `node --import tsx protocol/json-schemas.ts` prints the document's schema blocks. */
if (process.argv[1]?.endsWith('json-schemas.ts')) {
  for (const [name, schema] of Object.entries(protocolJsonSchemas())) {
    console.log(`#### ${name}\n\n\`\`\`json\n${JSON.stringify(schema, null, 2)}\n\`\`\`\n`);
  }
}
