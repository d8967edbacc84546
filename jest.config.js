// Jest runs in its native ESM mode (Nest 12 ships ESM only), with SWC transpiling TypeScript.
const swc = [
  '@swc/jest',
  {
    jsc: {
      parser: { syntax: 'typescript', decorators: true },
      transform: { legacyDecorator: true, decoratorMetadata: true },
      target: 'es2022',
      keepClassNames: true,
    },
    module: { type: 'es6' },
    sourceMaps: 'inline',
  },
];

export default {
  testEnvironment: 'node',
  // End-to-end suites start real processes; a single test may take several seconds.
  testTimeout: 30_000,
  extensionsToTreatAsEsm: ['.ts'],
  transform: { '^.+\\.ts$': swc },
  moduleNameMapper: {
    '^#libs/(.*)$': '<rootDir>/libs/$1/index.ts',
    '^(\\.{1,2}/.*)\\.js$': '$1',
  },
  testMatch: ['<rootDir>/{apps,libs,test}/**/*.test.ts'],
  testPathIgnorePatterns: ['/node_modules/', '/dist/'],
  // The reliability suites leave their findings behind; this turns them into .data/reliability.md.
  globalTeardown: '<rootDir>/test/reliability/write-report.js',
};
