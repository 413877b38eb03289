import { seal, unseal } from "../platform/crypto.server.ts";
import { db } from "../platform/db.server.ts";
import { resetInstanceTokenCache } from "./instance-tokens.server.ts";
import type { ProviderName } from "./providers/shared.server.ts";

// Bring your own key: a user's own provider keys, sealed at rest (AES-256-GCM). When a user has
// a key for a provider that serves the requested model, the layer calls that provider with the
// user's key, records the usage, and debits nothing. The billing area's enable-byok /
// disable-byok actions call setUserKey / removeUserKeys.

export function keyPreview(apiKey: string): string {
  return apiKey.length <= 8 ? "…" : `${apiKey.slice(0, 4)}…${apiKey.slice(-4)}`;
}

export async function setUserKey(userId: string, provider: ProviderName, apiKey: string) {
  await db()`insert into ai_user_keys (user_id, provider, sealed_key, key_preview)
    values (${userId}, ${provider}, ${seal(apiKey)}, ${keyPreview(apiKey)})
    on conflict (user_id, provider) do update set sealed_key = excluded.sealed_key,
      key_preview = excluded.key_preview, updated_at = now()`;
  resetInstanceTokenCache();
}

/** Removes one provider's key, or all of the user's keys (back to platform credits). */
export async function removeUserKeys(userId: string, provider?: ProviderName): Promise<number> {
  const rows = provider
    ? await db()`delete from ai_user_keys where user_id = ${userId} and provider = ${provider}
        returning 1`
    : await db()`delete from ai_user_keys where user_id = ${userId} returning 1`;
  resetInstanceTokenCache();
  return rows.length;
}

/** The user's keys, unsealed, by provider. */
export async function userKeys(userId: string): Promise<Map<ProviderName, string>> {
  const rows = await db()<{ provider: string; sealed: string }[]>`
    select provider, sealed_key as sealed from ai_user_keys where user_id = ${userId}`;
  return unsealKeys(rows);
}

export function unsealKeys(rows: Array<{ provider: string; sealed: string }>) {
  return new Map(rows.map((r) => [r.provider as ProviderName, unseal(r.sealed)]));
}

/** Which providers the user has keys for (no secrets). */
export async function userKeyProviders(
  userId: string,
): Promise<Array<{ provider: ProviderName; keyPreview: string }>> {
  const rows = await db()<{ provider: ProviderName; key_preview: string }[]>`
    select provider, key_preview from ai_user_keys where user_id = ${userId} order by provider`;
  return rows.map((r) => ({ provider: r.provider, keyPreview: r.key_preview }));
}
