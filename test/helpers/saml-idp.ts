import http from "node:http";
import type { AddressInfo } from "node:net";
import * as samlify from "samlify";

// A real SAML 2.0 identity provider (samlify) on loopback for the organisation SAML tests: it
// takes our AuthnRequest at its HTTP-Redirect SSO URL, and answers with a signed Response in an
// auto-submitting HTTP-POST form to our ACS, as a browser would carry it. samlify builds and
// signs every response; a test may change the values it signs (`override`: wrong audience,
// past NotOnOrAfter) or the signed XML afterwards (`tamper`), and may start an IdP-initiated
// sign-in (`idpInitiated`).

export interface SamlUser {
  nameId: string;
  email: string;
  name?: string;
  groups?: string[];
}

export interface SignedResponse {
  /** base64 SAMLResponse, as the form posts it. */
  samlResponse: string;
  relayState: string | undefined;
  /** The form's action (our ACS URL, from our metadata). */
  acsUrl: string;
}

export interface TestSamlIdp {
  entityId: string;
  ssoUrl: string;
  /** The person the next sign-in is. */
  user: SamlUser;
  /** Changes the values of the next responses before samlify signs them. */
  override: ((values: Record<string, string>) => Record<string, string>) | undefined;
  /** Changes a response's XML after it is signed (what an attacker on the way could do). */
  tamper: ((xml: string) => string) | undefined;
  /** Our SP metadata, read from our metadata URL by the test (the IdP's configuration). */
  trust(spMetadataXml: string): void;
  /** Answers an AuthnRequest URL (SP-initiated) as the IdP's SSO endpoint would. */
  answer(authnRequestUrl: string): Promise<SignedResponse>;
  /** A response to no request (IdP-initiated, e.g. from the IdP's app dashboard). */
  idpInitiated(relayState?: string): Promise<SignedResponse>;
  close(): Promise<void>;
}

const xmlEscape = (s: string) =>
  s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");

function attributeStatement(user: SamlUser, groupsAttribute: string): string {
  const attr = (name: string, values: string[]) =>
    `<saml:Attribute Name="${xmlEscape(name)}" NameFormat="urn:oasis:names:tc:SAML:2.0:attrname-format:basic">${values
      .map((v) => `<saml:AttributeValue xsi:type="xs:string">${xmlEscape(v)}</saml:AttributeValue>`)
      .join("")}</saml:Attribute>`;
  return `<saml:AttributeStatement>${[
    attr("email", [user.email]),
    ...(user.name ? [attr("name", [user.name])] : []),
    ...(user.groups ? [attr(groupsAttribute, user.groups)] : []),
  ].join("")}</saml:AttributeStatement>`;
}

export async function startTestSamlIdp(opts: {
  privateKey: string;
  certificate: string;
  groupsAttribute?: string;
}): Promise<TestSamlIdp> {
  // The IdP parses only our own AuthnRequests here; XML schema validation is the SP's concern.
  samlify.setSchemaValidator({ validate: async () => "skipped" });
  const server = http.createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const entityId = `${base}/metadata`;
  const ssoUrl = `${base}/sso`;
  const idp = samlify.IdentityProvider({
    entityID: entityId,
    privateKey: opts.privateKey,
    signingCert: opts.certificate,
    // Never used here; samlify warns without one.
    singleLogoutService: [
      { Binding: samlify.Constants.namespace.binding.redirect, Location: `${base}/slo` },
    ],
    singleSignOnService: [
      { Binding: samlify.Constants.namespace.binding.redirect, Location: ssoUrl },
    ],
    nameIDFormat: ["urn:oasis:names:tc:SAML:1.1:nameid-format:unspecified"],
  });
  let sp: ReturnType<typeof samlify.ServiceProvider> | undefined;

  const state: TestSamlIdp = {
    entityId,
    ssoUrl,
    user: { nameId: "nobody", email: "nobody@example.com" },
    override: undefined,
    tamper: undefined,
    trust(xml) {
      sp = samlify.ServiceProvider({ metadata: xml });
    },
    answer: async (url) => respond(new URL(url)),
    idpInitiated: async (relayState) => respond(undefined, relayState),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };

  async function respond(request: URL | undefined, relayState?: string): Promise<SignedResponse> {
    if (!sp) throw new Error("the test IdP trusts no service provider yet");
    let requestId = "";
    if (request) {
      const query = Object.fromEntries(request.searchParams);
      const parsed = await idp.parseLoginRequest(sp, "redirect", { query, octetString: "" });
      requestId = String(parsed.extract?.request?.id ?? "");
      relayState = query.RelayState;
    }
    const info = { extract: { request: { id: requestId } } };
    const user = state.user;
    const result = await idp.createLoginResponse(
      sp,
      info,
      "post",
      { email: user.nameId },
      {
        relayState,
        customTagReplacement: (template) => {
          const now = new Date();
          const later = new Date(now.getTime() + 5 * 60_000).toISOString();
          const acs = sp!.entityMeta.getAssertionConsumerService("post") as string;
          const id = `_${crypto.randomUUID()}`;
          let values: Record<string, string> = {
            ID: id,
            AssertionID: `_${crypto.randomUUID()}`,
            Destination: acs,
            Audience: sp!.entityMeta.getEntityID(),
            SubjectRecipient: acs,
            Issuer: entityId,
            IssueInstant: now.toISOString(),
            StatusCode: "urn:oasis:names:tc:SAML:2.0:status:Success",
            ConditionsNotBefore: now.toISOString(),
            ConditionsNotOnOrAfter: later,
            SubjectConfirmationDataNotOnOrAfter: later,
            NameIDFormat: "urn:oasis:names:tc:SAML:1.1:nameid-format:unspecified",
            NameID: user.nameId,
            InResponseTo: requestId,
          };
          if (state.override) values = state.override(values);
          let xml = template;
          for (const [k, v] of Object.entries(values)) xml = xml.replaceAll(`{${k}}`, xmlEscape(v));
          // An IdP-initiated answer has no InResponseTo at all.
          xml = xml.replaceAll(' InResponseTo=""', "");
          xml = xml
            .replace("{AuthnStatement}", "")
            .replace(
              "{AttributeStatement}",
              attributeStatement(user, opts.groupsAttribute ?? "groups"),
            );
          return { id, context: xml };
        },
      },
    );
    let samlResponse = result.context;
    if (state.tamper) {
      samlResponse = Buffer.from(
        state.tamper(Buffer.from(samlResponse, "base64").toString("utf8")),
      ).toString("base64");
    }
    const acsUrl = sp.entityMeta.getAssertionConsumerService("post") as string;
    return { samlResponse, relayState, acsUrl };
  }

  // The SSO URL over HTTP, for a browser: the auto-submitting POST form to our ACS.
  server.on("request", (req, res) => {
    const url = new URL(req.url ?? "/", base);
    if (url.pathname !== "/sso") {
      res.writeHead(404).end();
      return;
    }
    respond(url).then(
      (r) => {
        res.writeHead(200, { "content-type": "text/html; charset=utf-8" });
        res.end(
          `<!doctype html><html><body onload="document.forms[0].submit()"><form method="post" action="${xmlEscape(r.acsUrl)}"><input type="hidden" name="SAMLResponse" value="${r.samlResponse}"/>${
            r.relayState
              ? `<input type="hidden" name="RelayState" value="${xmlEscape(r.relayState)}"/>`
              : ""
          }<noscript><button type="submit">Continue</button></noscript></form></body></html>`,
        );
      },
      (error: unknown) => {
        res.writeHead(400, { "content-type": "text/plain" });
        res.end(String(error));
      },
    );
  });
  return state;
}
