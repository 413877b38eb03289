import { z } from "zod";

// An organisation's single sign-on connection (decision 0210), shared by the API and the page.

/** Roles an identity provider's group may give: never owner (owners are made by owners). */
export const SSO_ROLES = ["admin", "member", "viewer", "billing"] as const;
export const ssoRoleSchema = z.enum(SSO_ROLES);
export type SsoRole = z.infer<typeof ssoRoleSchema>;

export const ssoSlugSchema = z
  .string()
  .trim()
  .toLowerCase()
  .regex(
    /^[a-z0-9](?:[a-z0-9-]{0,38}[a-z0-9])?$/,
    "1 to 40 lowercase letters, digits and inner hyphens",
  );

const text = (max: number) => z.string().trim().min(1, "is required").max(max);
const httpUrl = z
  .string()
  .trim()
  .max(500)
  .pipe(z.url({ protocol: /^https?$/, error: "must be an http(s) URL" }));

const common = {
  slug: ssoSlugSchema,
  enabled: z.boolean().default(true),
  groupsAttribute: text(200).default("groups"),
  /** {"<group>": "<role>"}: a member of several mapped groups gets the highest of their roles. */
  groupRoles: z
    .record(text(256), ssoRoleSchema)
    .refine((m) => Object.keys(m).length <= 100, "at most 100 groups")
    .default({}),
  defaultRole: ssoRoleSchema.default("member"),
};

export const oidcConnectionSchema = z.object({
  protocol: z.literal("oidc"),
  ...common,
  issuer: httpUrl,
  clientId: text(255),
  /** Required when the connection is new or its issuer changes; kept when left out. */
  clientSecret: text(1000).optional(),
});

/** A PEM or bare base64 X.509 certificate (the IdP's signing certificate). */
const certificate = z
  .string()
  .trim()
  .max(20_000)
  .transform((s) => s.replace(/-----(BEGIN|END) CERTIFICATE-----/g, "").replace(/\s+/g, ""))
  .pipe(z.string().regex(/^[A-Za-z0-9+/]{100,}={0,2}$/, "must be a base64 X.509 certificate"));

export const samlConnectionSchema = z.object({
  protocol: z.literal("saml"),
  ...common,
  /** The IdP's metadata XML; or the three fields below. */
  metadataXml: z.string().max(200_000).optional(),
  idpEntityId: text(500).optional(),
  ssoUrl: httpUrl.optional(),
  certificate: certificate.optional(),
});

/** PUT /api/organizations/:id/sso: the whole connection. */
export const ssoConnectionSchema = z.discriminatedUnion("protocol", [
  oidcConnectionSchema,
  samlConnectionSchema,
]);
export type SsoConnectionInput = z.infer<typeof ssoConnectionSchema>;

/** The sign-in page's "Sign in with SSO" field: an organisation's slug (or, later, an email). */
export const ssoLookupSchema = z.object({ org: text(254) });

/** The organisation page's SSO form: text fields; `groupRoles` one "group = role" a line. */
export const ssoFormSchema = z.object({
  protocol: z.enum(["oidc", "saml"]),
  slug: z.string().max(40),
  enabled: z.literal("on").optional(),
  issuer: z.string().max(500).optional(),
  clientId: z.string().max(255).optional(),
  clientSecret: z.string().max(1000).optional(),
  metadataXml: z.string().max(200_000).optional(),
  idpEntityId: z.string().max(500).optional(),
  ssoUrl: z.string().max(500).optional(),
  certificate: z.string().max(20_000).optional(),
  groupsAttribute: z.string().max(200).optional(),
  groupRoles: z.string().max(20_000).optional(),
  defaultRole: ssoRoleSchema.optional(),
});

/** The form's fields as the API's body (checked by ssoConnectionSchema afterwards). */
export function ssoInputFromForm(form: z.infer<typeof ssoFormSchema>): unknown {
  const groupRoles = Object.fromEntries(
    (form.groupRoles ?? "")
      .split("\n")
      .map((line) => line.split("="))
      .filter((parts) => parts.length === 2)
      .map(([group = "", role = ""]) => [group.trim(), role.trim()]),
  );
  return { ...form, enabled: form.enabled === "on", groupRoles };
}
