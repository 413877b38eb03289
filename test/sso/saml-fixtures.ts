import { readFileSync } from "node:fs";

// Keys and certificates of the test SAML identity providers (made for these tests with openssl,
// self-signed, valid for a century; no secret of anything real): the IdP's own, and another
// that signs what an attacker would sign.

const read = (name: string) => readFileSync(new URL(`./keys/${name}`, import.meta.url), "utf8");

export const TEST_IDP_KEY = read("idp.key.pem");
export const TEST_IDP_CERT = read("idp.crt.pem");
export const OTHER_KEY = read("other.key.pem");
export const OTHER_CERT = read("other.crt.pem");

/** A certificate's base64 body (what metadata and the settings carry). */
export const certBase64 = (pem: string) =>
  pem.replace(/-----(BEGIN|END) CERTIFICATE-----/g, "").replace(/\s+/g, "");

export const TEST_CERT_BASE64 = certBase64(TEST_IDP_CERT);

/** An IdP's metadata as IdPs publish it: entity id, HTTP-Redirect SSO URL, signing cert. */
export function idpMetadataXml(entityId: string, ssoUrl: string, cert = TEST_IDP_CERT): string {
  return `<?xml version="1.0"?>
<md:EntityDescriptor xmlns:md="urn:oasis:names:tc:SAML:2.0:metadata" entityID="${entityId}">
  <md:IDPSSODescriptor WantAuthnRequestsSigned="false" protocolSupportEnumeration="urn:oasis:names:tc:SAML:2.0:protocol">
    <md:KeyDescriptor use="signing">
      <ds:KeyInfo xmlns:ds="http://www.w3.org/2000/09/xmldsig#">
        <ds:X509Data><ds:X509Certificate>${certBase64(cert)}</ds:X509Certificate></ds:X509Data>
      </ds:KeyInfo>
    </md:KeyDescriptor>
    <md:SingleSignOnService Binding="urn:oasis:names:tc:SAML:2.0:bindings:HTTP-POST" Location="${ssoUrl}/post"/>
    <md:SingleSignOnService Binding="urn:oasis:names:tc:SAML:2.0:bindings:HTTP-Redirect" Location="${ssoUrl}"/>
  </md:IDPSSODescriptor>
</md:EntityDescriptor>`;
}
