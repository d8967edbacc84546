export { RouterModule } from './router.module.js';
