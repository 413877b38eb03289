// oidc-provider ships no types; the tests use only this much of it (test/helpers/oidc-idp.ts).
declare module "oidc-provider" {
  import type { IncomingMessage, ServerResponse } from "node:http";

  interface KoaContext {
    path: string;
    method: string;
    body: unknown;
  }
  type Middleware = (ctx: KoaContext, next: () => Promise<void>) => Promise<void>;

  interface Account {
    accountId: string;
    claims(use: string, scope: string): Promise<Record<string, unknown>>;
  }

  interface Configuration {
    clients?: Array<Record<string, unknown>>;
    jwks?: { keys: Array<Record<string, unknown>> };
    cookies?: { keys: string[] };
    claims?: Record<string, string[]>;
    features?: Record<string, { enabled: boolean }>;
    pkce?: { required?: () => boolean };
    findAccount?: (ctx: unknown, id: string) => Promise<Account | undefined>;
  }

  export default class Provider {
    constructor(issuer: string, configuration: Configuration);
    readonly issuer: string;
    callback(): (req: IncomingMessage, res: ServerResponse) => void;
    use(middleware: Middleware): this;
  }
}
