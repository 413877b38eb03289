import {
  type Address,
  createWalletClient,
  encodeFunctionData,
  erc20Abi,
  type Hex,
  http,
  keccak256,
} from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { base } from "viem/chains";
import { beforeAll, describe, expect, it } from "vitest";
import * as splitRoute from "../../app/routes/api.skills.instant-split.ts";
import { ensureWallet, walletSigner } from "../../app/server/payments/wallets.server.ts";
import { db } from "../../app/server/platform/db.server.ts";
import { call } from "../helpers/api.ts";
import { sessionCookieFor } from "../helpers/users.ts";
import type { Anvil } from "../identity/anvil.ts";
import { type FiatToken, setNativeBalance } from "./fiat-token.ts";
import { setUpTestChain } from "./support.ts";

// Crash recovery of the transfer ledger: a transfer recorded and signed by a process that died
// before (or while) broadcasting it is settled from the chain on the next run, never paid twice.

const chain = setUpTestChain();
let anvil: Anvil;
let usdc: FiatToken;

beforeAll(async () => {
  ({ anvil, usdc } = chain);
});

const balance = (address: Address) => chain.balance(address);

/** What a process that died after recording and signing leaves behind: a pending attempt. */
async function leftBehind(userId: string, executionId: string, to: Address, amount: bigint) {
  const { wallet } = await ensureWallet(userId);
  const signer = await walletSigner(userId);
  const client = createWalletClient({
    account: signer,
    chain: { ...base, rpcUrls: { default: { http: [anvil.url] } } },
    transport: http(anvil.url),
  });
  const nonce = await anvil.client.getTransactionCount({
    address: wallet.address,
    blockTag: "pending",
  });
  const request = await client.prepareTransactionRequest({
    to: usdc.address,
    data: encodeFunctionData({ abi: erc20Abi, functionName: "transfer", args: [to, amount] }),
    nonce,
  });
  const raw: Hex = await client.signTransaction(request);
  await db()`insert into payment_transfers (purpose, leg, attempt, from_owner, from_address,
      to_address, token, amount, nonce, tx_hash, raw_tx)
    values (${`split:${userId}:${executionId}`}, 0, 1, ${userId}, ${wallet.address}, ${to},
      ${usdc.address}, ${amount.toString()}, ${nonce}, ${keccak256(raw)}, ${raw})`;
  return { client, nonce };
}

async function oneRecipientSplit(userId: string, to: Address) {
  const headers = { cookie: await sessionCookieFor(userId) };
  const { wallet } = await ensureWallet(userId);
  await usdc.mint(wallet.address, 1_000n);
  await setNativeBalance(anvil, wallet.address, 10n ** 18n);
  const res = await call(splitRoute, "/api/skills/instant-split", {
    method: "POST",
    headers,
    body: { action: "define", name: "All to one", recipients: [{ address: to, bps: 10_000 }] },
  });
  return { headers, splitId: res.json.split.id as string, wallet: wallet.address };
}

const execute = (headers: Record<string, string>, splitId: string, executionId: string) =>
  call(splitRoute, "/api/skills/instant-split", {
    method: "POST",
    headers,
    body: { action: "execute", splitId, amount: "400", executionId },
  });

describe("transfer reconciliation", () => {
  it("re-broadcasts a signed transfer that never reached the chain, and pays it once", async () => {
    const to = privateKeyToAccount(generatePrivateKey()).address;
    const { headers, splitId, wallet } = await oneRecipientSplit("usr_crash1", to);
    await db()`insert into split_executions (user_id, id, split_id, amount, token)
      values ('usr_crash1', 'crashed', ${splitId}, 400, ${usdc.address})`;
    await leftBehind("usr_crash1", "crashed", to, 400n);

    const res = await execute(headers, splitId, "crashed");
    expect(res.status, res.text).toBe(200);
    expect(res.json.execution.status).toBe("completed");
    expect(res.json.execution.legs[0].attempts).toHaveLength(1);
    expect(await balance(to)).toBe(400n);
    expect(await balance(wallet)).toBe(600n);
  });

  it("fails an attempt whose nonce another transaction took, then pays with a new one", async () => {
    const to = privateKeyToAccount(generatePrivateKey()).address;
    const elsewhere = privateKeyToAccount(generatePrivateKey()).address;
    const { headers, splitId, wallet } = await oneRecipientSplit("usr_crash2", to);
    await db()`insert into split_executions (user_id, id, split_id, amount, token)
      values ('usr_crash2', 'replaced', ${splitId}, 400, ${usdc.address})`;
    const { client, nonce } = await leftBehind("usr_crash2", "replaced", to, 400n);
    // Another transaction from the wallet takes that nonce first.
    const other = await client.sendTransaction({ to: elsewhere, value: 1n, nonce });
    await anvil.client.waitForTransactionReceipt({ hash: other, pollingInterval: 10 });

    const res = await execute(headers, splitId, "replaced");
    expect(res.status, res.text).toBe(200);
    const attempts = res.json.execution.legs[0].attempts;
    expect(attempts.map((a: { status: string }) => a.status)).toEqual(["failed", "confirmed"]);
    expect(attempts[0].error).toMatch(/nonce/);
    expect(await balance(to)).toBe(400n);
    expect(await balance(wallet)).toBe(600n);
  });
});
