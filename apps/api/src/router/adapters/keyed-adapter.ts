/** What the adapters of providers that take one API key share; Kling, which signs its own tokens, does not. */
export abstract class KeyedAdapter {
  constructor(protected readonly key: string) {}

  configured(): boolean {
    return this.key !== '';
  }

  secrets(): string[] {
    return [this.key];
  }
}
