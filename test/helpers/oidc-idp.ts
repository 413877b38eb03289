import http from "node:http";
import type { AddressInfo } from "node:net";
import { decodeJwt, exportJWK, generateKeyPair, type JWTPayload, SignJWT } from "jose";
import Provider from "oidc-provider";

// A real OpenID Provider (oidc-provider, certified) on loopback for the OIDC sign-in tests, with
// its development interactions (a login form taking any login, then a consent form). It signs
// with a key the test holds, so a test can re-sign a changed ID token (`tamper`) as the provider
// would, and counts discovery fetches.

export interface IdpAccount {
  email?: string;
  email_verified?: boolean;
  name?: string;
  groups?: string[];
}

export interface TestIdp {
  issuer: string;
  clientId: string;
  clientSecret: string;
  /** Accounts by login (the login form's value is the subject). */
  accounts: Map<string, IdpAccount>;
  /** Replaces the token endpoint's ID token while set. */
  tamper: ((idToken: string) => Promise<string> | string) | undefined;
  discoveryRequests: number;
  /** Signs `claims` with the provider's own key (what a changed token re-signed looks like). */
  sign(claims: JWTPayload): Promise<string>;
  close(): Promise<void>;
}

/** `redirectUri` may be given late (a function), for an app whose port is known later. */
export async function startTestIdp(redirectUri: string | (() => string)): Promise<TestIdp> {
  const server = http.createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const { privateKey } = await generateKeyPair("RS256", { extractable: true });
  const kid = "test-idp-key";
  const jwk = { ...(await exportJWK(privateKey)), kid, alg: "RS256", use: "sig" };

  const idp: TestIdp = {
    issuer,
    clientId: "platform-test",
    clientSecret: "platform-test-secret-0123456789abcdef",
    accounts: new Map(),
    tamper: undefined,
    discoveryRequests: 0,
    sign: (claims) =>
      new SignJWT(claims).setProtectedHeader({ alg: "RS256", kid, typ: "JWT" }).sign(privateKey),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };

  const createProvider = () =>
    new Provider(issuer, {
      clients: [
        {
          client_id: idp.clientId,
          client_secret: idp.clientSecret,
          redirect_uris: [typeof redirectUri === "string" ? redirectUri : redirectUri()],
          grant_types: ["authorization_code"],
          response_types: ["code"],
        },
      ],
      jwks: { keys: [jwk] },
      cookies: { keys: ["test-idp-cookie-key"] },
      claims: {
        openid: ["sub"],
        email: ["email", "email_verified"],
        profile: ["name"],
        groups: ["groups"],
      },
      features: { devInteractions: { enabled: true } },
      pkce: { required: () => true },
      findAccount: async (_ctx, id) => {
        const account = idp.accounts.get(id);
        if (!account) return undefined;
        return { accountId: id, claims: async () => ({ sub: id, ...account }) };
      },
    });
  let handler: http.RequestListener | undefined;
  server.on("request", (req, res) => {
    if (!handler) {
      const provider = createProvider();
      provider.use(async (ctx, next) => {
        if (ctx.path === "/.well-known/openid-configuration") idp.discoveryRequests++;
        await next();
        const body = ctx.body as { id_token?: unknown } | undefined;
        if (ctx.path === "/token" && idp.tamper && typeof body?.id_token === "string") {
          ctx.body = { ...body, id_token: await idp.tamper(body.id_token) };
        }
      });
      handler = provider.callback();
    }
    handler(req, res);
  });
  return idp;
}

/** An ID token's claims changed and re-signed with the provider's key. */
export const resign =
  (idp: TestIdp, change: (claims: JWTPayload) => JWTPayload) => (idToken: string) =>
    idp.sign(change(decodeJwt(idToken)));

/** A browser's cookies for one origin (enough for the provider's). */
export class CookieJar {
  private readonly cookies = new Map<string, string>();

  take(response: Response): void {
    for (const line of response.headers.getSetCookie()) {
      const [pair = "", ...attributes] = line.split(";");
      const eq = pair.indexOf("=");
      const name = pair.slice(0, eq).trim();
      const gone = attributes.some(
        (a) => /^\s*max-age=0\s*$/i.test(a) || /expires=thu, 01 jan 1970/i.test(a),
      );
      if (gone) this.cookies.delete(name);
      else this.cookies.set(name, pair.slice(eq + 1).trim());
    }
  }

  header(): string {
    return [...this.cookies].map(([k, v]) => `${k}=${v}`).join("; ");
  }
}

/**
 * Walks the browser through the provider from its authorization URL: follows redirects by hand,
 * signs in as `login` on the login form, accepts the consent form (or aborts at the first
 * form when `abort`), and returns the URL the provider sends the browser back to.
 */
export async function throughProvider(
  authorizationUrl: string,
  login: string,
  opts: { jar?: CookieJar; abort?: boolean; backTo: string },
): Promise<URL> {
  const jar = opts.jar ?? new CookieJar();
  let url = authorizationUrl;
  let post: URLSearchParams | undefined;
  for (let hop = 0; hop < 20; hop++) {
    if (url.startsWith(opts.backTo)) return new URL(url);
    const response = await fetch(url, {
      method: post ? "POST" : "GET",
      redirect: "manual",
      headers: {
        cookie: jar.header(),
        ...(post ? { "content-type": "application/x-www-form-urlencoded" } : {}),
      },
      ...(post ? { body: post.toString() } : {}),
    });
    jar.take(response);
    post = undefined;
    const location = response.headers.get("location");
    if (location) {
      url = new URL(location, url).toString();
      continue;
    }
    const page = await response.text();
    const prompt = /name="prompt" value="(login|consent)"/.exec(page)?.[1];
    if (response.status !== 200 || !prompt) {
      throw new Error(`the provider answered ${response.status}: ${page.slice(0, 300)}`);
    }
    if (opts.abort) {
      url = `${url}/abort`;
      continue;
    }
    post = new URLSearchParams(
      prompt === "login" ? { prompt, login, password: "any" } : { prompt },
    );
  }
  throw new Error("too many redirects at the provider");
}
