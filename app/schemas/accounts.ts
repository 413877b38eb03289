import { z } from "zod";

// Input schemas of the account endpoints, shared by the /api routes (route builder) and the UI
// forms (conform, on the client and the server). Messages name no field: the route builder
// prefixes the field name ("email: must be a valid email address"), conform shows them next
// to the field.

const required = { error: "is required" };

export const email = z
  .string(required)
  .trim()
  .min(1, "is required")
  .max(254, "must be at most 254 characters")
  .pipe(z.email("must be a valid email address"));

/** Registration and password changes: at least 8 characters (contract). */
export const newPassword = z
  .string(required)
  .min(8, "must be at least 8 characters")
  .max(256, "must be at most 256 characters");

/** Password reset: at least 6 characters (contract). */
export const resetPasswordValue = z
  .string(required)
  .min(6, "must be at least 6 characters")
  .max(256, "must be at most 256 characters");

export const registerSchema = z.object({
  // Wallet-only accounts own `<address>@wallet.invalid` (docs/decisions/0051): registering one
  // would pre-empt the wallet's owner, so the reserved domain is refused here.
  email: email.refine((e) => !e.toLowerCase().endsWith("@wallet.invalid"), {
    message: "uses a reserved domain",
  }),
  password: newPassword,
  name: z.string().trim().max(100, "must be at most 100 characters").optional(),
  referralCode: z
    .string()
    .trim()
    .regex(/^[A-Za-z0-9]{1,20}$/, "must be 1 to 20 letters or digits")
    .optional(),
  /** The UI form's honeypot: hidden from people, so anything in it comes from a bot. */
  website: z.string().optional(),
  /**
   * Ours, optional: the token of an organisation's invitation to this email; the new account
   * joins the organisation at once (decision 0204).
   */
  invitationToken: z.string().trim().min(1, "is required").max(200).optional(),
});

export const signInSchema = z.object({
  email,
  password: z.string(required).min(1, "is required").max(256),
});

export const forgotPasswordSchema = z.object({ email, website: z.string().optional() });

export const resetPasswordSchema = z.object({
  token: z.string(required).min(1, "is required").max(200),
  password: resetPasswordValue,
});

export const settingsSchema = z.object({
  name: z
    .string()
    .trim()
    .min(1, "must not be empty")
    .max(100, "must be at most 100 characters")
    .optional(),
  avatar: z
    .union([
      z.literal(""),
      z
        .url({ protocol: /^https$/, error: "must be an https URL" })
        .max(2048, "must be at most 2048 characters"),
    ])
    .optional(),
});

export const changePasswordSchema = z.object({
  currentPassword: z.string(required).min(1, "is required").max(256),
  newPassword,
});

/** A new sign-in email: confirmed by a link sent to it (decision 0156). */
export const changeEmailSchema = z.object({
  newEmail: email.refine((e) => !e.toLowerCase().endsWith("@wallet.invalid"), {
    message: "uses a reserved domain",
  }),
  // Required when the account has a password (the service checks; OAuth-only accounts have none).
  currentPassword: z.string().max(256).optional(),
});

export const confirmEmailSchema = z.object({
  token: z.string(required).min(1, "is required").max(200),
});

export const apiKeyNameSchema = z.object({
  name: z.string(required).trim().min(1, "is required").max(64, "must be at most 64 characters"),
});
