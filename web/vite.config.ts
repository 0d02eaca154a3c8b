import { defineConfig } from 'vite';

// The console is served by `herald serve` at /console/ (src/console), with /console/assets/*
// cached for a year: every asset name carries its content hash.
export default defineConfig({
  base: '/console/',
  oxc: { jsx: { runtime: 'automatic', importSource: 'preact' } },
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    // Everything inline-able would become a data: URL or an inline element the CSP refuses.
    assetsInlineLimit: 0,
    modulePreload: { polyfill: false },
  },
});
