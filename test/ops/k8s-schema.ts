import { existsSync } from 'node:fs';
import path from 'node:path';
import ts from 'typescript';
import { Namespace } from 'kubernetes-models/v1/Namespace';
import { ConfigMap } from 'kubernetes-models/v1/ConfigMap';
import { Secret } from 'kubernetes-models/v1/Secret';
import { Service } from 'kubernetes-models/v1/Service';
import { Deployment } from 'kubernetes-models/apps/v1/Deployment';
import { Job } from 'kubernetes-models/batch/v1/Job';
import { Ingress } from 'kubernetes-models/networking.k8s.io/v1/Ingress';
import { HorizontalPodAutoscaler } from 'kubernetes-models/autoscaling/v2/HorizontalPodAutoscaler';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1/PodDisruptionBudget';
import { ScaledObject } from '@kubernetes-models/keda/keda.sh/v1alpha1/ScaledObject';
import { TriggerAuthentication } from '@kubernetes-models/keda/keda.sh/v1alpha1/TriggerAuthentication';
import { ROOT } from './support.js';

export interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  [field: string]: unknown;
}

interface Model {
  validate(): void;
}

/**
 * Every kind the manifests may contain: its runtime model (kubernetes-models validators: types,
 * required fields, enums, formats) and its TypeScript interface (for unknown fields, which those
 * validators do not reject). A kind missing here fails the test until it is added.
 */
const KINDS: Record<string, { model: new (data: never) => Model; module: string; type: string }> = {
  'v1/Namespace': { model: Namespace, module: 'kubernetes-models/v1/Namespace', type: 'INamespace' },
  'v1/ConfigMap': { model: ConfigMap, module: 'kubernetes-models/v1/ConfigMap', type: 'IConfigMap' },
  'v1/Secret': { model: Secret, module: 'kubernetes-models/v1/Secret', type: 'ISecret' },
  'v1/Service': { model: Service, module: 'kubernetes-models/v1/Service', type: 'IService' },
  'apps/v1/Deployment': { model: Deployment, module: 'kubernetes-models/apps/v1/Deployment', type: 'IDeployment' },
  'batch/v1/Job': { model: Job, module: 'kubernetes-models/batch/v1/Job', type: 'IJob' },
  'networking.k8s.io/v1/Ingress': { model: Ingress, module: 'kubernetes-models/networking.k8s.io/v1/Ingress', type: 'IIngress' },
  'autoscaling/v2/HorizontalPodAutoscaler': {
    model: HorizontalPodAutoscaler,
    module: 'kubernetes-models/autoscaling/v2/HorizontalPodAutoscaler',
    type: 'IHorizontalPodAutoscaler',
  },
  'policy/v1/PodDisruptionBudget': { model: PodDisruptionBudget, module: 'kubernetes-models/policy/v1/PodDisruptionBudget', type: 'IPodDisruptionBudget' },
  'keda.sh/v1alpha1/ScaledObject': { model: ScaledObject, module: '@kubernetes-models/keda/keda.sh/v1alpha1/ScaledObject', type: 'IScaledObject' },
  'keda.sh/v1alpha1/TriggerAuthentication': {
    model: TriggerAuthentication,
    module: '@kubernetes-models/keda/keda.sh/v1alpha1/TriggerAuthentication',
    type: 'ITriggerAuthentication',
  },
};

const kindKey = (o: K8sObject) => `${o.apiVersion}/${o.kind}`;

/** Runtime validation; returns one message per invalid object. */
export function validateObjects(objects: K8sObject[]): string[] {
  const problems: string[] = [];
  for (const o of objects) {
    const kind = KINDS[kindKey(o)];
    if (!kind) {
      problems.push(`${kindKey(o)} ${o.metadata.name}: no schema for this kind`);
      continue;
    }
    try {
      new kind.model(o as never).validate();
    } catch (err) {
      problems.push(`${kindKey(o)} ${o.metadata.name}: ${(err as Error).message}`);
    }
  }
  return problems;
}

/** The node_modules folder that holds kubernetes-models (the project's, or one on NODE_PATH). */
function modelsNodeModules(): string {
  const candidates = [path.join(ROOT, 'node_modules'), ...(process.env.NODE_PATH ?? '').split(path.delimiter).filter(Boolean)];
  const found = candidates.find((dir) => existsSync(path.join(dir, 'kubernetes-models', 'package.json')));
  if (!found) throw new Error('kubernetes-models is not installed');
  return found;
}

/**
 * Type-checks each object as an object literal of its kind's interface. TypeScript's excess
 * property check then rejects misspelt or misplaced fields at any depth, which is what a strict
 * (additionalProperties: false) schema would do. Returns the compiler's messages.
 */
export function typeCheckObjects(objects: K8sObject[]): string[] {
  const imports = new Map<string, string>();
  const lines: string[] = [];
  objects.forEach((o, i) => {
    const kind = KINDS[kindKey(o)];
    if (!kind) return;
    const alias = `T${imports.size}`;
    if (!imports.has(kind.module)) imports.set(kind.module, alias);
    lines.push(`// ${kindKey(o)} ${o.metadata.name}\nexport const o${i}: ${imports.get(kind.module)}.${kind.type} = ${JSON.stringify(o, null, 2)};`);
  });
  const header = [...imports].map(([module, alias]) => `import type * as ${alias} from '${module}';`);
  const text = [...header, ...lines].join('\n');

  const fileName = path.join(path.dirname(modelsNodeModules()), '__k8s_manifests_check__.ts');
  const options: ts.CompilerOptions = {
    strict: true,
    noEmit: true,
    skipLibCheck: true,
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.ESNext,
    moduleResolution: ts.ModuleResolutionKind.Bundler,
    types: [],
  };
  const host = ts.createCompilerHost(options);
  const getSourceFile = host.getSourceFile.bind(host);
  host.getSourceFile = (name, languageVersion, ...rest) =>
    name === fileName ? ts.createSourceFile(name, text, languageVersion, true) : getSourceFile(name, languageVersion, ...rest);
  const fileExists = host.fileExists.bind(host);
  host.fileExists = (name) => name === fileName || fileExists(name);
  const program = ts.createProgram([fileName], options, host);
  const source = program.getSourceFile(fileName)!;
  return [...program.getSyntacticDiagnostics(source), ...program.getSemanticDiagnostics(source)].map((d) => {
    const where = d.start === undefined ? '' : `line ${source.getLineAndCharacterOfPosition(d.start).line + 1}: `;
    const line = d.start === undefined ? '' : ` (${text.split('\n')[source.getLineAndCharacterOfPosition(d.start).line]?.trim()})`;
    return `${where}${ts.flattenDiagnosticMessageText(d.messageText, '\n')}${line}`;
  });
}
