import { z } from "zod";
import { ScimError } from "./http.server.ts";
import { PATCH_SCHEMA } from "./schema.server.ts";

// The User resource as identity providers send it (RFC 7643 §4.1), and its PATCH operations
// (RFC 7644 §3.5.2) applied to a draft, in the forms Entra ID, Okta and OneLogin use.

const text = (max: number) => z.string().trim().max(max);
/** Entra ID sends booleans as "True"/"False" in PATCH. */
export const scimBoolean = z.union([
  z.boolean(),
  z
    .string()
    .regex(/^(true|false)$/i, "must be true or false")
    .transform((s) => s.toLowerCase() === "true"),
]);

const email = z.object({
  value: z.string().trim().toLowerCase().pipe(z.email("must be an email address")).pipe(text(254)),
  primary: scimBoolean.optional(),
  type: z.string().optional(),
});

export const scimUserSchema = z.object({
  userName: text(254).min(1, "is required"),
  externalId: text(255).nullish(),
  name: z
    .object({
      givenName: text(100).nullish(),
      familyName: text(100).nullish(),
      formatted: text(200).nullish(),
    })
    .nullish(),
  displayName: text(200).nullish(),
  emails: z.array(email).max(10).nullish(),
  active: scimBoolean.optional(),
});
export type ScimUserInput = z.infer<typeof scimUserSchema>;

/** The User attributes we keep, as a PATCH edits them. */
export interface UserDraft {
  userName: string;
  externalId: string | null;
  givenName: string | null;
  familyName: string | null;
  displayName: string | null;
  email: string | null;
  active: boolean;
}

export const primaryEmail = (emails: ScimUserInput["emails"]): string | null =>
  (emails?.find((e) => e.primary) ?? emails?.[0])?.value ?? null;

export function draftOf(input: ScimUserInput, active = true): UserDraft {
  return {
    userName: input.userName,
    externalId: input.externalId ?? null,
    givenName: input.name?.givenName ?? null,
    familyName: input.name?.familyName ?? null,
    displayName: input.displayName ?? input.name?.formatted ?? null,
    email: primaryEmail(input.emails),
    active: input.active ?? active,
  };
}

export const patchSchema = z.object({
  schemas: z.array(z.string()).refine((s) => s.includes(PATCH_SCHEMA), `must list ${PATCH_SCHEMA}`),
  Operations: z
    .array(
      z.object({
        op: z
          .string()
          .transform((o) => o.toLowerCase())
          .pipe(z.enum(["add", "replace", "remove"])),
        path: z.string().max(200).optional(),
        value: z.unknown().optional(),
      }),
    )
    .min(1)
    .max(100),
});
export type PatchOperation = z.infer<typeof patchSchema>["Operations"][number];

const parse = <S extends z.ZodType>(schema: S, value: unknown, path: string): z.infer<S> => {
  const result = schema.safeParse(value);
  if (!result.success) {
    throw new ScimError(400, `${path}: ${result.error.issues[0]?.message}`, "invalidValue");
  }
  return result.data;
};

const optionalText = (max: number) => text(max).nullish();

/** Sets one attribute (a path of ours, lower-cased) of the draft; `value` undefined removes. */
function setAttribute(draft: UserDraft, path: string, value: unknown): void {
  const remove = value === undefined;
  if (path === "active") {
    if (remove) throw new ScimError(400, "active cannot be removed", "mutability");
    draft.active = parse(scimBoolean, value, path);
  } else if (path === "username") {
    if (remove) throw new ScimError(400, "userName cannot be removed", "mutability");
    draft.userName = parse(text(254).min(1), value, path);
  } else if (path === "externalid")
    draft.externalId = parse(optionalText(255), value, path) ?? null;
  else if (path === "displayname")
    draft.displayName = parse(optionalText(200), value, path) ?? null;
  else if (path === "name.givenname")
    draft.givenName = parse(optionalText(100), value, path) ?? null;
  else if (path === "name.familyname") {
    draft.familyName = parse(optionalText(100), value, path) ?? null;
  } else if (path === "name.formatted") {
    draft.displayName = parse(optionalText(200), value, path) ?? draft.displayName;
  } else if (path === "name") {
    const name = parse(scimUserSchema.shape.name, value ?? null, path);
    draft.givenName = name?.givenName ?? null;
    draft.familyName = name?.familyName ?? null;
  } else if (path === "emails") {
    if (!remove) draft.email = primaryEmail(parse(z.array(email).max(10), value, path));
  } else if (/^emails\[.*\](\.value)?$/.test(path)) {
    // emails[type eq "work"].value: the one address we keep.
    if (!remove) draft.email = parse(email.shape.value, value, path);
  } else if (path.startsWith("urn:") || path === "schemas" || path === "meta") {
    // Extension attributes and read-only ones are not kept; ignoring them keeps a sync going.
  } else {
    throw new ScimError(400, `Unsupported attribute path: ${path}`, "invalidPath");
  }
}

/** Applies PATCH operations to a draft (add and replace alike: we keep one value per attribute). */
export function applyUserPatch(draft: UserDraft, operations: PatchOperation[]): UserDraft {
  const next = { ...draft };
  for (const op of operations) {
    if (op.path) {
      setAttribute(next, op.path.toLowerCase(), op.op === "remove" ? undefined : op.value);
      continue;
    }
    if (op.op === "remove" || typeof op.value !== "object" || op.value === null) {
      throw new ScimError(400, "An operation without a path needs an object value", "noTarget");
    }
    for (const [key, value] of Object.entries(op.value))
      setAttribute(next, key.toLowerCase(), value);
  }
  return next;
}
