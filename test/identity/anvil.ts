import { type ChildProcess, spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import solc from "solc";
import {
  type Abi,
  type Address,
  createPublicClient,
  createWalletClient,
  type Hex,
  http,
  type PublicClient,
} from "viem";
import { mnemonicToAccount } from "viem/accounts";
import { base } from "viem/chains";
import { resetEnvCache } from "../../app/server/platform/env.server.ts";

// A real EVM for identity tests: anvil from npm (@foundry-rs/anvil), chain id 8453 (Base), on a
// free port chosen by anvil itself. Start it in beforeAll, stop it in afterAll.

const require = createRequire(import.meta.url);
const CONTRACTS = path.join(import.meta.dirname, "contracts");
const MNEMONIC = "test test test test test test test test test test test junk";

function anvilBinary(): string {
  const pkg = require.resolve("@foundry-rs/anvil-linux-amd64/package.json");
  return path.join(path.dirname(pkg), "bin", "anvil");
}

export interface Anvil {
  url: string;
  client: PublicClient;
  /** Funded dev accounts of the mnemonic `test … junk` (index 0 deploys). */
  account: (index: number) => ReturnType<typeof mnemonicToAccount>;
  deploy(artifact: Artifact, args?: unknown[]): Promise<Address>;
  /** Sends a contract call from dev account `from` and waits for its receipt. */
  write(
    address: Address,
    abi: Abi,
    functionName: string,
    args: unknown[],
    from?: number,
  ): Promise<Hex>;
  stop(): Promise<void>;
}

export interface Artifact {
  abi: Abi;
  bytecode: Hex;
}

export async function startAnvil(): Promise<Anvil> {
  const proc: ChildProcess = spawn(
    anvilBinary(),
    ["--chain-id", "8453", "--port", "0", "--host", "127.0.0.1"],
    { stdio: ["ignore", "pipe", "pipe"] },
  );
  const url = await new Promise<string>((resolve, reject) => {
    let out = "";
    proc.once("error", reject);
    proc.once("exit", (code) => reject(new Error(`anvil exited with ${code}: ${out}`)));
    proc.stdout?.on("data", (chunk: Buffer) => {
      out += chunk.toString();
      const m = /Listening on (\S+)/.exec(out);
      if (m) resolve(`http://${m[1]}`);
    });
  });
  proc.removeAllListeners("exit");
  proc.stdout?.resume();
  process.env.BASE_RPC_URL = url;
  process.env.BASE_CHAIN_ID = "8453";
  resetEnvCache();

  const chain = { ...base, rpcUrls: { default: { http: [url] } } };
  const client = createPublicClient({ chain, transport: http(url) }) as PublicClient;
  const account = (index: number) => mnemonicToAccount(MNEMONIC, { addressIndex: index });
  const wallet = (index: number) =>
    createWalletClient({ chain, transport: http(url), account: account(index) });

  return {
    url,
    client,
    account,
    async deploy(artifact, args = []) {
      const hash = await wallet(0).deployContract({
        abi: artifact.abi,
        bytecode: artifact.bytecode,
        args,
      });
      const receipt = await client.waitForTransactionReceipt({ hash, pollingInterval: 10 });
      if (!receipt.contractAddress) throw new Error("deployment failed");
      return receipt.contractAddress;
    },
    async write(address, abi, functionName, args, from = 0) {
      const hash = await wallet(from).writeContract({ address, abi, functionName, args });
      const receipt = await client.waitForTransactionReceipt({ hash, pollingInterval: 10 });
      if (receipt.status !== "success") throw new Error(`${functionName} reverted`);
      return hash;
    },
    stop: () =>
      new Promise<void>((resolve) => {
        if (proc.exitCode !== null) return resolve();
        proc.once("exit", () => resolve());
        proc.kill("SIGTERM");
      }),
  };
}

/** Compiles one of ./contracts/*.sol with solc-js; returns its contracts by name. */
export function compile(file: string): Record<string, Artifact> {
  const input = {
    language: "Solidity",
    sources: { [file]: { content: readFileSync(path.join(CONTRACTS, file), "utf8") } },
    settings: {
      optimizer: { enabled: true, runs: 200 },
      outputSelection: { "*": { "*": ["abi", "evm.bytecode.object"] } },
    },
  };
  const output = JSON.parse(solc.compile(JSON.stringify(input)));
  const errors = (output.errors ?? []).filter((e: { severity: string }) => e.severity === "error");
  if (errors.length) throw new Error(errors.map((e: { message: string }) => e.message).join("\n"));
  const result: Record<string, Artifact> = {};
  for (const [name, c] of Object.entries(
    output.contracts[file] as Record<string, { abi: Abi; evm: { bytecode: { object: string } } }>,
  )) {
    result[name] = { abi: c.abi, bytecode: `0x${c.evm.bytecode.object}` };
  }
  return result;
}

/** The EAS package's own artifacts (@ethereum-attestation-service/eas-contracts 1.9.0). */
export function easArtifact(name: "EAS" | "SchemaRegistry"): Artifact {
  const a = JSON.parse(readFileSync(path.join(CONTRACTS, `eas-${name}.json`), "utf8"));
  return { abi: a.abi, bytecode: a.bytecode };
}
