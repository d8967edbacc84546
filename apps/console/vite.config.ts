import { defineConfig } from 'vite';

// Built with `vite build apps/console` into dist/console, which the API serves at
// <BASE_PATH>/console/. Relative asset links (`base: './'`) make one build work under any prefix:
// BASE_PATH, a deployment's `/deployment/{id}`, a proxy's. Preact's JSX runtime stands in for React's.
export default defineConfig({
  base: './',
  logLevel: 'warn',
  oxc: { jsx: { runtime: 'automatic', importSource: 'preact' } },
  build: {
    outDir: '../../dist/console',
    emptyOutDir: true,
    // The page's CSP allows its own files only: no inline module-preload polyfill.
    modulePreload: { polyfill: false },
    assetsInlineLimit: 0,
    sourcemap: false,
    target: 'es2022',
    reportCompressedSize: false,
  },
});
