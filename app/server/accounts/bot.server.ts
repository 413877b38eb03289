import { isbot } from "isbot";
import { DomainError } from "../platform/errors.server.ts";

// Bot detection for register and forgot-password (contract: 403). Two signals: a User-Agent
// that isbot recognises as automated (crawlers, curl, HTTP libraries), and the honeypot field
// of the UI forms (`website`, hidden from people, filled in by form-spamming bots).
// docs/decisions/0010-accounts-and-sign-in.md

export const HONEYPOT_FIELD = "website";

export function assertNotBot(request: Request, honeypot?: string | null): void {
  if (isbot(request.headers.get("user-agent") ?? "")) {
    throw new DomainError(403, "Request blocked by bot detection");
  }
  if (honeypot) throw new DomainError(403, "Request blocked by bot detection");
}
