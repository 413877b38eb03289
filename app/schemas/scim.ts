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

/** The settings page's mapping: one `Group name = role` a line (blank lines skipped). */
export const groupRolesText = z
  .string()
  .max(20_000)
  .optional()
  .transform((text, ctx) => {
    const pairs: { group: string; role: string }[] = [];
    for (const line of (text ?? "").split(/\r?\n/)) {
      if (!line.trim()) continue;
      const at = line.lastIndexOf("=");
      if (at < 1) {
        ctx.addIssue({ code: "custom", message: `"${line.trim()}": write Group name = role` });
        return z.NEVER;
      }
      pairs.push({ group: line.slice(0, at).trim(), role: line.slice(at + 1).trim() });
    }
    return pairs;
  })
  .pipe(groupRolesSchema.shape.groupRoles);
