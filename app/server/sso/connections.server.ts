import { z } from "zod";
import { type SsoConnectionInput, type SsoRole, ssoRoleSchema } from "../../schemas/sso.ts";
import { oidcConfig } from "../accounts/oidc.server.ts";
import {
  type OrganisationDomain,
  organisationForEmailDomain,
  setRequireSso,
} from "../organisations/domains.server.ts";
import { requirePermission } from "../organisations/organisations.server.ts";
import { recordAudit } from "../platform/audit.server.ts";
import { seal, unseal } from "../platform/crypto.server.ts";
import { db } from "../platform/db.server.ts";
import { env } from "../platform/env.server.ts";
import { DomainError } from "../platform/errors.server.ts";
import { parseIdpMetadata } from "./saml-metadata.server.ts";

// An organisation's single sign-on connection (issue 49, decision 0210): one per organisation,
// OpenID Connect or SAML 2.0, set by whoever may manage its members. The OIDC client secret is
// sealed at rest and never shown again; the rest is shown to those who may change it.

interface Common {
  organisationId: string;
  slug: string;
  enabled: boolean;
  groupsAttribute: string;
  groupRoles: Record<string, SsoRole>;
  defaultRole: SsoRole;
}

export interface OidcSso extends Common {
  protocol: "oidc";
  issuer: string;
  clientId: string;
  clientSecret: string;
}

export interface SamlSso extends Common {
  protocol: "saml";
  idpEntityId: string;
  ssoUrl: string;
  certificate: string;
}

/** A connection as the sign-in uses it (the secret unsealed). */
export type SsoConnection = OidcSso | SamlSso;

interface Row {
  organisation_id: string;
  slug: string;
  protocol: "oidc" | "saml";
  enabled: boolean;
  oidc_issuer: string | null;
  oidc_client_id: string | null;
  oidc_client_secret_sealed: string | null;
  saml_idp_entity_id: string | null;
  saml_sso_url: string | null;
  saml_idp_certificate: string | null;
  groups_attribute: string;
  group_roles: unknown;
  default_role: SsoRole;
}

const groupRolesSchema = z.record(z.string(), ssoRoleSchema);

function toConnection(r: Row): SsoConnection {
  const common: Common = {
    organisationId: r.organisation_id,
    slug: r.slug,
    enabled: r.enabled,
    groupsAttribute: r.groups_attribute,
    groupRoles: groupRolesSchema.parse(r.group_roles),
    defaultRole: ssoRoleSchema.parse(r.default_role),
  };
  if (r.protocol === "oidc") {
    return {
      ...common,
      protocol: "oidc",
      issuer: z.string().parse(r.oidc_issuer),
      clientId: z.string().parse(r.oidc_client_id),
      clientSecret: unseal(z.string().parse(r.oidc_client_secret_sealed)),
    };
  }
  return {
    ...common,
    protocol: "saml",
    idpEntityId: z.string().parse(r.saml_idp_entity_id),
    ssoUrl: z.string().parse(r.saml_sso_url),
    certificate: z.string().parse(r.saml_idp_certificate),
  };
}

async function rowOf(organisationId: string): Promise<Row | undefined> {
  const [row] = await db()<Row[]>`
    select * from organisation_sso where organisation_id = ${organisationId}`;
  return row;
}

/** The organisation's connection, enabled or not; undefined when it has none. */
export async function connectionOf(organisationId: string): Promise<SsoConnection | undefined> {
  const row = await rowOf(organisationId);
  return row && toConnection(row);
}

/**
 * The enabled connection a sign-in names: an organisation's slug, or a work email, whose domain
 * the organisation verified (decision 0212).
 */
export async function ssoConnectionFor(
  lookup: { slug: string } | { email: string },
): Promise<SsoConnection | undefined> {
  if (!("slug" in lookup)) {
    const owner = await organisationForEmailDomain(lookup.email);
    const c = owner && (await connectionOf(owner.organisationId));
    return c?.enabled ? c : undefined;
  }
  const [row] = await db()<Row[]>`
    select s.* from organisation_sso s join users o on o.id = s.organisation_id
    where s.slug = ${lookup.slug.trim().toLowerCase()} and s.enabled
      and o.kind = 'organisation'`;
  return row && toConnection(row);
}

/**
 * Turns the SSO requirement of a verified domain on or off. Turning it on needs a way to sign in
 * by SSO that works for its people: the organisation's enabled connection, or the install-wide
 * OIDC (decision 0212). Without one, everyone at the domain but the owners would be locked out.
 */
export async function requireSsoForDomain(
  organisationId: string,
  personId: string,
  domainId: string,
  requireSso: boolean,
): Promise<OrganisationDomain> {
  if (requireSso && !oidcConfig()) {
    const connection = await connectionOf(organisationId);
    if (!connection?.enabled) {
      throw new DomainError(
        409,
        "Set up and enable the organisation's single sign-on before requiring it for a domain",
      );
    }
  }
  return setRequireSso(organisationId, personId, domainId, requireSso);
}

/** Whether any organisation signs in through SSO (the sign-in page shows the form then). */
export async function anySsoConnection(): Promise<boolean> {
  const [row] = await db()`select 1 from organisation_sso where enabled limit 1`;
  return row !== undefined;
}

