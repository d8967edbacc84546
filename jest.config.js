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

const common = {
  testTimeout: 30_000,
  testEnvironment: 'node',
  extensionsToTreatAsEsm: ['.ts'],
  transform: { '^.+\\.ts$': swc },
  moduleNameMapper: {
    '^#libs/(.*)$': '<rootDir>/libs/$1/index.ts',
    '^(\\.{1,2}/.*)\\.js$': '$1',
  },
  testPathIgnorePatterns: ['/node_modules/', '/dist/'],
};

// The tiers (`npm run test:<tier>`; `npm test` runs them all):
// - unit: no services at all (a test may run the sim-engine in-process);
// - db: PostgreSQL and Redis, no process of ours;
// - e2e: the real processes over PostgreSQL, Redis and the S3-compatible server, and the browser;
// - reliability: faults, load, fuzzing and isolation against the real processes.
const DB_TIER = ['<rootDir>/test/db/', '<rootDir>/test/jobs/', '<rootDir>/test/router/workspace-lease.test.ts'];

export default {
  // End-to-end suites start real processes; a single test may take several seconds.
  testTimeout: 30_000,
  projects: [
    {
      ...common,
      displayName: 'unit',
      testMatch: ['<rootDir>/{apps,libs,test}/**/*.test.ts'],
      testPathIgnorePatterns: [...common.testPathIgnorePatterns, '\\.e2e\\.test\\.ts$', ...DB_TIER],
    },
    { ...common, displayName: 'db', testMatch: ['<rootDir>/test/{db,jobs}/**/*.test.ts', '<rootDir>/test/router/workspace-lease.test.ts'] },
    {
      ...common,
      displayName: 'e2e',
      testMatch: ['<rootDir>/test/**/*.e2e.test.ts'],
      // Every answer of the API a suite sees is checked against openapi/openapi.json.
      setupFilesAfterEnv: ['<rootDir>/test/support/contract-setup.ts'],
      testPathIgnorePatterns: [...common.testPathIgnorePatterns, '<rootDir>/test/reliability/', ...DB_TIER],
    },
    { ...common, displayName: 'reliability', testMatch: ['<rootDir>/test/reliability/**/*.test.ts'] },
  ],
  // The reliability suites leave their findings behind; this turns them into .data/reliability.md.
  globalTeardown: '<rootDir>/test/reliability/write-report.js',
};
