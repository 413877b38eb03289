import { env } from "../platform/env.server.ts";

// What the SCIM service says about itself (RFC 7643 §5–7): ServiceProviderConfig,
// ResourceTypes and Schemas, and the resources' locations under <APP_URL>/scim/v2.

export const USER_SCHEMA = "urn:ietf:params:scim:schemas:core:2.0:User";
export const GROUP_SCHEMA = "urn:ietf:params:scim:schemas:core:2.0:Group";
export const PATCH_SCHEMA = "urn:ietf:params:scim:api:messages:2.0:PatchOp";

export const scimBase = () => `${env().APP_URL.replace(/\/$/, "")}/scim/v2`;

export const serviceProviderConfig = () => ({
  schemas: ["urn:ietf:params:scim:schemas:core:2.0:ServiceProviderConfig"],
  patch: { supported: true },
  bulk: { supported: false, maxOperations: 0, maxPayloadSize: 0 },
  filter: { supported: true, maxResults: 200 },
  changePassword: { supported: false },
  sort: { supported: false },
  etag: { supported: false },
  authenticationSchemes: [
    {
      type: "oauthbearertoken",
      name: "Bearer token",
      description: "The organisation's SCIM token, made in its settings",
      primary: true,
    },
  ],
  meta: { resourceType: "ServiceProviderConfig", location: `${scimBase()}/ServiceProviderConfig` },
});

export const resourceTypes = () => [
  {
    schemas: ["urn:ietf:params:scim:schemas:core:2.0:ResourceType"],
    id: "User",
    name: "User",
    endpoint: "/Users",
    schema: USER_SCHEMA,
    meta: { resourceType: "ResourceType", location: `${scimBase()}/ResourceTypes/User` },
  },
  {
    schemas: ["urn:ietf:params:scim:schemas:core:2.0:ResourceType"],
    id: "Group",
    name: "Group",
    endpoint: "/Groups",
    schema: GROUP_SCHEMA,
    meta: { resourceType: "ResourceType", location: `${scimBase()}/ResourceTypes/Group` },
  },
];

const attr = (name: string, extra: Record<string, unknown> = {}) => ({
  name,
  type: "string",
  multiValued: false,
  required: false,
  caseExact: false,
  mutability: "readWrite",
  returned: "default",
  uniqueness: "none",
  ...extra,
});

export const schemas = () => [
  {
    schemas: ["urn:ietf:params:scim:schemas:core:2.0:Schema"],
    id: USER_SCHEMA,
    name: "User",
    description: "A person provisioned into the organisation",
    attributes: [
      attr("userName", { required: true, uniqueness: "server" }),
      attr("name", {
        type: "complex",
        subAttributes: [attr("givenName"), attr("familyName"), attr("formatted")],
      }),
      attr("displayName"),
      attr("active", { type: "boolean" }),
      attr("emails", {
        type: "complex",
        multiValued: true,
        subAttributes: [attr("value"), attr("type"), attr("primary", { type: "boolean" })],
      }),
      attr("groups", { type: "complex", multiValued: true, mutability: "readOnly" }),
    ],
    meta: { resourceType: "Schema", location: `${scimBase()}/Schemas/${USER_SCHEMA}` },
  },
  {
    schemas: ["urn:ietf:params:scim:schemas:core:2.0:Schema"],
    id: GROUP_SCHEMA,
    name: "Group",
    description: "A group whose display name may map to a role in the organisation",
    attributes: [
      attr("displayName", { required: true, uniqueness: "server" }),
      attr("members", {
        type: "complex",
        multiValued: true,
        subAttributes: [attr("value", { mutability: "immutable" }), attr("display")],
      }),
    ],
    meta: { resourceType: "Schema", location: `${scimBase()}/Schemas/${GROUP_SCHEMA}` },
  },
];