/** Where the identity provider reaches us for this organisation (all under APP_URL). */
export function serviceProviderUrls(organisationId: string) {
  const base = `${env().APP_URL.replace(/\/$/, "")}/api/auth/sso/${organisationId}`;
  return {
    signInUrl: base,
    oidcRedirectUri: `${base}/oidc/callback`,
    samlEntityId: `${base}/saml/metadata`,
    samlMetadataUrl: `${base}/saml/metadata`,
    samlAcsUrl: `${base}/saml/acs`,
  };
}

/** What the settings show: never the client secret, only whether one is set. */
export type SsoView = (Omit<OidcSso, "clientSecret"> & { clientSecretSet: true }) | SamlSso;

export interface SsoSettings {
  connection: SsoView | null;
  serviceProvider: ReturnType<typeof serviceProviderUrls>;
}

function view(c: SsoConnection): SsoView {
  if (c.protocol === "saml") return c;
  const { clientSecret: _, ...rest } = c;
  return { ...rest, clientSecretSet: true };
}

/** The settings (members.manage; 404 for a non-member, 403 for another role). */
export async function ssoSettingsOf(
  organisationId: string,
  personId: string,
): Promise<SsoSettings> {
  await requirePermission(organisationId, personId, "members.manage", db());
  const c = await connectionOf(organisationId);
  return { connection: c ? view(c) : null, serviceProvider: serviceProviderUrls(organisationId) };
}

function samlFields(input: Extract<SsoConnectionInput, { protocol: "saml" }>) {
  if (input.metadataXml?.trim()) return parseIdpMetadata(input.metadataXml);
  if (!input.idpEntityId || !input.ssoUrl || !input.certificate) {
    throw new DomainError(
      400,
      "A SAML connection needs metadataXml, or idpEntityId, ssoUrl and certificate",
    );
  }
  return { entityId: input.idpEntityId, ssoUrl: input.ssoUrl, certificate: input.certificate };
}

/** Sets the whole connection (members.manage), audited; 409 when the slug is another's. */
export async function setSsoConnection(
  organisationId: string,
  personId: string,
  input: SsoConnectionInput,
): Promise<SsoSettings> {
  await requirePermission(organisationId, personId, "members.manage", db());
  const old = await rowOf(organisationId);
  let oidc = {
    issuer: null as string | null,
    clientId: null as string | null,
    secret: null as string | null,
  };
  let saml = {
    entityId: null as string | null,
    ssoUrl: null as string | null,
    certificate: null as string | null,
  };
  if (input.protocol === "oidc") {
    // A secret belongs to its client at its issuer: a new one of either needs a new secret.
    const keep =
      old?.protocol === "oidc" &&
      old.oidc_issuer === input.issuer &&
      old.oidc_client_id === input.clientId
        ? old.oidc_client_secret_sealed
        : null;
    const secret = input.clientSecret ? seal(input.clientSecret) : keep;
    if (!secret) throw new DomainError(400, "clientSecret: is required for a new OIDC client");
    oidc = { issuer: input.issuer.replace(/\/$/, ""), clientId: input.clientId, secret };
  } else {
    saml = samlFields(input);
  }
  await db().begin(async (t) => {
    const [taken] = await t`select 1 from organisation_sso
      where slug = ${input.slug} and organisation_id <> ${organisationId}`;
    if (taken) throw new DomainError(409, "This slug is taken by another organisation");
    await t`
      insert into organisation_sso (organisation_id, slug, protocol, enabled, oidc_issuer,
        oidc_client_id, oidc_client_secret_sealed, saml_idp_entity_id, saml_sso_url,
        saml_idp_certificate, groups_attribute, group_roles, default_role, updated_by)
      values (${organisationId}, ${input.slug}, ${input.protocol}, ${input.enabled},
        ${oidc.issuer}, ${oidc.clientId}, ${oidc.secret}, ${saml.entityId}, ${saml.ssoUrl},
        ${saml.certificate}, ${input.groupsAttribute}, ${t.json(input.groupRoles)},
        ${input.defaultRole}, ${personId})
      on conflict (organisation_id) do update set
        slug = excluded.slug, protocol = excluded.protocol, enabled = excluded.enabled,
        oidc_issuer = excluded.oidc_issuer, oidc_client_id = excluded.oidc_client_id,
        oidc_client_secret_sealed = excluded.oidc_client_secret_sealed,
        saml_idp_entity_id = excluded.saml_idp_entity_id, saml_sso_url = excluded.saml_sso_url,
        saml_idp_certificate = excluded.saml_idp_certificate,
        groups_attribute = excluded.groups_attribute, group_roles = excluded.group_roles,
        default_role = excluded.default_role, updated_by = excluded.updated_by,
        updated_at = now()`;
    await recordAudit(
      {
        action: "sso.configured",
        userId: organisationId,
        target: organisationId,
        details: {
          protocol: input.protocol,
          slug: input.slug,
          enabled: input.enabled,
          idp: oidc.issuer ?? saml.entityId,
          rotated: input.protocol === "oidc" && Boolean(input.clientSecret),
        },
      },
      t,
    );
  });
  return ssoSettingsOf(organisationId, personId);
}

/** Removes the connection (members.manage), audited; 404 when there is none. */
export async function removeSsoConnection(organisationId: string, personId: string): Promise<void> {
  await requirePermission(organisationId, personId, "members.manage", db());
  await db().begin(async (t) => {
    const gone = await t`delete from organisation_sso where organisation_id = ${organisationId}`;
    if (gone.count === 0) throw new DomainError(404, "This organisation has no SSO connection");
    await recordAudit({ action: "sso.removed", userId: organisationId, target: organisationId }, t);
  });
}
