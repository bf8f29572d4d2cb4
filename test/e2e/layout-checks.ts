import type { Locator, Page } from 'playwright-core';

/** A box on the page, in CSS pixels. */
export interface Box {
  left: number;
  right: number;
}

/** One column of a grid table: its header and first row cells, and the text each shows. */
export interface ColumnLayout {
  /** The header's text. */
  label: string;
  /** The header cell's `data-col`, null when it has none (a selection column). */
  key: string | null;
  /** The header cell and the first row's cell in that column. */
  header: Box;
  cell: Box;
  /** Where the header's and the cell's text is laid out (wider than the cell: cut off or spilling). */
  headerText: Box;
  cellText: Box;
  /** Each cell's box less its padding: where its text has room. */
  headerRoom: Box;
  cellRoom: Box;
}

/**
 * The columns of a table built from grid rows (`[role=row]`, the header row first), by position:
 * what a person sees line up or not, whatever the markup calls the columns. The text boxes are
 * the laid-out text (a Range), which stays as wide as the text when the cell clips it or ends
 * it in "…".
 */
export function gridColumns(table: Locator): Promise<ColumnLayout[]> {
  return table.evaluate((el) => {
    const rows = [...el.querySelectorAll('[role=row]')];
    const [head, first] = [rows[0], rows.find((r, i) => i > 0 && r.querySelector('[role=cell]'))];
    if (!head || !first) throw new Error('the table has no header row or no data row');
    const box = (r: DOMRect) => ({ left: r.left, right: r.right });
    const room = (cell: Element) => {
      const r = cell.getBoundingClientRect();
      const style = getComputedStyle(cell);
      return { left: r.left + parseFloat(style.paddingLeft), right: r.right - parseFloat(style.paddingRight) };
    };
    const text = (cell: Element) => {
      const range = document.createRange();
      range.selectNodeContents(cell);
      return box(range.getBoundingClientRect());
    };
    const headers = [...head.children];
    const cells = [...first.children];
    return headers.map((h, i) => {
      const c = cells[i]!;
      return {
        label: h.textContent.replace(/[▲▼]/g, '').trim(),
        key: h.getAttribute('data-col'),
        header: box(h.getBoundingClientRect()),
        cell: box(c.getBoundingClientRect()),
        headerText: text(h),
        cellText: text(c),
        headerRoom: room(h),
        cellRoom: room(c),
      };
    });
  });
}

/** Whether two boxes share more than a pixel horizontally. */
export const overlaps = (a: Box, b: Box): boolean => Math.min(a.right, b.right) - Math.max(a.left, b.left) > 1;
/** Whether `inner` fits in `outer` (to a pixel). */
export const within = (inner: Box, outer: Box): boolean =>
  inner.left >= outer.left - 1 && inner.right <= outer.right + 1;

/**
 * The colour of an element's text as the browser painted it: the darkest pixel of a screenshot
 * of it (text on a light background). Read from pixels because `getComputedStyle` never tells a
 * page a link's `:visited` colour; the page's own canvas decodes the PNG.
 */
export async function paintedTextColour(page: Page, target: Locator): Promise<[number, number, number]> {
  const png = await target.screenshot({ animations: 'disabled', caret: 'hide' });
  return page.evaluate(async (base64) => {
    const image = new Image();
    image.src = `data:image/png;base64,${base64}`;
    await image.decode();
    const canvas = document.createElement('canvas');
    canvas.width = image.width;
    canvas.height = image.height;
    const context = canvas.getContext('2d')!;
    context.drawImage(image, 0, 0);
    const data = context.getImageData(0, 0, image.width, image.height).data;
    let darkest: [number, number, number] = [255, 255, 255];
    const luminance = ([r, g, b]: number[]) => 0.299 * r! + 0.587 * g! + 0.114 * b!;
    for (let i = 0; i < data.length; i += 4) {
      const pixel: [number, number, number] = [data[i]!, data[i + 1]!, data[i + 2]!];
      if (luminance(pixel) < luminance(darkest)) darkest = pixel;
    }
    return darkest;
  }, png.toString('base64'));
}

/** Distance between two colours (0-441), for "is it this colour" with anti-aliasing allowed for. */
export const colourDistance = (a: readonly number[], b: readonly number[]): number =>
  Math.hypot(a[0]! - b[0]!, a[1]! - b[1]!, a[2]! - b[2]!);

/** `rgb(r, g, b)` of a computed style as numbers. */
export const rgb = (css: string): number[] => (css.match(/\d+(\.\d+)?/g) ?? []).slice(0, 3).map(Number);
