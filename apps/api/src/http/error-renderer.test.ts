import 'reflect-metadata';
import { Controller, Get, Post } from '@nestjs/common';
import { FASTIFY_ROUTE_CONFIG_METADATA } from '@nestjs/platform-fastify/constants.js';
import type { FastifyRequest } from 'fastify';
import { envelopeErrors, mountErrorRenderer, rendererOf, RendersErrors, type ErrorRenderer } from './error-renderer.js';
import { RouteFlags } from './route-flags.js';

// Which renderer answers a request is route metadata, not the URL: these pin how it is carried.

const own: ErrorRenderer = { send: (_q, reply) => reply, raw: () => ({ headers: {}, body: '' }) };

@RendersErrors(own)
@Controller('x')
class Sample {
  @Get()
  read(): void {}

  @Post()
  @RouteFlags({ compress: false })
  write(): void {}

  helper(): void {}
}

const configOf = (method: keyof Sample) => Reflect.getMetadata(FASTIFY_ROUTE_CONFIG_METADATA, Sample.prototype[method]) as Record<string, unknown> | undefined;
const request = (config: unknown, url = '/x', server: object = {}) => ({ routeOptions: { config }, url, server }) as unknown as FastifyRequest;

describe('error renderers', () => {
  it('puts the controller\'s renderer on each of its routes, keeping their other flags, and on nothing else', () => {
    expect(configOf('read')).toEqual({ errorRenderer: own });
    expect(configOf('write')).toEqual({ compress: false, errorRenderer: own });
    expect(configOf('helper')).toBeUndefined();
  });

  it('answers a routed request with its route\'s renderer, one no route took with the renderer mounted at its path, else the envelope', () => {
    const server = { decorate(name: string, value: unknown) { (this as Record<string, unknown>)[name] = value; } };
    mountErrorRenderer(server as never, '/gw/v1/models', own);
    expect(rendererOf(request({ errorRenderer: own }, '/api/prompt', server))).toBe(own);
    expect(rendererOf(request({}, '/gw/v1/models/a/b/c', server))).toBe(own);
    expect(rendererOf(request({}, '/gw/api/v2/nowhere', server))).toBe(envelopeErrors);
    expect(rendererOf(request(undefined, '/anything'))).toBe(envelopeErrors);
  });
});
