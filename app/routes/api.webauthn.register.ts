import { z } from "zod";
import { apiRoute, endpoint } from "../server/api.server.ts";
import {
  finishWebauthnRegistration,
  startWebauthnRegistration,
} from "../server/identity/webauthn.server.ts";

// The attestation the browser returns (RegistrationResponseJSON); @simplewebauthn checks the rest.
const registrationBody = z.object({
  name: z.string().trim().min(1).max(64).optional(),
  response: z
    .object({
      id: z.string().min(1).max(1024),
      rawId: z.string().min(1).max(1024),
      type: z.literal("public-key"),
      response: z
        .object({
          clientDataJSON: z.string().min(1),
          attestationObject: z.string().min(1),
          transports: z.array(z.string()).optional(),
        })
        .passthrough(),
      clientExtensionResults: z.record(z.string(), z.unknown()).default({}),
      authenticatorAttachment: z.string().optional(),
    })
    .passthrough(),
});

export const { loader, action } = apiRoute({
  GET: endpoint({
    summary: "Options to register a security key or passkey (navigator.credentials.create)",
    description: "The challenge is single-use and expires after five minutes.",
    auth: "session",
    handler: async ({ auth }) => ({ options: await startWebauthnRegistration(auth.user) }),
  }),
  POST: endpoint({
    summary: "Register the authenticator from the browser's attestation",
    description: "400 when the attestation does not check; 409 when it is already registered.",
    auth: "session",
    status: 201,
    body: registrationBody,
    handler: async ({ auth, body }) => ({
      credential: await finishWebauthnRegistration(
        auth.user.id,
        body.response as unknown as Parameters<typeof finishWebauthnRegistration>[1],
        body.name,
      ),
    }),
  }),
});
