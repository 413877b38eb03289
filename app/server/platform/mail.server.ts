import { randomUUID } from "node:crypto";
import { mkdir, writeFile } from "node:fs/promises";
import path from "node:path";
import nodemailer, { type Transporter } from "nodemailer";
import { env } from "./env.server.ts";
import { logger } from "./logger.server.ts";

export interface Mail {
  to: string;
  subject: string;
  text: string;
  html?: string | undefined;
  /**
   * The From header's display name for this message (an organisation's white-label sender,
   * decision 0207); the address stays MAIL_FROM's, so SPF and DKIM keep holding.
   */
  fromName?: string | undefined;
}

export interface Delivery {
  messageId: string;
  /** Where the message went: "smtp" or the .eml file written locally. */
  via: string;
}

let transport: Transporter | undefined;
let transportUrl: string | undefined;

function smtp(url: string): Transporter {
  if (!transport || transportUrl !== url) {
    transport = nodemailer.createTransport(url);
    transportUrl = url;
  }
  return transport;
}

/** The bare address of MAIL_FROM (`Name <a@b>` or `a@b`). */
export const mailFromAddress = (from: string): string =>
  /<([^<>]+)>\s*$/.exec(from)?.[1] ?? from.trim();

const links = (text: string) => text.match(/https?:\/\/[^\s<>"']+/g) ?? [];

/**
 * Sends through SMTP_URL. Without SMTP configured, the message is written to
 * DATA_DIR/mail/*.eml and its subject and links are logged, so flows such as password reset
 * work on a laptop.
 */
export async function deliverMail(mail: Mail): Promise<Delivery> {
  const { SMTP_URL, MAIL_FROM, DATA_DIR } = env();
  const { fromName, ...content } = mail;
  // nodemailer encodes the name (RFC 2047) and quotes it: a name cannot add a header or address.
  const from = fromName ? { name: fromName, address: mailFromAddress(MAIL_FROM) } : MAIL_FROM;
  const message = { from, ...content };
  if (SMTP_URL) {
    const info = await smtp(SMTP_URL).sendMail(message);
    return { messageId: String(info.messageId), via: "smtp" };
  }
  const info = await nodemailer
    .createTransport({ streamTransport: true, buffer: true, newline: "unix" })
    .sendMail(message);
  const dir = path.join(DATA_DIR, "mail");
  await mkdir(dir, { recursive: true });
  const file = path.join(
    dir,
    `${new Date().toISOString().replace(/[:.]/g, "-")}-${randomUUID()}.eml`,
  );
  await writeFile(file, info.message as Buffer);
  logger().info(
    { to: mail.to, subject: mail.subject, links: links(mail.text), file },
    "mail written locally (SMTP_URL not set)",
  );
  return { messageId: String(info.messageId), via: file };
}
