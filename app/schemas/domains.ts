import { z } from "zod";
import { organisationParams } from "./organisations.ts";

// Verified domains' request schemas (issue 49, decision 0212), shared by the API and the page.

const LABEL = "[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?";
const HOSTNAME = new RegExp(`^(?:${LABEL}\\.)+[a-z][a-z0-9-]{0,61}[a-z0-9]$`);

/** A domain name as people type it: trimmed, lower-cased, a trailing dot dropped. */
export const domainName = z
  .string()
  .trim()
  .toLowerCase()
  .transform((d) => d.replace(/\.$/, ""))
  .pipe(
    z
      .string()
      .max(253, "at most 253 characters")
      .regex(HOSTNAME, "must be a domain name such as example.com"),
  );

export const newDomainSchema = z.object({ domain: domainName });
export const domainParams = organisationParams.extend({ domainId: z.string().min(1).max(64) });
export const domainSsoSchema = z.object({ requireSso: z.boolean() });
