// The parts of make bench-node's report that live outside docs/performance-node.md:
//   - chart(rows): docs/performance-node.svg, jobs/s at concurrency 1, 10 and 100 (no-op handler),
//     BullMQ's and redis-reclaim's bars side by side, from the rows of bench.mjs;
//   - section(table): the Node.js section of docs/performance.md (the table, the chart, a link to
//     performance-node.md), between markers, replaced in place or appended.
// `make bench` rewrites docs/performance.md, then runs `node clients/node/bench/report.mjs`, which
// puts the section back from the committed docs/performance-node.md (no npm package needed).
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const PROJECT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
export const PERFORMANCE = path.join(PROJECT, 'docs/performance.md');
export const NODE_PAGE = path.join(PROJECT, 'docs/performance-node.md');
export const CHART = path.join(PROJECT, 'docs/performance-node.svg');
const BEGIN = '<!-- clients/node/bench: begin -->';
const END = '<!-- clients/node/bench: end -->';

const escape = (s) => String(s).replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

/** The SVG bar chart of the jobs/s rows (`[measure, bullmq, reclaim, ratio]`) at concurrency 1, 10, 100. */
export function chart(rows) {
  const groups = [1, 10, 100].map((c) => {
    const row = rows.find((r) => r[0] === `jobs/s, concurrency ${c}`);
    return { label: `concurrency ${c}`, bullmq: Number(row?.[1] ?? 0), reclaim: Number(row?.[2] ?? 0), ratio: row?.[3] ?? '' };
  });
  const W = 640;
  const H = 320;
  const top = 40;
  const bottom = 50;
  const left = 70;
  const plotH = H - top - bottom;
  const max = Math.max(1, ...groups.flatMap((g) => [g.bullmq, g.reclaim]));
  const step = 10 ** Math.floor(Math.log10(max));
  const ceil = Math.ceil(max / step) * step;
  const y = (v) => top + plotH - (v / ceil) * plotH;
  const groupW = (W - left - 20) / groups.length;
  const barW = groupW / 3.2;
  const parts = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="12">`,
    `<title>jobs/s, no-op handler: BullMQ against redis-reclaim (make bench-node)</title>`,
    `<rect width="${W}" height="${H}" fill="#fff"/>`,
    `<text x="${W / 2}" y="20" text-anchor="middle" font-size="14">jobs/s, no-op handler (make bench-node)</text>`,
  ];
  for (let i = 0; i <= 4; i++) {
    const v = (ceil / 4) * i;
    parts.push(`<line x1="${left}" x2="${W - 20}" y1="${y(v)}" y2="${y(v)}" stroke="#ddd"/>`);
    parts.push(`<text x="${left - 6}" y="${y(v) + 4}" text-anchor="end">${Math.round(v).toLocaleString('en-US')}</text>`);
  }
  groups.forEach((g, i) => {
    const x0 = left + i * groupW + groupW / 2 - barW - 2;
    for (const [k, v, color] of [[0, g.bullmq, '#9e9e9e'], [1, g.reclaim, '#c62828']]) {
      const x = x0 + k * (barW + 4);
      parts.push(`<rect x="${x.toFixed(1)}" y="${y(v).toFixed(1)}" width="${barW.toFixed(1)}" height="${(top + plotH - y(v)).toFixed(1)}" fill="${color}"/>`);
      parts.push(`<text x="${(x + barW / 2).toFixed(1)}" y="${(y(v) - 4).toFixed(1)}" text-anchor="middle">${Math.round(v).toLocaleString('en-US')}</text>`);
    }
    parts.push(`<text x="${(left + i * groupW + groupW / 2).toFixed(1)}" y="${top + plotH + 18}" text-anchor="middle">${escape(g.label)} (${escape(g.ratio)})</text>`);
  });
  parts.push(`<rect x="${left}" y="${H - 22}" width="12" height="12" fill="#9e9e9e"/><text x="${left + 16}" y="${H - 12}">BullMQ</text>`);
  parts.push(`<rect x="${left + 90}" y="${H - 22}" width="12" height="12" fill="#c62828"/><text x="${left + 106}" y="${H - 12}">redis-reclaim Worker</text>`);
  parts.push('</svg>');
  return `${parts.join('\n')}\n`;
}

/** The Node.js section of docs/performance.md, for `table` (Markdown). */
export function section(table) {
  return `${BEGIN}
## The Node.js Worker against BullMQ

Written by \`make bench-node\` (clients/node/bench), kept by \`make bench\`; the method, the
machine and the targets are in [performance-node.md](performance-node.md).

${table.trim()}

![jobs/s at concurrency 1, 10 and 100: BullMQ and redis-reclaim](performance-node.svg)
${END}`;
}

/** Puts `text` (a section with its markers) into docs/performance.md: in place of the last one, or at the end. */
export function splice(text, file = PERFORMANCE) {
  let doc = '';
  try {
    doc = readFileSync(file, 'utf8');
  } catch {
    // no page yet: the section alone
  }
  const at = doc.indexOf(BEGIN);
  const end = doc.indexOf(END, at);
  if (at >= 0 && end >= 0) doc = doc.slice(0, at) + text + doc.slice(end + END.length);
  else doc = `${doc.replace(/\n*$/, '')}\n\n${text}\n`;
  writeFileSync(file, doc);
}

/** The table of a performance-node.md page (its lines that start with `|`). */
export function tableOf(page) {
  return page.split('\n').filter((l) => l.startsWith('|')).join('\n');
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  splice(section(tableOf(readFileSync(NODE_PAGE, 'utf8'))));
  console.log(`the Node.js section of ${path.relative(PROJECT, PERFORMANCE)} from ${path.relative(PROJECT, NODE_PAGE)}`);
}
