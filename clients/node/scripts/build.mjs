// Builds dist/esm (ES modules) and dist/cjs (CommonJS) with tsc, each with its own package.json
// saying which it is, so `import` and `require` both load the package (package.json "exports").
import { execFileSync } from 'node:child_process';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';

const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
rmSync('dist', { recursive: true, force: true });
for (const [project, type, dir] of [['tsconfig.json', 'module', 'dist/esm'], ['tsconfig.cjs.json', 'commonjs', 'dist/cjs']]) {
  execFileSync(process.execPath, [tsc, '-p', project], { stdio: 'inherit' });
  mkdirSync(dir, { recursive: true });
  writeFileSync(`${dir}/package.json`, JSON.stringify({ type }) + '\n');
}
