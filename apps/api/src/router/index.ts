// The router's public surface: its module.
export { RouterModule } from './router.module.js';
