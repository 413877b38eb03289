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
