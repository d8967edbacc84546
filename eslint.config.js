import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', 'libs/db/generated/**', 'coverage/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: { globals: { process: 'readonly', console: 'readonly', Buffer: 'readonly', URL: 'readonly', fetch: 'readonly', setTimeout: 'readonly', clearTimeout: 'readonly', setInterval: 'readonly', clearInterval: 'readonly', setImmediate: 'readonly', AbortController: 'readonly', AbortSignal: 'readonly', TextEncoder: 'readonly', TextDecoder: 'readonly', FormData: 'readonly', Blob: 'readonly', Headers: 'readonly', Response: 'readonly', Request: 'readonly', crypto: 'readonly', performance: 'readonly', structuredClone: 'readonly', queueMicrotask: 'readonly', NodeJS: 'readonly', WebSocket: 'readonly' } },
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none' }],
      // Libraries are reached only through their public entry.
      'no-restricted-imports': ['error', { patterns: [{ group: ['**/libs/*/*', '#libs/*/*'], message: 'Import a library through #libs/<name> only.' }] }],
    },
  },
  {
    // The router is a sealed module: the rest of the API reaches it through its index only.
    files: ['apps/**/*.ts'],
    ignores: ['apps/api/src/router/**'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            { group: ['**/libs/*/*', '#libs/*/*'], message: 'Import a library through #libs/<name> only.' },
            { group: ['**/router/*', '!**/router/index.js'], message: 'The router module is reached through router/index.js only.' },
          ],
        },
      ],
    },
  },
  {
    files: ['test/**/*.ts', '**/*.test.ts', 'bench/**'],
    rules: { '@typescript-eslint/no-explicit-any': 'off', '@typescript-eslint/no-non-null-assertion': 'off' },
  },
);
