/** SIM_OBJECT_INFO_FILE: the sim-engine reports a recorded engine's definitions beside its own. */
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { ObjectInfo } from '#libs/engine-protocol';
import { startSimEngine, type SimEngine } from '../../apps/sim-engine/src/server.js';

const RECORDED_FILE = 'test/fixtures/engine-transcripts/object_info_full.json';
const RECORDED = JSON.parse(readFileSync(RECORDED_FILE, 'utf8')) as ObjectInfo;

describe('a sim-engine with the recorded definitions', () => {
  let engine: SimEngine;
  let plain: SimEngine;

  beforeAll(async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'sim-engine-'));
    const folders = (name: string) => ({ inputDir: path.join(dir, name, 'input'), outputDir: path.join(dir, name, 'output'), tempDir: path.join(dir, name, 'temp'), logToStderr: false });
    engine = await startSimEngine({ port: 0, objectInfoFile: RECORDED_FILE, ...folders('recorded') });
    plain = await startSimEngine({ port: 0, ...folders('plain') });
  });
  afterAll(async () => {
    await engine.close();
    await plain.close();
  });

  const objectInfo = async (e: SimEngine, suffix = '') => (await (await fetch(`${e.url}/object_info${suffix}`)).json()) as ObjectInfo;

  test('reports every recorded class, and its own classes as it reports them without the file', async () => {
    const own = await objectInfo(plain);
    const all = await objectInfo(engine);
    expect(Object.keys(RECORDED).length).toBe(383);
    expect(Object.keys(all).sort()).toEqual([...new Set([...Object.keys(RECORDED), ...Object.keys(own)])].sort());
    for (const name of Object.keys(own)) expect([name, all[name]]).toEqual([name, own[name]]);
    const recordedOnly = Object.keys(RECORDED).filter((name) => !(name in own));
    expect(recordedOnly.length).toBeGreaterThan(300);
    for (const name of recordedOnly) expect([name, all[name]]).toEqual([name, RECORDED[name]]);
    expect(Buffer.byteLength(JSON.stringify(all))).toBeGreaterThan(250_000);
  });

  test('answers for one recorded class as for its own', async () => {
    const own = await objectInfo(plain);
    const name = Object.keys(RECORDED).find((n) => !(n in own))!;
    expect(await objectInfo(engine, `/${name}`)).toEqual({ [name]: RECORDED[name] });
    expect(await objectInfo(plain, `/${name}`)).toEqual({});
    expect(await objectInfo(engine, '/KSampler')).toEqual(await objectInfo(plain, '/KSampler'));
  });
});
