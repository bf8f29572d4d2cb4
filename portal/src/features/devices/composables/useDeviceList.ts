import { computed, ref, shallowRef, triggerRef, watch, type Ref } from 'vue';
import { fetchQuery, useSubscription } from '../../../shared/composables/useGraphQL';
import type { ApiError } from '../../../shared/api/rest';
import {
  type DeviceFilter,
  type DeviceOrder,
  type DeviceRowFragment,
} from '../../../shared/graphql/generated/operations';
import { DeviceChangedDocument, DevicePageDocument } from '../graphql/documents';

/** First page small (fast first paint), then big pages while the user scrolls. */
const FIRST_PAGE = 100;
const PAGE = 1000;
export type SortKey = 'serial' | 'name' | 'model' | 'firmware' | 'status' | 'lastSeen' | 'ip';

/**
 * The rows of the device list for one filter and order: a window over the server's connection
 * (sorted by the server, keyset-paged), filled page by page as the user scrolls towards rows
 * not loaded yet. Live changes (deviceChanged) patch loaded rows in place, batched per frame
 * (a row keeps its place until the next reload even when the change moves it in the order).
 */
export function useDeviceList(filter: Ref<DeviceFilter>, order: Ref<DeviceOrder | null>) {
  const rows = shallowRef<DeviceRowFragment[]>([]);
  const total = ref(0);
  const quota = ref(0);
  const loading = ref(false);
  const initialLoading = ref(true);
  const error = shallowRef<ApiError | null>(null);
  const newDevices = ref(0);
  let cursor: string | null = null;
  const hasNext = ref(true);
  let wanted = 0;
  let generation = 0;
  let index = new Map<string, number>();

  async function pump(gen: number): Promise<void> {
    if (loading.value) return;
    loading.value = true;
    try {
      while (gen === generation && hasNext.value && rows.value.length <= wanted) {
        const first = rows.value.length === 0 ? FIRST_PAGE : PAGE;
        const data = await fetchQuery(DevicePageDocument, {
          first,
          after: cursor,
          filter: filter.value,
          orderBy: order.value,
        });
        if (gen !== generation) return;
        const page = data.devices;
        const start = rows.value.length;
        page.edges.forEach((e, i) => index.set(e.node.serial, start + i));
        rows.value.push(...page.edges.map((e) => e.node));
        triggerRef(rows);
        total.value = page.totalCount;
        quota.value = page.quota;
        cursor = page.pageInfo.endCursor;
        hasNext.value = page.pageInfo.hasNextPage;
        error.value = null;
        initialLoading.value = false;
      }
    } catch (e) {
      if (gen === generation) error.value = e as ApiError;
      initialLoading.value = false;
    } finally {
      if (gen === generation) loading.value = false;
    }
  }

  function reset(): void {
    generation += 1;
    rows.value = [];
    index = new Map();
    cursor = null;
    hasNext.value = true;
    wanted = 0;
    total.value = 0;
    newDevices.value = 0;
    loading.value = false;
    initialLoading.value = true;
    void pump(generation);
  }

  /** Make sure rows up to `last` are loaded (or being loaded). */
  function ensureLoaded(last: number): void {
    if (last <= wanted && (rows.value.length > last || !hasNext.value)) return;
    wanted = Math.max(wanted, last);
    if (!loading.value && hasNext.value && rows.value.length <= wanted) void pump(generation);
  }

  watch([filter, order], reset, { deep: true, immediate: true });

  // Live cells: patches arrive in bursts when many devices change; apply them once per frame.
  const pending = new Map<string, DeviceRowFragment>();
  let scheduled = false;
  function flush(): void {
    scheduled = false;
    let changed = false;
    for (const [serial, device] of pending) {
      const i = index.get(serial);
      if (i !== undefined) {
        rows.value[i] = device;
        changed = true;
      }
    }
    pending.clear();
    if (changed) triggerRef(rows);
  }
  useSubscription(
    DeviceChangedDocument,
    () => ({ filter: null }),
    (data) => {
      const change = data.deviceChanged;
      if (change.type === 'device.claimed' && !index.has(change.device.serial)) {
        newDevices.value += 1;
        return;
      }
      pending.set(change.device.serial, change.device);
      if (!scheduled) {
        scheduled = true;
        requestAnimationFrame(flush);
      }
    },
  );

  const fullyLoaded = computed(() => !hasNext.value && rows.value.length >= total.value);
  return {
    rows,
    total,
    quota,
    loading,
    initialLoading,
    error,
    newDevices,
    fullyLoaded,
    ensureLoaded,
    reload: reset,
  };
}
