import { type Profile, SAML, ValidateInResponseTo } from "@node-saml/node-saml";
import { z } from "zod";
import type { User } from "../accounts/model.server.ts";
import { logger } from "../platform/logger.server.ts";
import { type SamlSso, serviceProviderUrls } from "./connections.server.ts";
import { firstSighting, REQUEST_TTL_MS, requestCache } from "./saml-state.server.ts";
import { SsoRefused, signInWithSso } from "./sign-in.server.ts";

// An organisation's SAML 2.0 service provider (issue 49, decision 0211), over node-saml: it
// checks the XML signature (of the assertion, or of the response around it), the audience,
// NotBefore/NotOnOrAfter and InResponseTo. What it leaves out is checked here: the IdP's entity
// id, the assertion's Recipient and the response's Destination (our ACS URL), and replay (an
// assertion id accepted once is refused until it expires).

export const CLOCK_SKEW_MS = 60_000;

function samlFor(c: SamlSso, metadata = false): SAML {
  const sp = serviceProviderUrls(c.organisationId);
  return new SAML({
    issuer: sp.samlEntityId,
    callbackUrl: sp.samlAcsUrl,
    entryPoint: c.ssoUrl,
    idpCert: c.certificate,
    audience: sp.samlEntityId,
    // At least one signature covering the assertion: the assertion's own or the response's.
    // The metadata asks for signed assertions, which every IdP can do.
    wantAssertionsSigned: metadata,
    wantAuthnResponseSigned: false,
    acceptedClockSkewMs: CLOCK_SKEW_MS,
    // IdP-initiated answers carry no InResponseTo; an SP-initiated one must name our request.
    validateInResponseTo: ValidateInResponseTo.ifPresent,
    requestIdExpirationPeriodMs: REQUEST_TTL_MS,
    cacheProvider: requestCache(c.organisationId),
    identifierFormat: null,
    disableRequestedAuthnContext: true,
  });
}

/** The SP metadata an IdP is given (entity id, ACS URL, signed assertions wanted). */
export function samlMetadata(c: SamlSso): string {
  return samlFor(c, true).generateServiceProviderMetadata(null, null);
}

/** The IdP's sign-in URL with our AuthnRequest (HTTP-Redirect) and RelayState. */
export function samlSignInUrl(c: SamlSso, relayState: string): Promise<string> {
  return samlFor(c).getAuthorizeUrlAsync(relayState, undefined, {});
}

const attrs = z.record(z.string(), z.unknown());

function values(v: unknown): string[] {
  const list = Array.isArray(v) ? v : [v];
  return list.filter((x): x is string => typeof x === "string" && x.length > 0).slice(0, 256);
}

const EMAIL_ATTRIBUTES = [
  "email",
  "mail",
  "urn:oid:0.9.2342.19200300.100.1.3",
  "http://schemas.xmlsoap.org/ws/2005/05/identity/claims/emailaddress",
];
const NAME_ATTRIBUTES = [
  "name",
  "displayName",
  "urn:oid:2.16.840.1.113730.3.1.241",
  "http://schemas.xmlsoap.org/ws/2005/05/identity/claims/name",
];

/** The assertion's parts node-saml parsed (xml2js, prefixes stripped) that we check. */
const assertionSchema = z.object({
  Assertion: z.object({
    $: z.object({ ID: z.string().min(1) }),
    Subject: z
      .array(
        z.object({
          SubjectConfirmation: z
            .array(
              z.object({
                SubjectConfirmationData: z
                  .array(
                    z.object({
                      $: z.object({
                        Recipient: z.string().optional(),
                        NotOnOrAfter: z.string().optional(),
                      }),
                    }),
                  )
                  .optional(),
              }),
            )
            .optional(),
        }),
      )
      .min(1),
    Conditions: z
      .array(z.object({ $: z.object({ NotOnOrAfter: z.string().optional() }).optional() }))
      .optional(),
  }),
});

const refuse = (message: string, reason = "saml_invalid") => new SsoRefused(401, message, reason);

/** Our checks on what node-saml verified: issuer, Recipient, Destination, replay. */
async function checkAssertion(c: SamlSso, profile: Profile): Promise<void> {
  const sp = serviceProviderUrls(c.organisationId);
  if (profile.issuer !== c.idpEntityId) throw refuse("assertion issued by another IdP");
  const parsed = assertionSchema.safeParse(profile.getAssertion?.());
  if (!parsed.success) throw refuse("assertion lacks its ID or Subject");
  const assertion = parsed.data.Assertion;
  const confirmations = assertion.Subject.flatMap((s) => s.SubjectConfirmation ?? []).flatMap(
    (s) => s.SubjectConfirmationData ?? [],
  );
  if (!confirmations.some((d) => d.$.Recipient === sp.samlAcsUrl)) {
    throw refuse("assertion is for another recipient");
  }
  const destination = /<(?:\w+:)?Response\b[^>]*\sDestination="([^"]*)"/.exec(
    profile.getSamlResponseXml?.() ?? "",
  )?.[1];
  if (destination !== undefined && destination !== sp.samlAcsUrl) {
    throw refuse("response is for another destination");
  }
  const ends = [
    ...confirmations.map((d) => d.$.NotOnOrAfter),
    ...(assertion.Conditions ?? []).map((x) => x.$?.NotOnOrAfter),
  ]
    .filter((s): s is string => Boolean(s))
    .map((s) => Date.parse(s))
    .filter(Number.isFinite);
  // Without an end the id is kept for a day: longer than any assertion's life in practice.
  const until = (ends.length ? Math.max(...ends) : Date.now() + 86_400_000) + CLOCK_SKEW_MS;
  if (!(await firstSighting(c.organisationId, assertion.$.ID, new Date(until)))) {
    throw refuse("assertion was used before", "saml_replay");
  }
}

/** Which check a node-saml refusal failed, for the sign-in page (the detail is logged). */
function samlReason(error: Error): string {
  const m = error.message;
  if (/signature/i.test(m)) return "saml_signature";
  if (/audience/i.test(m)) return "saml_audience";
  if (/expired|not yet valid|NotBefore|NotOnOrAfter/i.test(m)) return "saml_expired";
  if (/InResponseTo/i.test(m)) return "saml_request";
  return "saml_invalid";
}

/** The ACS: the account the IdP's POSTed response signs in, or an SsoRefused naming why not. */
export async function samlSignIn(c: SamlSso, samlResponse: string): Promise<User> {
  let profile: Profile | null;
  try {
    ({ profile } = await samlFor(c).validatePostResponseAsync({ SAMLResponse: samlResponse }));
  } catch (error) {
    const e = error instanceof Error ? error : new Error(String(error));
    logger().info({ err: e, organisation: c.organisationId }, "SAML response refused");
    throw refuse(e.message, samlReason(e));
  }
  if (!profile) throw refuse("no assertion in the response");
  await checkAssertion(c, profile);
  const a = attrs.parse(profile.attributes ?? {});
  const pick = (names: string[]) => names.flatMap((n) => values(a[n]))[0];
  const email = z.email().safeParse(pick(EMAIL_ATTRIBUTES) ?? profile.email ?? profile.nameID);
  if (!email.success) throw refuse("the assertion gives no email address", "sso_no_email");
  return signInWithSso(c, {
    subject: profile.nameID,
    email: email.data,
    name: pick(NAME_ATTRIBUTES),
    groups: c.groupsAttribute in a ? values(a[c.groupsAttribute]) : null,
  });
}
