import type { Mail } from "../platform/mail.server.ts";
import type { Branding } from "./branding.server.ts";

// Every email the platform sends an organisation's members about it goes through `brandedMail`
// (decision 0207): its sender name becomes the From name (the address stays MAIL_FROM's) and an
// HTML part shows its logo and display name above the same text. Without branding the mail is
// unchanged.

const escapeHtml = (text: string) =>
  text.replace(
    /[&<>"']/g,
    (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c] ?? c,
  );

/** The text as HTML: escaped, its links clickable, its lines kept. */
function textToHtml(text: string): string {
  return escapeHtml(text)
    .replace(/https?:\/\/[^\s<>"']+/g, (url) => `<a href="${url}">${url}</a>`)
    .replace(/\n/g, "<br>\n");
}

/** The name the organisation's emails show for it: its display name when set. */
export const shownName = (organisationName: string, branding: Branding): string =>
  branding.displayName ?? organisationName;

export function brandedMail(mail: Mail, branding: Branding, organisationName: string): Mail {
  const { senderName, logoUrl } = branding;
  if (!senderName && !logoUrl && !branding.displayName) return mail;
  const name = escapeHtml(shownName(organisationName, branding));
  // Logo URLs are https and validated on the way in (app/schemas/organisations.ts); escaped anyway.
  const logo = logoUrl
    ? `<img src="${escapeHtml(logoUrl)}" alt="${name}" style="max-height:48px"><br>\n`
    : "";
  const html = `<div>${logo}<strong>${name}</strong></div>\n<p>${textToHtml(mail.text)}</p>`;
  const text = logoUrl
    ? `${mail.text}\n\n${shownName(organisationName, branding)}: ${logoUrl}`
    : mail.text;
  return { ...mail, text, html, ...(senderName ? { fromName: senderName } : {}) };
}
