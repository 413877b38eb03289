import { DOMParser } from "@xmldom/xmldom";
import { DomainError } from "../platform/errors.server.ts";

// An identity provider's SAML metadata (SAML 2.0 Metadata, section 2.4.3): its entity id, the
// HTTP-Redirect single sign-on URL and its signing certificate. Read once, when an admin pastes
// it; only these three are kept. Nothing here verifies a signature: node-saml does, at the ACS.

const MD = "urn:oasis:names:tc:SAML:2.0:metadata";
const DS = "http://www.w3.org/2000/09/xmldsig#";
const REDIRECT = "urn:oasis:names:tc:SAML:2.0:bindings:HTTP-Redirect";

export interface IdpMetadata {
  entityId: string;
  ssoUrl: string;
  certificate: string;
}

const bad = (what: string) => new DomainError(400, `metadataXml: ${what}`);

export function parseIdpMetadata(xml: string): IdpMetadata {
  // A DOCTYPE can carry entity expansion; metadata never needs one.
  if (/<!DOCTYPE/i.test(xml)) throw bad("must not contain a DOCTYPE");
  const errors: string[] = [];
  const doc = new DOMParser({
    errorHandler: { error: (m) => errors.push(m), fatalError: (m) => errors.push(m) },
  }).parseFromString(xml, "text/xml");
  if (errors.length || !doc.documentElement) throw bad("is not well-formed XML");
  const entity =
    doc.documentElement.localName === "EntityDescriptor"
      ? doc.documentElement
      : doc.getElementsByTagNameNS(MD, "EntityDescriptor")[0];
  const entityId = entity?.getAttribute("entityID");
  if (!entity || !entityId) throw bad("has no EntityDescriptor with an entityID");
  const idp = entity.getElementsByTagNameNS(MD, "IDPSSODescriptor")[0];
  if (!idp) throw bad("describes no identity provider (IDPSSODescriptor)");
  const services = Array.from(idp.getElementsByTagNameNS(MD, "SingleSignOnService"));
  const ssoUrl = services
    .find((s) => s.getAttribute("Binding") === REDIRECT)
    ?.getAttribute("Location");
  if (!ssoUrl) throw bad("has no SingleSignOnService with the HTTP-Redirect binding");
  const keys = Array.from(idp.getElementsByTagNameNS(MD, "KeyDescriptor")).filter(
    (k) => (k.getAttribute("use") ?? "signing") === "signing",
  );
  const certificate = keys
    .map((k) => k.getElementsByTagNameNS(DS, "X509Certificate")[0]?.textContent)
    .find((c) => c?.trim())
    ?.replace(/\s+/g, "");
  if (!certificate) throw bad("has no signing certificate (KeyDescriptor use=signing)");
  return { entityId, ssoUrl, certificate };
}
