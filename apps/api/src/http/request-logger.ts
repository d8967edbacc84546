import type { Bindings, ChildLoggerOptions, Logger } from 'pino';

// The methods that write or read the request's own bindings: the first call to any of them makes
// the real child. Everything else (`level`, `isLevelEnabled`, ...) is the parent's, unchanged.
const MADE_ON_USE = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'child', 'bindings', 'setBindings', 'flush'] as const;

const PARENT = Symbol('parent');
const BINDINGS = Symbol('bindings');
const CHILD = Symbol('child');

interface LazyState {
  [BINDINGS]: () => Bindings;
  [CHILD]?: Logger;
}

const prototypes = new WeakMap<Logger, object>();

/** One prototype per parent logger: each request's logger is then one small object. */
function prototypeFor(parent: Logger): object {
  let proto = prototypes.get(parent);
  if (!proto) {
    proto = Object.create(parent) as object;
    Object.defineProperty(proto, PARENT, { value: parent });
    for (const method of MADE_ON_USE) {
      Object.defineProperty(proto, method, {
        value(this: LazyState & { [PARENT]: Logger }, ...args: unknown[]) {
          const child = (this[CHILD] ??= this[PARENT].child(this[BINDINGS]()));
          return (child[method] as (...a: unknown[]) => unknown).apply(child, args);
        },
      });
    }
    prototypes.set(parent, proto);
  }
  return proto;
}

/**
 * A request's logger, made the first time the request logs. Request lines are off, so most
 * requests never log; an eager pino child costs each of them its bindings run through the
 * redaction rules and a set of formatters, several kilobytes of garbage per request, which at
 * thousands of requests a second is young-generation collections the callers wait on.
 * Options other than none (a route's own level or serializers) get a real child at once.
 */
export function requestLogger(parent: Logger, bindings: () => Bindings, options: ChildLoggerOptions): Logger {
  if (Object.keys(options).length > 0) return parent.child(bindings(), options);
  const logger = Object.create(prototypeFor(parent)) as LazyState;
  logger[BINDINGS] = bindings;
  return logger as unknown as Logger;
}
