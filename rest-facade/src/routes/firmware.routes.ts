import { z } from 'zod';
import { defineRoute, type RouteDef } from '../route';
import type { Services } from '#core/services';
import { AttachSignatureInput, UpdateFirmwareInput, UploadFirmwareFields } from '#core/firmware/firmware.service';
import { requireAdmin } from '#core/shared/actor';
import { IdParams } from '../schemas/common';
import {
  FirmwareUploadForm,
  FirmwareVersionSchema,
  ListFirmwareQuery,
  RegisterSigningKeyBody,
  SigningKeysSchema,
} from '../schemas/firmware.schemas';
import { presentFirmwareVersion, presentSigningKeys } from '../presenters/firmware.presenter';
import { readFirmwareUpload } from './firmware-upload';
import { withBodyFieldNames } from '../body-field-names';

/** Firmware versions (upload, list, attach a signature, delete the binary) and the signing key (docs/signed-firmware.md); deploy is in deployments.routes.ts. */
export function firmwareRoutes(services: Services): RouteDef[] {
  return [
    defineRoute({
      method: 'post',
      path: '/firmware/versions',
      operationId: 'uploadFirmwareVersion',
      summary:
        'Upload a firmware version (multipart/form-data: model, version, release_notes, changelog, signature, file). 409 when the model has that version (1.4 = 1.4.0), 413 past MAX_FIRMWARE_BYTES, ' +
        '422 signature_invalid when a signing key is registered and the signature is missing or does not verify (nothing is stored)',
      tag: 'Firmware',
      requestContentType: 'multipart/form-data',
      requestSchema: FirmwareUploadForm,
      responses: {
        201: {
          description: 'Stored; sha256 and size computed by the service',
          schema: z.object({ firmware_version: FirmwareVersionSchema }),
        },
      },
      handler: async ({ actor, req }) => {
        requireAdmin(actor);
        const upload = await readFirmwareUpload(req, {
          maxFileBytes: services.firmware.maxFirmwareBytes,
          receive: (stream) => services.firmware.receiveFile(actor, stream),
          discard: (temp) => services.firmware.discardFile(temp),
        });
        // The text fields are untrusted: parsed here with the service's own schema. A refused
        // upload must not leave its binary behind (the service discards it on its own failures).
        const fields = UploadFirmwareFields.safeParse(upload.fields);
        if (!fields.success) {
          if (upload.file) await services.firmware.discardFile(upload.file);
          throw fields.error;
        }
        const created = await services.firmware.create(actor, { fields: fields.data, file: upload.file });
        return { status: 201, body: { firmware_version: presentFirmwareVersion(created) } };
      },
    }),
    defineRoute({
      method: 'get',
      path: '/firmware/signing-key',
      operationId: 'getFirmwareSigningKey',
      summary:
        'The Ed25519 public key firmware uploads must be signed with (null when none is registered), and the keys it replaced',
      tag: 'Firmware',
      responses: { 200: { description: 'The current key and the retired ones', schema: SigningKeysSchema } },
      handler: async ({ actor }) => ({ status: 200, body: presentSigningKeys(await services.signingKeys.get(actor)) }),
    }),
    defineRoute({
      method: 'put',
      path: '/firmware/signing-key',
      operationId: 'registerFirmwareSigningKey',
      summary:
        'Register the public half of the firmware signing key (PEM SPKI, Ed25519; admin). A new key rotates: the old one is retired, versions it signed stay valid. ' +
        '422 invalid_signing_key for anything else (a private key included)',
      tag: 'Firmware',
      body: RegisterSigningKeyBody,
      responses: {
        200: { description: 'Registered: uploads must now be signed with this key', schema: SigningKeysSchema },
      },
      handler: async ({ actor, body }) => ({
        status: 200,
        body: presentSigningKeys(
          await withBodyFieldNames(() => services.signingKeys.register(actor, { publicKey: body.public_key })),
        ),
      }),
    }),
    defineRoute({
      method: 'get',
      path: '/firmware/versions',
      operationId: 'listFirmwareVersions',
      summary: 'List firmware versions, newest version first (optionally of one model)',
      tag: 'Firmware',
      query: ListFirmwareQuery,
      responses: {
        200: { description: 'The versions', schema: z.object({ versions: z.array(FirmwareVersionSchema) }) },
      },
      handler: async ({ actor, query }) => ({
        status: 200,
        body: { versions: (await services.firmware.list(actor, query)).map(presentFirmwareVersion) },
      }),
    }),
    defineRoute({
      method: 'get',
      path: '/firmware/versions/:id',
      operationId: 'getFirmwareVersion',
      summary: 'One firmware version',
      tag: 'Firmware',
      params: IdParams,
      responses: { 200: { description: 'The version', schema: z.object({ firmware_version: FirmwareVersionSchema }) } },
      handler: async ({ actor, params }) => ({
        status: 200,
        body: { firmware_version: presentFirmwareVersion(await services.firmware.get(actor, params)) },
      }),
    }),
    defineRoute({
      method: 'put',
      path: '/firmware/versions/:id/signature',
      operationId: 'attachFirmwareSignature',
      summary:
        'Attach a signature to a stored version (admin), e.g. one uploaded before the signing key was registered, so deploys and rollbacks to it are allowed. ' +
        'JSON {"signature": "<base64 Ed25519 signature over the version\'s SHA-256 digest>"}, checked against the current signing key and the stored digest ' +
        '(works after the binary was deleted). The same signature again answers 200 unchanged; a version signed with a retired key is re-signed only by a signature that verifies. ' +
        '422 signature_invalid when no key is registered or it does not verify (nothing changes); 404 for unknown ids and other accounts',
      tag: 'Firmware',
      params: IdParams,
      body: AttachSignatureInput,
      responses: {
        200: {
          description: 'The version, signed with the current key',
          schema: z.object({ firmware_version: FirmwareVersionSchema }),
        },
      },
      handler: async ({ actor, params, body }) => ({
        status: 200,
        body: {
          firmware_version: presentFirmwareVersion(
            await services.firmware.attachSignature(actor, { id: params.id, signature: body.signature }),
          ),
        },
      }),
    }),
    defineRoute({
      method: 'patch',
      path: '/firmware/versions/:id',
      operationId: 'updateFirmwareVersion',
      summary:
        'Change which versions may install this one directly (admin): JSON {"upgrade_from": ">=1.2.0 <2.0.0"}, null or "*" for any. ' +
        'Hops not yet queued are planned with the new range (docs/ota.md "Upgrade paths"). 422 validation_failed for a bad range; 404 for unknown ids and other accounts',
      tag: 'Firmware',
      params: IdParams,
      body: UpdateFirmwareInput,
      responses: {
        200: { description: 'The version', schema: z.object({ firmware_version: FirmwareVersionSchema }) },
      },
      handler: async ({ actor, params, body }) => ({
        status: 200,
        body: {
          firmware_version: presentFirmwareVersion(
            await services.firmware.update(actor, { id: params.id, upgrade_from: body.upgrade_from }),
          ),
        },
      }),
    }),
    defineRoute({
      method: 'delete',
      path: '/firmware/versions/:id',
      operationId: 'deleteFirmwareVersion',
      summary:
        'Delete the binary of a version (the record stays with file_available false); 409 while an unfinished update targets it',
      tag: 'Firmware',
      params: IdParams,
      responses: {
        200: { description: 'The binary is gone', schema: z.object({ firmware_version: FirmwareVersionSchema }) },
      },
      handler: async ({ actor, params }) => ({
        status: 200,
        body: { firmware_version: presentFirmwareVersion(await services.firmware.deleteFile(actor, params)) },
      }),
    }),
  ];
}
