import { z } from "zod";

// The organisation settings' SCIM requests (decision 0213).

/** PUT /api/organizations/:id/scim/group-roles: the whole mapping (owner is never mapped). */
export const groupRolesSchema = z.object({
  groupRoles: z
    .array(
      z.object({
        group: z.string().trim().min(1, "is required").max(200),
        role: z.enum(["admin", "member", "viewer", "billing"]),
      }),
    )
    .max(100),
});
