/**
 * The README's shell blocks as a script a test can follow in order: which lines a user runs in
 * the shell they paste into, which start a process that runs until Ctrl-C (`npm start`, the
 * simulator), and what state of the service each block asks for on its first line.
 */

/** What a block's first line says about the service (README "Quick start"). */
export type ServiceNeed = 'running' | 'stopped' | 'none';

export type ReadmeStep =
  /** Lines for the shell the user pastes into (variables carry over to later steps). */
  | { kind: 'shell'; script: string }
  /** `[VAR=value ...] npm start`: the service, in a terminal of its own until Ctrl-C. */
  | { kind: 'service'; line: string }
  /** `npm run simulator -- ...`: runs until Ctrl-C, in another terminal. */
  | { kind: 'simulator'; line: string }
  /** Left out of the run by the rule: install and test commands (CI runs them anyway). */
  | { kind: 'skipped'; line: string };

export interface ReadmeBlock {
  section: string;
  need: ServiceNeed;
  steps: ReadmeStep[];
  /** The block as written, continuations joined. */
  text: string;
}

const SERVICE_LINE = /^(?:[A-Z_]+=\S+ +)*npm start\b/;
const SIMULATOR_LINE = /^npm run simulator\b/;
const SKIPPED_LINE = /^npm (?:install|test|ci)\b/;

/** Every ```sh block of the README, in order, with the section it is in. */
export function readmeBlocks(readme: string): ReadmeBlock[] {
  const blocks: ReadmeBlock[] = [];
  let section = '';
  const pattern = /^## (.+)$|^```sh\n([\s\S]*?)^```$/gm;
  for (const match of readme.matchAll(pattern)) {
    if (match[1] !== undefined) {
      section = match[1];
      continue;
    }
    const text = match[2]!.replace(/\\\n\s*/g, '');
    blocks.push({ section, need: serviceNeed(text), steps: steps(text), text });
  }
  return blocks;
}

function serviceNeed(text: string): ServiceNeed {
  const first = text.split('\n')[0] ?? '';
  if (first.startsWith('# with the service running')) return 'running';
  if (first.startsWith('# with the service stopped')) return 'stopped';
  return 'none';
}

/** A block's lines split where a long-running command starts; `a && b` on one line is split too. */
function steps(text: string): ReadmeStep[] {
  const result: ReadmeStep[] = [];
  let shell: string[] = [];
  const flush = () => {
    if (shell.some((line) => line.trim() !== '' && !line.trim().startsWith('#')))
      result.push({ kind: 'shell', script: shell.join('\n') });
    shell = [];
  };
  for (const raw of text.split('\n')) {
    const withoutComment = raw.replace(/(?:^|\s+)#.*$/, '').trim();
    for (const command of withoutComment.startsWith('npm ') ? withoutComment.split(/\s*&&\s*/) : [raw]) {
      const line = command.trim();
      if (SKIPPED_LINE.test(line)) result.push({ kind: 'skipped', line });
      else if (SERVICE_LINE.test(line)) {
        flush();
        result.push({ kind: 'service', line });
      } else if (SIMULATOR_LINE.test(line)) {
        flush();
        result.push({ kind: 'simulator', line });
      } else shell.push(command);
    }
  }
  flush();
  return result;
}

/** `<serial>`-style placeholders: the README has none left (the one placeholder is `$KEY`). */
export function angleBracketPlaceholders(text: string): string[] {
  return [...text.matchAll(/<[a-z_]+>/g)].map((m) => m[0]);
}
