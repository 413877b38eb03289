import type {
  PaymentPayload,
  PaymentRequirements,
  SettleResponse,
  VerifyResponse,
} from "@x402/core/types";
import { ExactEvmScheme } from "@x402/evm/exact/facilitator";
import { type Address, encodeFunctionData, type Hex, parseAbi } from "viem";
import { publicClient } from "../identity/chain.server.ts";
import { env } from "../platform/env.server.ts";
import { DomainError } from "../platform/errors.server.ts";
import { onChain, paymentToken } from "./token.server.ts";
import { payLeg, transfersOf, withSenderLock } from "./transfers.server.ts";
import { ESCROW_OWNER, ensureWallet } from "./wallets.server.ts";

// The x402 facilitator the platform runs itself (x402 v2, scheme `exact`, EIP-3009): the
// requirements a 402 names, verification of a payer's `transferWithAuthorization` signature
// (the @x402/evm facilitator's checks: signature, payee, amount, validity window, on-chain
// simulation), and settlement on the configured chain. Settlement is submitted by the platform's
// escrow/fee wallet, which pays the gas, through the transfer ledger: recorded before it is
// signed, reconciled with the chain after, at most once per authorisation.
// docs/decisions/0128-paid-plugin-gateway.md

/** How long a signed authorisation stays valid (validBefore = signing time + this). */
export const PAYMENT_TIMEOUT_SECONDS = 300;

const eip712Abi = parseAbi([
  "function name() view returns (string)",
  "function version() view returns (string)",
]);

let domainCache: { key: string; name: string; version: string } | undefined;

/** The token's EIP-712 domain (name, version), which the payer's signature commits to. */
async function tokenDomain(token: Address): Promise<{ name: string; version: string }> {
  const key = `${env().BASE_RPC_URL}|${token}`;
  if (domainCache?.key === key) return domainCache;
  const client = publicClient();
  const [name, version] = await onChain("token EIP-712 domain", () =>
    Promise.all([
      client.readContract({ address: token, abi: eip712Abi, functionName: "name" }),
      client.readContract({ address: token, abi: eip712Abi, functionName: "version" }),
    ]),
  );
  domainCache = { key, name, version };
  return domainCache;
}

export const x402Network = () => `eip155:${env().BASE_CHAIN_ID}` as const;

/**
 * A price in micro-USD as token units: the stablecoin's smallest unit is 10^-decimals USD, so
 * micro-USD × 10^(decimals − 6) — exact for USDC (6 decimals) and any token with more.
 */
export function tokenUnits(priceMicroUsd: number, decimals: number): bigint {
  if (decimals < 6) {
    throw new DomainError(503, "The payment token has fewer than 6 decimals; x402 is off");
  }
  return BigInt(priceMicroUsd) * 10n ** BigInt(decimals - 6);
}

/** What a call costs, as the `accepts` entry of an x402 v2 PaymentRequired. */
export async function paymentRequirements(priceMicroUsd: number): Promise<PaymentRequirements> {
  const token = await paymentToken();
  const [{ wallet }, domain] = await Promise.all([
    ensureWallet(ESCROW_OWNER),
    tokenDomain(token.address),
  ]);
  return {
    scheme: "exact",
    network: x402Network(),
    amount: tokenUnits(priceMicroUsd, token.decimals).toString(),
    asset: token.address,
    payTo: wallet.address,
    maxTimeoutSeconds: PAYMENT_TIMEOUT_SECONDS,
    extra: { name: domain.name, version: domain.version },
  };
}

interface Authorization {
  from: string;
  nonce: string;
}

/** The ledger purpose of an authorisation: one per payer and EIP-3009 nonce. */
export const settlementPurpose = (auth: Authorization) =>
  `x402:${auth.from.toLowerCase()}:${auth.nonce.toLowerCase()}`;

/** True when the ledger holds an attempt for this authorisation that did not fail. */
export async function alreadySettled(auth: Authorization): Promise<boolean> {
  const attempts = await transfersOf(settlementPurpose(auth));
  return attempts.some((a) => a.status !== "failed");
}

/**
 * The @x402/evm facilitator's signer: reads and signature checks through the chain client;
 * `writeContract` goes through the transfer ledger as leg 0 of the authorisation's purpose,
 * sent by the escrow wallet. Nothing else is ever written (smart-wallet deployment is off).
 */
