import { createHash, randomBytes } from "node:crypto";

// State shared by the fake OAuth providers (google.ts, github.ts): what the "provider" knows
// about its accounts, the codes it issued (with their PKCE challenge) and its access tokens.

export interface FakeAccount {
  id: string;
  email: string;
  emailVerified: boolean;
  name: string;
}

export interface FakeProvider {
  clientId: string;
  clientSecret: string;
  /** The account that "signs in" at the next authorize call; undefined = consent denied. */
  nextAccount: FakeAccount | undefined;
  codes: Map<string, { challenge: string; redirectUri: string; account: FakeAccount }>;
  tokens: Map<string, FakeAccount>;
  /** Every token request's verdict, for assertions. */
  tokenRequests: Array<{ ok: boolean; reason?: string }>;
}

export const fakeProvider = (clientId: string): FakeProvider => ({
  clientId,
  clientSecret: `${clientId}-secret`,
  nextAccount: undefined,
  codes: new Map(),
  tokens: new Map(),
  tokenRequests: [],
});

const s256 = (verifier: string) => createHash("sha256").update(verifier).digest("base64url");

/** The provider's authorize page, after the person (dis)agreed: a redirect to the app. */
export function authorize(p: FakeProvider, url: URL): Response {
  const redirectUri = url.searchParams.get("redirect_uri") ?? "";
  const state = url.searchParams.get("state") ?? "";
  const back = new URL(redirectUri);
  if (
    url.searchParams.get("client_id") !== p.clientId ||
    url.searchParams.get("response_type") !== "code" ||
    url.searchParams.get("code_challenge_method") !== "S256" ||
    !url.searchParams.get("code_challenge") ||
    !state
  ) {
    return new Response("bad authorize request", { status: 400 });
  }
  back.searchParams.set("state", state);
  if (!p.nextAccount) {
    back.searchParams.set("error", "access_denied");
    back.searchParams.set("error_description", "The user denied the request");
  } else {
    const code = randomBytes(16).toString("hex");
    p.codes.set(code, {
      challenge: url.searchParams.get("code_challenge")!,
      redirectUri,
      account: p.nextAccount,
    });
    back.searchParams.set("code", code);
  }
  return new Response(null, { status: 302, headers: { location: back.toString() } });
}

/** The token endpoint: client authentication, the code, and the PKCE verifier are checked. */
export async function token(
  p: FakeProvider,
  request: Request,
): Promise<{ ok: true; accessToken: string } | { ok: false; error: string }> {
  const form = new URLSearchParams(await request.text());
  const basic = `Basic ${Buffer.from(`${p.clientId}:${p.clientSecret}`).toString("base64")}`;
  const fail = (reason: string) => {
    p.tokenRequests.push({ ok: false, reason });
    return { ok: false as const, error: reason };
  };
  if (request.headers.get("authorization") !== basic) return fail("invalid_client");
  if (form.get("grant_type") !== "authorization_code") return fail("unsupported_grant_type");
  const issued = p.codes.get(form.get("code") ?? "");
  if (!issued) return fail("invalid_grant");
  p.codes.delete(form.get("code")!);
  if (form.get("redirect_uri") !== issued.redirectUri) return fail("invalid_grant");
  if (s256(form.get("code_verifier") ?? "") !== issued.challenge) return fail("invalid_grant");
  const accessToken = randomBytes(16).toString("hex");
  p.tokens.set(accessToken, issued.account);
  p.tokenRequests.push({ ok: true });
  return { ok: true, accessToken };
}

export function bearer(p: FakeProvider, request: Request): FakeAccount | undefined {
  const m = /^Bearer (.+)$/.exec(request.headers.get("authorization") ?? "");
  return m ? p.tokens.get(m[1]!) : undefined;
}
