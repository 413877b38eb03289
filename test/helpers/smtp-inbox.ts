import { type ParsedMail, simpleParser } from "mailparser";
import { SMTPServer } from "smtp-server";

// A real SMTP server on loopback that keeps every mail it receives, parsed: tests point
// SMTP_URL at `url` and read `inbox`.

export async function startSmtpInbox(): Promise<{
  inbox: ParsedMail[];
  url: string;
  close(): Promise<void>;
}> {
  const inbox: ParsedMail[] = [];
  const smtp = new SMTPServer({
    disabledCommands: ["STARTTLS"],
    authOptional: true,
    onData(stream, _session, callback) {
      simpleParser(stream)
        .then((mail) => {
          inbox.push(mail);
          callback();
        })
        .catch(callback);
    },
  });
  await new Promise<void>((resolve) => smtp.listen(0, "127.0.0.1", resolve));
  const address = smtp.server.address();
  const port = typeof address === "object" && address ? address.port : 0;
  return {
    inbox,
    url: `smtp://127.0.0.1:${port}`,
    close: () => new Promise<void>((resolve) => smtp.close(() => resolve())),
  };
}
