import type { Ref } from 'vue';
import { useDialog, useMessage } from 'naive-ui';
import type { ApiError } from '../api/rest';

/** A form error the page found itself, shown like the service's own `validation_failed`. */
export function formError(message: string, fieldErrors: { field: string; message: string }[] = []): ApiError {
  return { message, fieldErrors, status: 422, code: 'validation_failed' } as unknown as ApiError;
}

/**
 * What every settings page does around a change: ask first where it cannot be undone, run the
 * mutation, say it worked, clear the page's error and reload its list; a refusal goes to the
 * page's error alert instead.
 */
export function useMutationFeedback(options: { error: Ref<ApiError | null>; refetch: () => Promise<unknown> }) {
  const dialog = useDialog();
  const message = useMessage();

  /** Runs `change`; true when it went through. `success` is the message shown then (none when absent). */
  async function run(change: () => Promise<unknown>, success?: string | (() => string)): Promise<boolean> {
    try {
      await change();
    } catch (e) {
      options.error.value = e as ApiError;
      return false;
    }
    if (success) message.success(typeof success === 'function' ? success() : success);
    options.error.value = null;
    await options.refetch();
    return true;
  }

  /** The same after a warning dialog the user confirms. */
  function confirm(
    ask: { title: string; content: string; positiveText: string },
    change: () => Promise<unknown>,
    success?: string | (() => string),
  ) {
    dialog.warning({
      ...ask,
      negativeText: 'Cancel',
      onPositiveClick: () => run(change, success).then(() => undefined),
    });
  }

  return { run, confirm };
}
