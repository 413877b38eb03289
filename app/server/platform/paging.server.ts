import { z } from "zod";

// Paging query parameters of the list endpoints: absent or empty means the default.

const blankAsMissing = (v: unknown) => (v === undefined || v === "" ? undefined : v);

/** `?limit=`: an integer clamped to 1..max, `fallback` when absent. */
export const limitParam = (max: number, fallback: number) =>
  z.preprocess(
    blankAsMissing,
    z.coerce
      .number({ error: "must be an integer" })
      .int("must be an integer")
      .transform((n) => Math.min(Math.max(n, 1), max))
      .default(fallback),
  );

/** `?offset=`: a non-negative integer, 0 when absent. */
export const offsetParam = () =>
  z.preprocess(
    blankAsMissing,
    z.coerce
      .number({ error: "must be an integer" })
      .int("must be an integer")
      .min(0, "must not be negative")
      .default(0),
  );
