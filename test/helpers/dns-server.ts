import { createSocket, type Socket } from "node:dgram";
import type { AddressInfo } from "node:net";

// A tiny authoritative DNS server on loopback (UDP) that answers TXT questions from a table the
// test fills, so the domain verification goes through node:dns and a real DNS exchange
// (DNS_RESOLVER=127.0.0.1:<port>). Any other question, or a name with no records: NXDOMAIN.

export interface DnsServer {
  /** `127.0.0.1:<port>`, for DNS_RESOLVER. */
  address: string;
  /** TXT records by lower-case name (each record one string). */
  txt: Map<string, string[]>;
  /** Questions asked, as `name TYPE`. */
  asked: string[];
  close(): Promise<void>;
}

function readName(msg: Buffer, start: number): { name: string; end: number } {
  const labels: string[] = [];
  let at = start;
  for (;;) {
    const length = msg[at];
    if (length === undefined) throw new Error("truncated question");
    if (length === 0) return { name: labels.join("."), end: at + 1 };
    labels.push(msg.subarray(at + 1, at + 1 + length).toString("latin1"));
    at += 1 + length;
  }
}

/** A TXT record's data: each string as a length byte and up to 255 bytes. */
function txtData(value: string): Buffer {
  const bytes = Buffer.from(value, "utf8");
  const parts: Buffer[] = [];
  for (let i = 0; i < bytes.length || i === 0; i += 255) {
    const chunk = bytes.subarray(i, i + 255);
    parts.push(Buffer.from([chunk.length]), chunk);
    if (bytes.length === 0) break;
  }
  return Buffer.concat(parts);
}

function answer(query: Buffer, txt: Map<string, string[]>, asked: string[]): Buffer {
  const { name, end } = readName(query, 12);
  const type = query.readUInt16BE(end);
  asked.push(`${name} ${type === 16 ? "TXT" : type}`);
  const question = query.subarray(12, end + 4);
  const records = type === 16 ? (txt.get(name.toLowerCase()) ?? []) : [];
  const header = Buffer.alloc(12);
  header.writeUInt16BE(query.readUInt16BE(0), 0); // the query's id
  // QR, AA, RD copied, RA; NXDOMAIN when there is nothing.
  const rd = query.readUInt16BE(2) & 0x0100;
  header.writeUInt16BE(0x8400 | rd | 0x0080 | (records.length ? 0 : 3), 2);
  header.writeUInt16BE(1, 4);
  header.writeUInt16BE(records.length, 6);
  const answers = records.map((value) => {
    const data = txtData(value);
    const rr = Buffer.alloc(12);
    rr.writeUInt16BE(0xc00c, 0); // the question's name
    rr.writeUInt16BE(16, 2); // TXT
    rr.writeUInt16BE(1, 4); // IN
    rr.writeUInt32BE(60, 6);
    rr.writeUInt16BE(data.length, 10);
    return Buffer.concat([rr, data]);
  });
  return Buffer.concat([header, question, ...answers]);
}

export async function startDnsServer(): Promise<DnsServer> {
  const txt = new Map<string, string[]>();
  const asked: string[] = [];
  const socket: Socket = createSocket("udp4");
  socket.on("message", (msg, peer) => {
    try {
      socket.send(answer(msg, txt, asked), peer.port, peer.address);
    } catch {
      // a malformed question gets no answer
    }
  });
  await new Promise<void>((resolve) => socket.bind(0, "127.0.0.1", resolve));
  const { port } = socket.address() as AddressInfo;
  return {
    address: `127.0.0.1:${port}`,
    txt,
    asked,
    close: () => new Promise<void>((resolve) => socket.close(() => resolve())),
  };
}
