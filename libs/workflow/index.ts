export { validateWorkflow, workflowFormat, isAssetRef, assetRefIds } from './validate.js';
export type { NodeDefinitions, NodeDefinition, WorkflowProblem, NodeProblem, ValidationOutcome, ApiWorkflow } from './validate.js';
export { toEngineErrorBody, toV2NodeErrors } from './shapes.js';
