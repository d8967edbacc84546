// The router's public surface: the module, and the hook that names every router response.
export { RouterModule } from './router.module.js';
export { setServiceRequestId } from './request-context.js';
