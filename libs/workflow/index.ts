export { validateWorkflow, workflowFormat, isAssetRef, assetRefIds, inputChoices } from './validate.js';
export type { NodeDefinitions, NodeDefinition, WorkflowProblem, NodeProblem, ValidationOutcome, ApiWorkflow } from './validate.js';
export { toEngineErrorBody, toV2NodeErrors } from './shapes.js';
