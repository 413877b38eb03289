import { organisationNameSchema } from "../schemas/organisations.ts";
import { apiRoute, endpoint } from "../server/api.server.ts";
import {
  createOrganisation,
  listMemberships,
} from "../server/organisations/organisations.server.ts";

export const { loader, action } = apiRoute({
  GET: endpoint({
    summary: "The organisations the caller is a member of, with their role in each",
    auth: "user",
    handler: async ({ auth }) => ({ organizations: await listMemberships(auth.person.id) }),
  }),
  POST: endpoint({
    summary: "Create an organisation; the caller is its owner",
    description:
      "An organisation owns agents, credits, keys and its audit log as a person does; members act for it by sending X-Organization: <id> with their role's permissions (GET /api/openapi.json names each endpoint's x-permission).",
    auth: "user",
    rateLimit: "organisations",
    status: 201,
    body: organisationNameSchema,
    handler: ({ auth, body }) => createOrganisation(auth.person.id, body.name),
  }),
});
