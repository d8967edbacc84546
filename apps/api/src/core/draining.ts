import type { Server } from 'node:http';
import { Inject, Injectable, type BeforeApplicationShutdown } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import type { Config } from '#libs/config';
import { CONFIG } from './tokens.js';

// How long the answers given at the end of the grace get to leave before every connection closes.
const LAST_WORDS_MS = 1_000;

type Listener = () => void;

/**
 * The API's graceful stop, in the order Nest runs it on SIGTERM: timers stop (module destroy);
 * then draining begins: event streams and WebSockets end (their clients resume on another
 * replica), `Prefer: wait` answers with the job as it stands, answers close their connection;
 * the HTTP server stops accepting and waits for the requests in flight, router calls above all,
 * with Redis and the database still there. When `API_SHUTDOWN_GRACE_MS` has passed, the grace is
 * over: calls still waiting stop waiting (504 `deadline_exceeded`, as at their own deadline) and,
 * a moment later, every connection left is closed. Dependencies close last (application shutdown).
 *
 * Listeners live in sets rather than on an AbortSignal: thousands of streams and calls come and
 * go, and an EventTarget walks its whole listener list on every add and remove.
 */
@Injectable()
export class Draining implements BeforeApplicationShutdown {
  private readonly drainListeners = new Set<Listener>();
  private readonly graceListeners = new Set<Listener>();
  private drainingNow = false;
  private graceOverNow = false;

  constructor(
    @Inject(CONFIG) private readonly config: Config,
    private readonly adapterHost: HttpAdapterHost,
  ) {}

  /** Whether the process has begun to stop. */
  get draining(): boolean {
    return this.drainingNow;
  }

  /** Whether the grace for requests in flight has passed. */
  get graceOver(): boolean {
    return this.graceOverNow;
  }

  /** Calls `listener` once when draining begins (at once if it has); returns the way to cancel that. */
  onDraining(listener: Listener): () => void {
    return subscribe(this.drainListeners, this.drainingNow, listener);
  }

  /** Calls `listener` once when the grace is over (at once if it is); returns the way to cancel that. */
  onGraceOver(listener: Listener): () => void {
    return subscribe(this.graceListeners, this.graceOverNow, listener);
  }

  beforeApplicationShutdown(): void {
    if (this.drainingNow) return;
    this.drainingNow = true;
    fire(this.drainListeners);
    const server = this.adapterHost.httpAdapter?.getHttpServer() as Server | undefined;
    setTimeout(() => {
      this.graceOverNow = true;
      fire(this.graceListeners);
      setTimeout(() => server?.closeAllConnections(), LAST_WORDS_MS).unref();
    }, this.config.api.shutdownGraceMs).unref();
  }
}

function subscribe(listeners: Set<Listener>, alreadyFired: boolean, listener: Listener): () => void {
  if (alreadyFired) {
    listener();
    return () => undefined;
  }
  // Wrapped, so that the same function subscribed twice is two subscriptions.
  const entry = () => listener();
  listeners.add(entry);
  return () => listeners.delete(entry);
}

function fire(listeners: Set<Listener>): void {
  const all = [...listeners];
  listeners.clear();
  for (const listener of all) listener();
}
