// Module resolution hooks: `ioredis` and `redis` imported by a doc block resolve to the shims.
export async function resolve(specifier, context, next) {
  if ((specifier === 'ioredis' || specifier === 'redis') && context.parentURL?.includes('/doc-block-')) {
    return next(new URL(`./shim-${specifier}.mjs`, import.meta.url).href, context);
  }
  return next(specifier, context);
}
