import { readFileSync } from 'node:fs';
import pg from 'pg';
import { applyMigrations, dropDatabase, ensureDatabase } from '#libs/db';
import { databaseUrl, uniqueName } from '../support/env.js';

// Prisma's schema engine cannot run here, so migrations are written by hand. This test is what
// keeps them honest: the database they produce must be exactly what schema.prisma describes.

interface FieldSpec {
  column: string;
  type: string;
  nullable: boolean;
  hasDbDefault: boolean;
}
interface ModelSpec {
  table: string;
  fields: FieldSpec[];
  indexes: { columns: string[]; unique: boolean }[];
  primaryKey: string[];
}

const SCALARS: Record<string, string> = {
  String: 'text',
  Int: 'integer',
  BigInt: 'bigint',
  Boolean: 'boolean',
  DateTime: 'timestamp without time zone',
  Json: 'jsonb',
  Bytes: 'bytea',
};

function parseSchema(text: string): { models: ModelSpec[]; enums: Map<string, string[]> } {
  const enums = new Map<string, string[]>();
  for (const m of text.matchAll(/^enum (\w+) \{([^}]*)\}/gm)) {
    enums.set(m[1]!, m[2]!.split('\n').map((l) => l.replace(/\/\/.*/, '').trim()).filter(Boolean));
  }
  const blocks = [...text.matchAll(/^model (\w+) \{([^}]*)\}/gm)];
  const modelNames = new Set(blocks.map((b) => b[1]!));
  const models: ModelSpec[] = [];
  for (const [, name, body] of blocks) {
    const lines = body!.split('\n').map((l) => l.replace(/\/\/.*/, '').trim()).filter(Boolean);
    const table = /@@map\("(\w+)"\)/.exec(body!)?.[1] ?? name!;
    const fields: FieldSpec[] = [];
    const columnOf = new Map<string, string>();
    let primaryKey: string[] = [];
    const indexes: ModelSpec['indexes'] = [];
    for (const line of lines) {
      if (line.startsWith('@@')) continue;
      const m = /^(\w+)\s+(\w+)(\[\])?(\?)?\s*(.*)$/.exec(line);
      if (!m) continue;
      const [, field, type, list, optional, attrs] = m;
      if (modelNames.has(type!)) continue; // relation field, no column
      const column = /@map\("(\w+)"\)/.exec(attrs!)?.[1] ?? field!;
      columnOf.set(field!, column);
      let sqlType = enums.has(type!) ? `enum:${type}` : SCALARS[type!]!;
      if (/@db\.Uuid/.test(attrs!)) sqlType = 'uuid';
      if (/@db\.Timestamptz/.test(attrs!)) sqlType = 'timestamp with time zone';
      if (list) sqlType = `array:${sqlType}`;
      const dbDefault = /@default\((?!uuid\(\))/.test(attrs!);
      // Prisma creates scalar lists as nullable columns.
      fields.push({ column, type: sqlType, nullable: Boolean(optional || list), hasDbDefault: dbDefault });
      if (/@id\b/.test(attrs!)) primaryKey = [column];
      if (/@unique\b/.test(attrs!)) indexes.push({ columns: [column], unique: true });
    }
    for (const line of lines) {
      const m = /^@@(id|unique|index)\(\[([^\]]*)\]/.exec(line);
      if (!m) continue;
      const columns = m[2]!.split(',').map((f) => columnOf.get(f.trim().replace(/\(.*$/, ''))!);
      if (m[1] === 'id') primaryKey = columns;
      else indexes.push({ columns, unique: m[1] === 'unique' });
    }
    models.push({ table, fields, indexes, primaryKey });
  }
  return { models, enums };
}

describe('migrations', () => {
  const url = databaseUrl(uniqueName('cct_schema'));
  let client: pg.Client;
  const schema = parseSchema(readFileSync('prisma/schema.prisma', 'utf8'));

  beforeAll(async () => {
    await ensureDatabase(url);
    const applied = await applyMigrations(url);
    expect(applied.length).toBeGreaterThan(0);
    client = new pg.Client({ connectionString: url });
    await client.connect();
  });
  afterAll(async () => {
    await client.end();
    await dropDatabase(url);
  });

  it('are recorded as prisma migrate deploy records them, and re-running applies nothing', async () => {
    const rows = await client.query('SELECT migration_name, checksum, finished_at, applied_steps_count FROM _prisma_migrations');
    expect(rows.rows.length).toBeGreaterThan(0);
    for (const r of rows.rows) {
      expect(r.checksum).toMatch(/^[0-9a-f]{64}$/);
      expect(r.finished_at).not.toBeNull();
    }
    expect(await applyMigrations(url)).toEqual([]);
  });

  it('create exactly the tables schema.prisma describes', async () => {
    const tables = await client.query<{ table_name: string }>(
      "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' AND table_name <> '_prisma_migrations'",
    );
    expect(tables.rows.map((r) => r.table_name).sort()).toEqual(schema.models.map((m) => m.table).sort());
  });

  it('create every column with its type, nullability and default', async () => {
    for (const model of schema.models) {
      const cols = await client.query<{ column_name: string; data_type: string; udt_name: string; is_nullable: string; column_default: string | null }>(
        "SELECT column_name, data_type, udt_name, is_nullable, column_default FROM information_schema.columns WHERE table_schema = 'public' AND table_name = $1",
        [model.table],
      );
      const byName = new Map(cols.rows.map((c) => [c.column_name, c]));
      expect([...byName.keys()].sort()).toEqual(model.fields.map((f) => f.column).sort());
      for (const f of model.fields) {
        const c = byName.get(f.column)!;
        const actual =
          c.data_type === 'USER-DEFINED'
            ? `enum:${c.udt_name}`
            : c.data_type === 'ARRAY'
              ? `array:${SCALARS[{ _text: 'String' }[c.udt_name] ?? ''] ?? c.udt_name}`
              : c.data_type;
        expect(`${model.table}.${f.column}: ${actual}`).toBe(`${model.table}.${f.column}: ${f.type}`);
        expect(`${model.table}.${f.column} nullable=${c.is_nullable === 'YES'}`).toBe(`${model.table}.${f.column} nullable=${f.nullable}`);
        expect(`${model.table}.${f.column} default=${c.column_default !== null}`).toBe(`${model.table}.${f.column} default=${f.hasDbDefault}`);
      }
    }
  });

  it('create the enums, primary keys and indexes', async () => {
    for (const [name, values] of schema.enums) {
      const rows = await client.query<{ v: string }>(
        'SELECT e.enumlabel AS v FROM pg_enum e JOIN pg_type t ON t.oid = e.enumtypid WHERE t.typname = $1 ORDER BY e.enumsortorder',
        [name],
      );
      expect(rows.rows.map((r) => r.v)).toEqual(values);
    }
    const idx = await client.query<{ tablename: string; indexdef: string }>("SELECT tablename, indexdef FROM pg_indexes WHERE schemaname = 'public'");
    const defs = idx.rows.map((r) => ({
      table: r.tablename,
      unique: /UNIQUE/.test(r.indexdef),
      columns: (/\((.*)\)$/.exec(r.indexdef)?.[1] ?? '').split(',').map((c) => c.trim().replace(/"/g, '').replace(/ DESC$/, '')),
    }));
    for (const model of schema.models) {
      const pk = defs.find((d) => d.table === model.table && d.unique && d.columns.join() === model.primaryKey.join());
      expect(`${model.table} pk ${model.primaryKey.join()}: ${Boolean(pk)}`).toBe(`${model.table} pk ${model.primaryKey.join()}: true`);
      for (const index of model.indexes) {
        const found = defs.find((d) => d.table === model.table && d.unique === index.unique && d.columns.join() === index.columns.join());
        expect(`${model.table} ${index.unique ? 'unique' : 'index'} (${index.columns.join()}): ${Boolean(found)}`).toBe(
          `${model.table} ${index.unique ? 'unique' : 'index'} (${index.columns.join()}): true`,
        );
      }
    }
  });
});
