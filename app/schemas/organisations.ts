import { z } from "zod";
import { ROLES } from "../server/organisations/roles.server.ts";

// Organisations' request schemas (decision 0203), shared by the API and the pages.

export const organisationNameSchema = z.object({
  name: z.string().trim().min(1, "is required").max(80, "at most 80 characters"),
});

export const organisationParams = z.object({ id: z.string().min(1).max(64) });
export const memberParams = organisationParams.extend({ userId: z.string().min(1).max(64) });

export const roleSchema = z.enum(ROLES);

export const newMemberSchema = z.object({
  email: z.string().trim().email("must be an email address").max(254),
  role: roleSchema,
});

export const memberRoleSchema = z.object({ role: roleSchema });

/** An invitation asks an address in with a role (decision 0204). */
export const newInvitationSchema = newMemberSchema;
export const invitationParams = organisationParams.extend({
  invitationId: z.string().min(1).max(64),
});

/** The token of an invitation link (<APP_URL>/invitations/<token>). */
export const invitationToken = z.string().trim().min(1, "is required").max(200);
export const acceptInvitationSchema = z.object({ token: invitationToken });

/** The seats an operator gives an organisation on top of its plan's (the /ops console's form). */
export const extraSeatsSchema = z.object({
  seats: z.coerce
    .number()
    .int("a whole number")
    .min(0, "at least 0")
    .max(100_000, "at most 100000"),
});

// Printable text on one line: these go into a mail header and a subject (decision 0207).
const oneLine = (max: number) =>
  z
    .string()
    .trim()
    .min(1, "is required")
    .max(max, `at most ${max} characters`)
    // biome-ignore lint/suspicious/noControlCharactersInRegex: refusing control characters
    .refine((s) => !/[\u0000-\u001f\u007f]/.test(s), "one line of text, no control characters");

/** An https URL of the logo the organisation's emails show (never http: mail clients warn). */
export const logoUrlSchema = z
  .string()
  .trim()
  .max(500, "at most 500 characters")
  .pipe(z.url({ protocol: /^https$/, hostname: z.regexes.domain, error: "must be an https URL" }));

/**
 * PATCH /api/organizations/:id/branding: the fields to change; null clears one (decision 0207).
 */
export const brandingSchema = z
  .object({
    displayName: oneLine(80).nullable().optional(),
    logoUrl: logoUrlSchema.nullable().optional(),
    senderName: oneLine(60).nullable().optional(),
  })
  .strict()
  .refine(
    (b) => Object.keys(b).length > 0,
    "nothing to change: give displayName, logoUrl or senderName",
  );

/** The organisation page's branding form: an empty field clears it (no JavaScript needed). */
export const brandingFormSchema = z.object({
  displayName: oneLine(80).optional(),
  logoUrl: logoUrlSchema.optional(),
  senderName: oneLine(60).optional(),
});

/** POST /api/organizations/:id/ownership: the member who becomes an owner (decision 0214). */
export const transferOwnershipSchema = z.object({ userId: z.string().trim().min(1).max(64) });

const utcDay = z
  .string()
  .regex(/^\d{4}-\d{2}-\d{2}$/, "a UTC day, YYYY-MM-DD")
  .refine(
    (s) =>
      !Number.isNaN(Date.parse(`${s}T00:00:00Z`)) &&
      new Date(`${s}T00:00:00Z`).toISOString().startsWith(s),
    "not a calendar day",
  );

/** GET /api/organizations/:id/spend: the UTC days counted, both inclusive (decision 0215). */
export const spendQuery = z.object({ from: utcDay.optional(), to: utcDay.optional() });

/** PUT /api/organizations/:id/seats: the extra seats bought in all (decision 0215). */
export const paidSeatsSchema = z.object({
  seats: z.number().int("a whole number").min(0, "at least 0").max(1000, "at most 1000"),
});

/** PUT /api/organizations/:id/billing-contact: the member who gets the invoices. */
export const billingContactSchema = z.object({ userId: z.string().trim().min(1).max(64) });
