import { takeContractProblems } from './contract.js';

// Run after every e2e suite (jest.config.js): the answers its tests caused must match the document.
afterAll(() => {
  expect(takeContractProblems()).toEqual([]);
});
