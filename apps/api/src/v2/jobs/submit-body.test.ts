import type { ApiError } from '#libs/contracts';
import { parseSubmitBody } from './submit-body.js';

describe('parseSubmitBody (SubmitJobRequest)', () => {
  const refusal = (body: Record<string, unknown>) => {
    try {
      parseSubmitBody(body);
      return null;
    } catch (err) {
      return { code: (err as ApiError).code, message: (err as ApiError).message };
    }
  };

  it('names a reserved or unknown field before anything else, and a missing workflow as invalid_workflow', () => {
    expect(refusal({ inputs: {} })).toEqual({ code: 'invalid_request', message: '"inputs" is reserved and not supported yet.' });
    expect(refusal({ workflow: {}, colour: 1 })).toEqual({ code: 'invalid_request', message: 'Unknown field "colour".' });
    expect(refusal({})).toEqual({ code: 'invalid_workflow', message: 'The body needs a "workflow" in the engine API format.' });
  });

  it('keeps extra_data to the partner credentials, as strings of at most 4096 characters', () => {
    expect(refusal({ workflow: {}, extra_data: [] })).toEqual({ code: 'invalid_request', message: 'extra_data must be an object.' });
    expect(refusal({ workflow: {}, extra_data: { other: 'x' } })).toEqual({ code: 'invalid_request', message: 'extra_data accepts only api_key_comfy_org, auth_token_comfy_org.' });
    expect(refusal({ workflow: {}, extra_data: { auth_token_comfy_org: 'x'.repeat(4097) } })).toEqual({ code: 'invalid_request', message: 'extra_data.auth_token_comfy_org must be a string.' });
    expect(parseSubmitBody({ workflow: { a: 1 }, extra_data: { api_key_comfy_org: 'k' } })).toEqual({ workflow: { a: 1 }, extraData: { api_key_comfy_org: 'k' } });
    expect(parseSubmitBody({ workflow: 7, extra_data: null })).toEqual({ workflow: 7 });
  });
});
