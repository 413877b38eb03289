import { settingsSchema } from "../schemas/accounts.ts";
import { publicUser } from "../server/accounts/model.server.ts";
import { updateProfile } from "../server/accounts/users.server.ts";
import { apiRoute, endpoint } from "../server/api.server.ts";

export const { loader, action } = apiRoute({
  PATCH: endpoint({
    summary: "Update the profile (name, avatar as an https URL; empty avatar removes it)",
    description: "Emits user.updated.",
    auth: "user",
    body: settingsSchema,
    handler: async ({ auth, body }) => {
      const avatar = body.avatar === undefined ? undefined : body.avatar || null;
      const user = await updateProfile(auth.user.id, { name: body.name, avatar });
      return { success: true, user: { ...publicUser(user), avatar: user.avatarUrl } };
    },
  }),
});
