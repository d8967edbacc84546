export { validateWorkflow, workflowFormat, isAssetRef, assetRefIds, inputChoices, nodeDefinition } from './validate.js';
export type { NodeDefinitions, NodeDefinition, WorkflowProblem, NodeProblem, ValidationOutcome, ApiWorkflow } from './validate.js';
export { toEngineErrorBody, toV2NodeErrors } from './shapes.js';
