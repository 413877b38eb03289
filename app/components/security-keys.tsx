import { Form, useRevalidator } from "@remix-run/react";
import { useEffect, useState } from "react";
import { createCredential, webauthnSupported } from "./webauthn.ts";

// Security keys and passkeys on the account (they sign `webauthn` agent verifications).
// Adding one needs JavaScript and a browser with WebAuthn; removing one is a plain form post.

export interface SecurityKey {
  id: string;
  name: string;
  createdAt: string;
}

export function SecurityKeys({ keys }: { keys: SecurityKey[] }) {
  const [ready, setReady] = useState<"no-js" | "unsupported" | "ok">("no-js");
  const [name, setName] = useState("Security key");
  const [busy, setBusy] = useState(false);
  const [message, setMessage] = useState<{ tone: "ok" | "error"; text: string } | null>(null);
  const revalidator = useRevalidator();

  useEffect(() => setReady(webauthnSupported() ? "ok" : "unsupported"), []);

  async function add() {
    setBusy(true);
    setMessage(null);
    try {
      const optionsRes = await fetch("/api/webauthn/register");
      const { options, error } = (await optionsRes.json()) as {
        options?: Parameters<typeof createCredential>[0];
        error?: string;
      };
      if (!options) throw new Error(error ?? "No registration options");
      const response = await createCredential(options);
      const res = await fetch("/api/webauthn/register", {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ response, name }),
      });
      const body = (await res.json()) as { error?: string };
      if (!res.ok) throw new Error(body.error ?? `Registration failed (${res.status})`);
      setMessage({ tone: "ok", text: "Security key added." });
      revalidator.revalidate();
    } catch (e) {
      setMessage({ tone: "error", text: (e as Error).message });
    } finally {
      setBusy(false);
    }
  }

  return (
    <div className="space-y-3 text-sm">
      <ul className="divide-y divide-slate-100" data-testid="security-keys">
        {keys.length === 0 ? <li className="py-2 text-slate-500">No security key yet.</li> : null}
        {keys.map((k) => (
          <li key={k.id} className="flex items-center justify-between gap-4 py-2">
            <span>
              <span className="font-medium">{k.name}</span>{" "}
              <span className="text-slate-500">added {new Date(k.createdAt).toUTCString()}</span>
            </span>
            <Form method="post">
              <input type="hidden" name="intent" value="remove-key" />
              <input type="hidden" name="keyId" value={k.id} />
              <button type="submit" className="text-red-700 underline">
                Remove
              </button>
            </Form>
          </li>
        ))}
      </ul>
      <div className="flex items-end gap-2">
        <label className="flex flex-col gap-1">
          <span className="text-slate-600">Security key name</span>
          <input
            className="rounded border border-slate-300 px-2 py-1"
            value={name}
            maxLength={64}
            onChange={(e) => setName(e.target.value)}
            disabled={ready !== "ok"}
          />
        </label>
        <button
          type="button"
          onClick={add}
          disabled={ready !== "ok" || busy || name.trim() === ""}
          className="rounded bg-indigo-600 px-3 py-1.5 text-white disabled:opacity-50"
        >
          {busy ? "Waiting for the key…" : "Add security key"}
        </button>
      </div>
      {ready === "no-js" ? (
        <p className="text-slate-500">Adding a security key needs JavaScript.</p>
      ) : ready === "unsupported" ? (
        <p className="text-slate-500">This browser does not support security keys (WebAuthn).</p>
      ) : null}
      {message ? (
        <p role="status" className={message.tone === "ok" ? "text-emerald-700" : "text-red-700"}>
          {message.text}
        </p>
      ) : null}
    </div>
  );
}