function ledgerSigner(
  escrow: Address,
  settle?: { auth: Authorization; to: Address; value: bigint },
) {
  const client = publicClient();
  return {
    getAddresses: () => [escrow] as const,
    readContract: (args: {
      address: Address;
      abi: readonly unknown[];
      functionName: string;
      args?: readonly unknown[];
    }) => client.readContract(args as never) as Promise<unknown>,
    verifyTypedData: (args: {
      address: Address;
      domain: Record<string, unknown>;
      types: Record<string, unknown>;
      primaryType: string;
      message: Record<string, unknown>;
      signature: Hex;
    }) => client.verifyTypedData(args as never),
    writeContract: async (args: {
      address: Address;
      abi: readonly unknown[];
      functionName: string;
      args: readonly unknown[];
    }): Promise<Hex> => {
      if (!settle || args.functionName !== "transferWithAuthorization") {
        throw new Error(`the facilitator does not send ${args.functionName}`);
      }
      const purpose = settlementPurpose(settle.auth);
      const status = await payLeg({
        purpose,
        leg: 0,
        fromOwner: ESCROW_OWNER,
        to: settle.to,
        amount: settle.value,
        // The facilitator picked the overload (v, r, s or a bytes signature) and its abi.
        call: encodeFunctionData(args as unknown as Parameters<typeof encodeFunctionData>[0]),
      });
      const attempt = (await transfersOf(purpose)).at(-1);
      if (status === "failed" || !attempt?.hash) {
        throw new Error(attempt?.error ?? "the settlement was not sent");
      }
      return attempt.hash as Hex;
    },
    sendTransaction: async (): Promise<Hex> => {
      throw new Error("the facilitator deploys no smart wallets");
    },
    waitForTransactionReceipt: ({ hash }: { hash: Hex }) =>
      client.waitForTransactionReceipt({
        hash,
        timeout: env().PAYMENTS_CONFIRM_TIMEOUT_MS,
        pollingInterval: 200,
      }),
    getCode: ({ address }: { address: Address }) => client.getCode({ address }),
  };
}

/** The authorisation inside an `exact` EIP-3009 payload (undefined for any other shape). */
export function authorizationOf(
  payload: PaymentPayload,
): (Authorization & { to: string; value: string }) | undefined {
  const auth = (payload.payload as { authorization?: Record<string, unknown> }).authorization;
  if (
    !auth ||
    typeof auth.from !== "string" ||
    typeof auth.to !== "string" ||
    typeof auth.value !== "string" ||
    typeof auth.nonce !== "string"
  ) {
    return undefined;
  }
  return { from: auth.from, to: auth.to, value: auth.value, nonce: auth.nonce };
}

async function escrowAddress(): Promise<Address> {
  return (await ensureWallet(ESCROW_OWNER)).wallet.address;
}

/** Verifies a payment against our requirements (nothing is sent). */
export async function verifyPayment(
  payload: PaymentPayload,
  requirements: PaymentRequirements,
): Promise<VerifyResponse> {
  const scheme = new ExactEvmScheme(ledgerSigner(await escrowAddress()));
  return scheme.verify(payload, requirements);
}

/**
 * Settles a verified payment on chain, once: under the escrow's sender lock, an authorisation
 * the ledger already holds is refused as replayed before anything is sent.
 */
export async function settlePayment(
  payload: PaymentPayload,
  requirements: PaymentRequirements,
): Promise<SettleResponse> {
  const auth = authorizationOf(payload);
  const escrow = await escrowAddress();
  if (!auth) {
    return {
      success: false,
      errorReason: "invalid_payload",
      transaction: "",
      network: requirements.network as SettleResponse["network"],
    };
  }
  return withSenderLock(escrow, async () => {
    if (await alreadySettled(auth)) {
      return {
        success: false,
        errorReason: "authorization_already_used",
        transaction: "",
        network: requirements.network as SettleResponse["network"],
        payer: auth.from,
      };
    }
    const scheme = new ExactEvmScheme(
      ledgerSigner(escrow, {
        auth,
        to: requirements.payTo as Address,
        value: BigInt(auth.value),
      }),
    );
    return scheme.settle(payload, requirements);
  });
}
