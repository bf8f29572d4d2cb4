import busboy from 'busboy';
import type { Request } from 'express';
import type { Readable } from 'node:stream';
import { DomainError } from '#core/shared/errors';
import type { StoredTemp } from '#core/firmware/firmware-storage';

const ALLOWED_FIELDS = new Set(['model', 'version', 'release_notes', 'changelog', 'signature', 'upgrade_from']);
/** Room for the text fields and multipart framing on top of the binary. */
const FORM_OVERHEAD_BYTES = 1024 * 1024;

/**
 * The multipart adapter of POST /firmware/versions: text fields are collected, the one `file`
 * part is handed as a stream to `receive` (the FirmwareService writes it to disk while hashing),
 * so the binary is never held in memory. Any failure removes the received file. Fields are only
 * collected here, whatever their place in the form: the service checks them (the signature
 * against the file's digest included) once the whole form was read.
 */
export async function readFirmwareUpload(
  req: Request,
  input: {
    maxFileBytes: number;
    receive: (stream: Readable) => Promise<StoredTemp>;
    discard: (temp: StoredTemp) => Promise<void>;
  },
): Promise<{ fields: Record<string, string>; file: StoredTemp | null }> {
  if (!req.is('multipart/form-data'))
    throw new DomainError('unsupported_media_type', 'Send the firmware as multipart/form-data.');
  const declared = Number(req.get('content-length') ?? NaN);
  if (Number.isFinite(declared) && declared > input.maxFileBytes + FORM_OVERHEAD_BYTES) {
    req.resume();
    throw tooLarge(input.maxFileBytes);
  }
  let parser: busboy.Busboy;
  try {
    parser = busboy({
      headers: req.headers,
      limits: { files: 1, fields: 8, parts: 10, fieldSize: 300 * 1024, fileSize: input.maxFileBytes + 1 },
    });
  } catch {
    throw new DomainError('bad_request', 'The multipart body has no boundary.');
  }
  return new Promise((resolve, reject) => {
    const fields: Record<string, string> = {};
    let file: Promise<StoredTemp> | null = null;
    let failure: Error | null = null;
    let settled = false;
    const fail = (error: Error) => {
      failure ??= error;
    };
    const finish = async () => {
      if (settled) return;
      settled = true;
      let temp: StoredTemp | null = null;
      if (file) {
        try {
          temp = await file;
        } catch (error) {
          fail(asError(error));
        }
      }
      if (failure) {
        if (temp) await input.discard(temp);
        reject(failure);
      } else resolve({ fields, file: temp });
    };
    // Ends the form at once: destroying the parser destroys the file part under way, so the
    // store stops writing, closes and removes its temp file, and `file` settles (a client gone in
    // the middle of the file sends no more bytes, and the write would otherwise wait for good).
    const abort = (error: Error) => {
      fail(error);
      req.unpipe(parser);
      parser.destroy();
      req.resume();
      void finish();
    };
    parser.on('field', (name, value, info) => {
      if (!ALLOWED_FIELDS.has(name)) {
        fail(
          new DomainError('validation_failed', `Unknown form field "${name}".`, {
            errors: [
              {
                field: name,
                message:
                  'is not a field of this form (model, version, release_notes, changelog, signature, upgrade_from, file)',
              },
            ],
          }),
        );
      } else if (info.valueTruncated) {
        fail(new DomainError('payload_too_large', `The form field "${name}" is too long.`));
      } else if (name in fields) {
        fail(
          new DomainError('validation_failed', `The form field "${name}" is given twice.`, {
            errors: [{ field: name, message: 'is given twice' }],
          }),
        );
      } else {
        fields[name] = value;
      }
    });
    parser.on('file', (name, stream) => {
      // From the moment the part exists: busboy destroys it with an error when the form ends
      // before the part does, and an 'error' event nobody listens to ends the process. The
      // parser reports that error too (below), which decides the answer.
      stream.on('error', () => undefined);
      // A part busboy hands over after the form was given up (a malformed part header ends it,
      // and the parts after it still come): nobody would await or remove its write.
      if (settled) {
        stream.resume();
        return;
      }
      if (name !== 'file' || file) {
        stream.resume();
        fail(
          new DomainError('validation_failed', 'Send exactly one binary, in the field "file".', {
            errors: [{ field: name, message: 'unexpected file part' }],
          }),
        );
        return;
      }
      file = input.receive(stream);
      file.catch((error: unknown) => {
        abort(asError(error));
      });
    });
    parser.on('filesLimit', () =>
      fail(new DomainError('validation_failed', 'Send exactly one binary, in the field "file".')),
    );
    parser.on('fieldsLimit', () => fail(new DomainError('payload_too_large', 'Too many form fields.')));
    parser.on('partsLimit', () => fail(new DomainError('payload_too_large', 'Too many form parts.')));
    parser.on('error', () => abort(new DomainError('bad_request', 'The multipart body is malformed.')));
    parser.on('close', () => void finish());
    // The client went away, or the server closed the connection (its request timeout): nobody
    // reads an answer, but the temp file must go.
    req.on('aborted', () => abort(new DomainError('bad_request', 'The upload was interrupted.')));
    req.on('error', () => abort(new DomainError('bad_request', 'The upload was interrupted.')));
    req.pipe(parser);
  });
}

/** What the file store rejected with, as an Error (the upload's promise rejects with Errors only). */
function asError(error: unknown): Error {
  return error instanceof Error ? error : new Error('Storing the upload failed.', { cause: error });
}

function tooLarge(max: number): DomainError {
  return new DomainError(
    'payload_too_large',
    `The firmware file is larger than the limit of ${max} bytes (MAX_FIRMWARE_BYTES).`,
  );
}
