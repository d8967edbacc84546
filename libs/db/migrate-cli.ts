import { ConfigError, loadConfig } from '#libs/config';
import { applyMigrations, ensureDatabase } from './migrations.js';

// `npm run migrate`: creates the database if needed and applies pending migrations.
try {
  const config = loadConfig();
  await ensureDatabase(config.databaseUrl);
  const applied = await applyMigrations(config.databaseUrl);
  console.log(JSON.stringify({ msg: 'migrations applied', applied }));
} catch (err) {
  // A bad setting is the operator's to fix: name it, as the api and worker do, without a stack trace.
  if (!(err instanceof ConfigError)) throw err;
  console.error(err.message);
  process.exit(78);
}
