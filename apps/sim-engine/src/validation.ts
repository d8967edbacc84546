/**
 * Prompt validation with the engine's rules and messages (execution.py validate_prompt /
 * validate_inputs), so that 400 bodies match a real engine's byte for byte in content.
 */
import type { ApiPrompt, EngineErrorDetail, NodeValidationError } from '#libs/engine-protocol';
import type { NodeRegistry } from './nodes/registry.js';
import type { Storage } from './storage.js';
import { PyException, pyBool, pyEquals, pyFloat, pyInt, pyNumStr, pyRepr, pyStr } from './python-semantics.js';

export type ValidationResult =
  | { ok: true; outputs: string[]; nodeErrors: Record<string, NodeValidationError> }
  | { ok: false; error: EngineErrorDetail; nodeErrors: Record<string, NodeValidationError> };

type Validated = Map<string, { valid: boolean; reasons: EngineErrorDetail[] }>;

const TB_VALIDATE_PROMPT =
  '  File "ComfyUI/execution.py", line 1010, in validate_prompt\n    m = await validate_inputs(prompt_id, prompt, o, validated)\n        ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n';
const TB_INNER_CALL =
  '  File "ComfyUI/execution.py", line 808, in validate_inputs\n    r = await validate_inputs(prompt_id, prompt, o_id, validated)\n        ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n';
const TB_INPUTS_LOOKUP = '  File "ComfyUI/execution.py", line 730, in validate_inputs\n    inputs = prompt[unique_id][\'inputs\']\n             ~~~~~~~~~~~~~~~~~^^^^^^^^^^\n';
const TB_LINK_LOOKUP = "  File \"ComfyUI/execution.py\", line 788, in validate_inputs\n    o_class_type = prompt[o_id]['class_type']\n                   ~~~~~~^^^^^^\n";
const TB_SLOT_LOOKUP = '  File "ComfyUI/execution.py", line 790, in validate_inputs\n    received_type = r[val[1]]\n                    ~^^^^^^^^\n';

function invalidPrompt(message: string, details: string): ValidationResult {
  return { ok: false, error: { type: 'invalid_prompt', message, details, extra_info: {} }, nodeErrors: {} };
}

