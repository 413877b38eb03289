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
