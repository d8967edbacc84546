import { loadConfig } from '#libs/config';
import { applyMigrations, ensureDatabase } from './migrations.js';

// `npm run migrate`: creates the database if needed and applies pending migrations.
const config = loadConfig();
await ensureDatabase(config.databaseUrl);
const applied = await applyMigrations(config.databaseUrl);
console.log(JSON.stringify({ msg: 'migrations applied', applied }));