/** Type compatibility along a link: exact, `*` on either side, or overlapping `A,B` unions. */
export function validateNodeInput(received: unknown, expected: unknown): boolean {
  if (received === expected) return true;
  if (received === '*' || expected === '*') return true;
  if (typeof received !== 'string' || typeof expected !== 'string') return false;
  const r = new Set(received.split(',').map((t) => t.trim()));
  return expected.split(',').some((t) => r.has(t.trim()));
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Output nodes are visited in the order the recorded engine did (descending id). */
function compareIds(a: string, b: string): number {
  const na = Number(a);
  const nb = Number(b);
  if (Number.isFinite(na) && Number.isFinite(nb) && na !== nb) return na - nb;
  return a < b ? -1 : a > b ? 1 : 0;
}

export class PromptValidator {
  constructor(
    private readonly registry: NodeRegistry,
    private readonly storage: Storage,
  ) {}

  validate(prompt: unknown, partialTargets?: unknown): ValidationResult {
    if (!isObject(prompt)) return invalidPrompt('Cannot execute because the prompt is not an object.', `Got ${pyStr(typeof prompt)}`);
    const outputs: string[] = [];
    for (const [id, node] of Object.entries(prompt)) {
      if (!isObject(node) || !('class_type' in node)) {
        return invalidPrompt('Cannot execute because a node is missing the class_type property.', `Node ID '#${id}'`);
      }
      const classType = node.class_type;
      const def = typeof classType === 'string' ? this.registry.definition(classType) : undefined;
      if (!def) return invalidPrompt(`Cannot execute because node ${pyStr(classType)} does not exist.`, `Node ID '#${id}'`);
      if (def.output_node && (!Array.isArray(partialTargets) || partialTargets.includes(id))) outputs.push(id);
    }
    if (outputs.length === 0) {
      return { ok: false, error: { type: 'prompt_no_outputs', message: 'Prompt has no outputs', details: '', extra_info: {} }, nodeErrors: {} };
    }

    const apiPrompt = prompt as ApiPrompt;
    const good: string[] = [];
    const failed: Array<[string, EngineErrorDetail[]]> = [];
    // Null prototype: a node the client named `__proto__` is a key like any other, as in Python.
    const nodeErrors: Record<string, NodeValidationError> = Object.create(null) as Record<string, NodeValidationError>;
    const validated: Validated = new Map();
    for (const o of [...outputs].sort((a, b) => compareIds(b, a))) {
      let valid = false;
      let reasons: EngineErrorDetail[] = [];
      try {
        const m = this.validateInputs(apiPrompt, o, validated);
        valid = m.valid;
        reasons = m.reasons;
      } catch (err) {
        const ex = toPyException(err);
        reasons = [
          {
            type: 'exception_during_validation',
            message: 'Exception when validating node',
            details: ex.message,
            extra_info: { exception_type: ex.type, traceback: [TB_VALIDATE_PROMPT, ...ex.traceback] },
          },
        ];
        validated.set(o, { valid: false, reasons });
      }
      if (valid) {
        good.push(o);
        continue;
      }
      failed.push([o, reasons]);
      // Every invalid node with its own reasons seen so far is charged to this output,
      // downstream nodes that are only invalid because of them are not listed.
      for (const [nodeId, result] of validated) {
        if (result.valid || result.reasons.length === 0) continue;
        nodeErrors[nodeId] ??= { errors: result.reasons, dependent_outputs: [], class_type: apiPrompt[nodeId]!.class_type };
        nodeErrors[nodeId].dependent_outputs.push(o);
      }
    }
    if (good.length === 0) {
      const lines = failed.flatMap(([, rs]) => rs.map((r) => `${r.message}: ${r.details}`));
      return {
        ok: false,
        error: { type: 'prompt_outputs_failed_validation', message: 'Prompt outputs failed validation', details: lines.join('\n'), extra_info: {} },
        nodeErrors,
      };
    }
    return { ok: true, outputs: good.sort(compareIds), nodeErrors };
  }

  private validateInputs(prompt: ApiPrompt, id: string, validated: Validated): { valid: boolean; reasons: EngineErrorDetail[] } {
    const known = validated.get(id);
    if (known) return known;
    const node = prompt[id]!;
    if (!isObject(node.inputs)) {
      if (!('inputs' in node)) throw new PyException('KeyError', "'inputs'", [TB_INPUTS_LOOKUP]);
    }
    const inputs = (isObject(node.inputs) ? node.inputs : {}) as Record<string, unknown>;
    const sim = this.registry.get(node.class_type)!;
    const def = this.registry.definition(node.class_type)!;
    const specs: Array<[string, 'required' | 'optional', unknown[]]> = [
      ...Object.entries(def.input.required ?? {}).map(([k, v]) => [k, 'required', v] as [string, 'required', unknown[]]),
      ...Object.entries(def.input.optional ?? {}).map(([k, v]) => [k, 'optional', v] as [string, 'optional', unknown[]]),
    ];
    const customInputs = sim.validate?.inputs ?? [];
    const errors: EngineErrorDetail[] = [];
    let valid = true;

    for (const [x, category, spec] of specs) {
      const inputType = spec[0];
      const extraInfo = (isObject(spec[1]) ? spec[1] : {}) as Record<string, unknown>;
      const info = [inputType, extraInfo];
      if (!(x in inputs)) {
        if (category === 'required') {
          errors.push({ type: 'required_input_missing', message: 'Required input is missing', details: x, extra_info: { input_name: x } });
        }
        continue;
      }
      let val = inputs[x];
      if (Array.isArray(val)) {
        if (val.length !== 2) {
          errors.push({
            type: 'bad_linked_input',
            message: 'Bad linked input, must be a length-2 list of [node_id, slot_index]',
            details: x,
            extra_info: { input_name: x, input_config: info, received_value: val },
          });
          continue;
        }
        const oId = val[0];
        if (typeof oId !== 'string' || !Object.hasOwn(prompt, oId)) {
          throw new PyException('KeyError', pyRepr(oId), [TB_LINK_LOOKUP]);
        }
        const returnTypes = this.registry.definition(prompt[oId]!.class_type)!.output;
        const receivedType = pySlot(returnTypes, val[1]);
        if (!customInputs.includes('input_types') && !validateNodeInput(receivedType, inputType)) {
          errors.push({
            type: 'return_type_mismatch',
            message: 'Return type mismatch between linked nodes',
            details: `${x}, received_type(${receivedType}) mismatch input_type(${pyStr(inputType)})`,
            extra_info: { input_name: x, input_config: info, received_type: receivedType, linked_node: val },
          });
          continue;
        }
        try {
          const r = this.validateInputs(prompt, oId, validated);
          if (!r.valid) valid = false;
        } catch (err) {
          const ex = toPyException(err);
          valid = false;
          validated.set(oId, {
            valid: false,
            reasons: [
              {
                type: 'exception_during_inner_validation',
                message: 'Exception when validating inner node',
                details: ex.message,
                extra_info: {
                  input_name: x,
                  input_config: info,
                  exception_message: ex.message,
                  exception_type: ex.type,
                  traceback: [TB_INNER_CALL, ...ex.traceback],
                  linked_node: val,
                },
              },
            ],
          });
        }
        continue;
      }

      if (isObject(val) && '__value__' in val) {
        val = val.__value__;
        inputs[x] = val;
      }
      try {
        if (inputType === 'INT') val = inputs[x] = pyInt(val);
        else if (inputType === 'FLOAT') val = inputs[x] = pyFloat(val);
        else if (inputType === 'STRING') val = inputs[x] = pyStr(val);
        else if (inputType === 'BOOLEAN') val = inputs[x] = pyBool(val);
      } catch (err) {
        const ex = toPyException(err);
        errors.push({
          type: 'invalid_input_type',
          message: `Failed to convert an input value to a ${pyStr(inputType)} value`,
          details: `${x}, ${pyStr(val)}, ${ex.message}`,
          extra_info: { input_name: x, input_config: info, received_value: val, exception_message: ex.message },
        });
        continue;
      }

      if (customInputs.includes(x)) continue;
      const asFloat = inputType === 'FLOAT';
      const min = extraInfo.min as number | bigint | undefined;
      const max = extraInfo.max as number | bigint | undefined;
      if (min !== undefined && (typeof val === "number" || typeof val === "boolean" || typeof val === 'bigint') && (typeof val === 'bigint' ? val < BigInt(Math.ceil(Number(min))) : Number(val) < min)) {
        errors.push({
          type: 'value_smaller_than_min',
          message: `Value ${pyNumStr(typeof val === 'bigint' ? val : Number(val), asFloat)} smaller than min of ${pyNumStr(min, asFloat)}`,
          details: x,
          extra_info: { input_name: x, input_config: info, received_value: val },
        });
        continue;
      }
      if (max !== undefined && (typeof val === "number" || typeof val === "boolean" || typeof val === 'bigint') && (typeof val === 'bigint' ? val > BigInt(Math.floor(Number(max))) : Number(val) > max)) {
        errors.push({
          type: 'value_bigger_than_max',
          message: `Value ${pyNumStr(typeof val === 'bigint' ? val : Number(val), asFloat)} bigger than max of ${pyNumStr(max, asFloat)}`,
          details: x,
          extra_info: { input_name: x, input_config: info, received_value: val },
        });
        continue;
      }
      const options = Array.isArray(inputType) ? inputType : inputType === 'COMBO' && Array.isArray(extraInfo.options) ? extraInfo.options : undefined;
      if (options && !options.some((o) => pyEquals(o, val))) {
        const big = options.length > 20;
        errors.push({
          type: 'value_not_in_list',
          message: 'Value not in list',
          details: `${x}: '${pyStr(val)}' not in ${big ? `(list of length ${options.length})` : pyRepr(options)}`,
          extra_info: { input_name: x, input_config: big ? null : info, received_value: val },
        });
        continue;
      }
    }

    if (sim.validate) {
      const filtered = sim.validate.inputs.filter((n) => n in inputs && !Array.isArray(inputs[n]));
      const r = sim.validate.fn(inputs, this.storage);
      if (r !== true) {
        for (const x of filtered) {
          errors.push({ type: 'custom_validation_failed', message: 'Custom validation failed for node', details: `${x} - ${r}`, extra_info: { input_name: x } });
        }
      }
    }

    const result = { valid: errors.length === 0 && valid, reasons: errors };
    validated.set(id, result);
    return result;
  }
}

/** RETURN_TYPES[index] with Python tuple indexing rules. */
function pySlot(types: string[], index: unknown): string {
  if (typeof index === 'boolean') index = Number(index);
  if (typeof index !== 'number' || !Number.isInteger(index)) {
    throw new PyException('TypeError', `tuple indices must be integers or slices, not ${index === null ? 'NoneType' : typeof index === 'string' ? 'str' : typeof index === 'number' ? 'float' : Array.isArray(index) ? 'list' : 'dict'}`, [TB_SLOT_LOOKUP]);
  }
  const i = index < 0 ? types.length + index : index;
  if (i < 0 || i >= types.length) throw new PyException('IndexError', 'tuple index out of range', [TB_SLOT_LOOKUP]);
  return types[i]!;
}

function toPyException(err: unknown): PyException {
  if (err instanceof PyException) return err;
  const e = err as Error;
  return new PyException(e?.name ?? 'Exception', e?.message ?? String(err));
}
