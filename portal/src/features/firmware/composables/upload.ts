import { session } from '../../../shared/session';
import { ApiError } from '../../../shared/api/rest';

export interface UploadFields {
  model: string;
  version: string;
  releaseNotes: string;
  changelog: string;
  /** base64 Ed25519 signature over the file's SHA-256 digest; empty when the account signs nothing. */
  signature: string;
  /** Versions that may install this one directly (docs/ota.md "Upgrade paths"); empty: any. */
  upgradeFrom?: string;
  file: File;
}

/**
 * Multipart upload to REST POST /api/v1/firmware/versions. XMLHttpRequest rather than fetch:
 * only XHR reports upload progress in browsers today.
 */
export function uploadFirmware(
  fields: UploadFields,
  onProgress: (percent: number) => void,
): { done: Promise<unknown>; abort: () => void } {
  const xhr = new XMLHttpRequest();
  const done = new Promise<unknown>((resolve, reject) => {
    const body = new FormData();
    body.append('model', fields.model);
    body.append('version', fields.version);
    body.append('release_notes', fields.releaseNotes);
    body.append('changelog', fields.changelog);
    if (fields.signature.trim()) body.append('signature', fields.signature.trim());
    if (fields.upgradeFrom?.trim()) body.append('upgrade_from', fields.upgradeFrom.trim());
    body.append('file', fields.file, fields.file.name);
    xhr.open('POST', '/api/v1/firmware/versions');
    xhr.setRequestHeader('x-csrf-token', session.csrfToken);
    xhr.setRequestHeader('accept', 'application/json');
    xhr.withCredentials = true;
    xhr.upload.onprogress = (event) => {
      if (event.lengthComputable) onProgress(Math.round((event.loaded / event.total) * 100));
    };
    xhr.onload = () => {
      let body: { detail?: string; title?: string; code?: string; errors?: { field: string; message: string }[] } = {};
      try {
        body = JSON.parse(xhr.responseText) as typeof body;
      } catch {
        // not JSON
      }
      if (xhr.status >= 200 && xhr.status < 300) resolve(body);
      else {
        if (xhr.status === 401) session.expire();
        reject(
          new ApiError(
            body.detail ?? body.title ?? `Upload failed (${xhr.status})`,
            xhr.status,
            body.code ?? `http_${xhr.status}`,
            body.errors ?? [],
          ),
        );
      }
    };
    xhr.onerror = () =>
      reject(new ApiError('The upload was interrupted: the service cannot be reached.', 0, 'network_error'));
    xhr.onabort = () => reject(new ApiError('Upload cancelled.', 0, 'aborted'));
    xhr.send(body);
  });
  return { done, abort: () => xhr.abort() };
}
