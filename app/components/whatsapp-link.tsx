import { Form } from "@remix-run/react";
import { useEffect, useState } from "react";
import type { WhatsAppLink, WhatsAppStatus } from "../server/agents/whatsapp-link.server.ts";

// WhatsApp (chatapp3) linking on the chat page. Without JavaScript: "Link WhatsApp" posts the
// form and the page shows the QR image (a data URL) with an "I scanned it" button that waits for
// the link. With JavaScript, the page keeps waiting by itself (POST /api/agent/whatsapp
// action "wait") and swaps in the refreshed QR WhatsApp hands out, until the phone is linked.

export function WhatsAppLinkPanel({
  status,
  statusError,
  result,
}: {
  status: WhatsAppStatus | null;
  statusError: string | null;
  result: Partial<Pick<WhatsAppLink, "linked" | "qrDataUrl">> | undefined;
}) {
  const [qr, setQr] = useState<string | null>(result?.qrDataUrl ?? null);
  const [linked, setLinked] = useState<boolean>(result?.linked ?? status?.linked ?? false);
  const [note, setNote] = useState<string | null>(null);
  useEffect(() => {
    setQr(result?.qrDataUrl ?? null);
    if (result?.linked !== undefined) setLinked(result.linked);
  }, [result]);

  // While a QR is shown, wait for the scan in the background (one long poll at a time).
  useEffect(() => {
    if (!qr || linked) return;
    let stopped = false;
    (async () => {
      let current = qr;
      while (!stopped) {
        const res = await fetch("/api/agent/whatsapp", {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ action: "wait", currentQrDataUrl: current, timeoutMs: 25_000 }),
        }).catch(() => undefined);
        if (stopped) return;
        const body = (await res?.json().catch(() => ({}))) as {
          linked?: boolean;
          qrDataUrl?: string | null;
          message?: string;
          error?: string;
        };
        if (!res?.ok) {
          setNote(body.error ?? "Waiting for the scan failed");
          return;
        }
        if (body.linked) {
          setLinked(true);
          setQr(null);
          setNote(body.message ?? "Linked");
          return;
        }
        if (!body.qrDataUrl) {
          setQr(null);
          setNote(body.message ?? "The QR expired: link again");
          return;
        }
        current = body.qrDataUrl;
        setQr(current);
      }
    })();
    return () => {
      stopped = true;
    };
  }, [qr, linked]);

  return (
    <div className="mt-4 space-y-2 text-sm" data-testid="whatsapp">
      <h3 className="font-medium">WhatsApp</h3>
      {statusError ? <p className="text-red-700">{statusError}</p> : null}
      <p data-testid="whatsapp-state">
        {linked
          ? `Linked${status?.account ? ` (${status.account})` : ""}${status?.connected ? ", connected" : ""}`
          : "Not linked"}
      </p>
      {note ? <p role="status">{note}</p> : null}
      {qr && !linked ? (
        <div className="space-y-2">
          <p>Scan this QR in WhatsApp → Settings → Linked devices → Link a device.</p>
          <img src={qr} alt="WhatsApp QR code to scan" width={264} height={264} />
          <Form method="post">
            <input type="hidden" name="intent" value="whatsapp-wait" />
            <input type="hidden" name="currentQrDataUrl" value={qr} />
            <button type="submit" className="rounded-md border px-3 py-1">
              I scanned it
            </button>
          </Form>
        </div>
      ) : null}
      <Form method="post">
        <input type="hidden" name="intent" value="whatsapp-link" />
        {linked ? <input type="hidden" name="force" value="true" /> : null}
        <button type="submit" className="rounded-md border px-3 py-1">
          {linked ? "Link another phone" : "Link WhatsApp"}
        </button>
      </Form>
    </div>
  );
}
