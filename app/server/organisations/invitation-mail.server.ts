import { env } from "../platform/env.server.ts";
import type { Mail } from "../platform/mail.server.ts";
import { brandedMail, shownName } from "./branded-mail.server.ts";
import type { Branding } from "./branding.server.ts";
import type { Role } from "./roles.server.ts";

// The invitation's email (decision 0204). The link carries the token, which is in this mail
// and nowhere else (the database keeps its SHA-256).

/** `<APP_URL>/invitations/<token>`: the page that shows the invitation and accepts it. */
export const invitationLink = (token: string): string =>
  new URL(`/invitations/${token}`, env().APP_URL).toString();

/** Names typed by people go into a header: one line, within the job's 200 characters. */
const oneLine = (text: string, max: number) => {
  const flat = text.replace(/\s+/g, " ").trim();
  return flat.length > max ? `${flat.slice(0, max - 1)}…` : flat;
};

export function invitationMail(input: {
  to: string;
  organisationName: string;
  inviterName: string;
  role: Role;
  token: string;
  expiresAt: Date;
  /** The organisation's white-label branding while its plan has it (decision 0207). */
  branding: Branding;
}): Mail {
  const organisation = oneLine(shownName(input.organisationName, input.branding), 80);
  const inviter = oneLine(input.inviterName, 80);
  const link = invitationLink(input.token);
  // A white-labelled organisation's mail does not name the platform (the link still shows it).
  const where = input.branding.displayName ? "" : " on Agent Platform";
  const mail = {
    to: input.to,
    subject: `${inviter} invited you to ${organisation}${where}`,
    text: [
      "Hello,",
      "",
      `${inviter} invited you to join the organisation "${organisation}"${where} as ${input.role === "admin" || input.role === "owner" ? "an" : "a"} ${input.role}.`,
      "",
      "Open this link to accept. Sign in with this email address, or create an account with it:",
      "",
      link,
      "",
      `The invitation works once and expires on ${input.expiresAt.toUTCString()}.`,
      "If you did not expect it, ignore this email: nothing happens unless you accept.",
    ].join("\n"),
  };
  return brandedMail(mail, input.branding, input.organisationName);
}
