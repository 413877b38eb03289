import { crc32, deflateRawSync, inflateRawSync } from "node:zlib";

// A small zip reader and writer on node:zlib: skill archives are zips because that is what the
// OpenClaw gateway installs (skills.upload.* takes a zip with SKILL.md at its root). The reader
// refuses what a skill archive never needs (zip64, encryption, methods other than store and
// deflate) and never inflates past the caller's byte budget, so a zip bomb stops early.

export interface ZipEntry {
  path: string;
  /** Unix mode bits of the entry (file type and permissions); 0 when the archive has none. */
  mode: number;
  isDirectory: boolean;
  uncompressedSize: number;
  /** Reads the entry's bytes, at most `maxBytes`. */
  read(maxBytes: number): Buffer;
}

export class ZipError extends Error {}

const EOCD = 0x06054b50;
const CENTRAL = 0x02014b50;
const LOCAL = 0x04034b50;

/** The entries of a zip archive (central directory order). Throws ZipError when it is not one. */
export function readZip(bytes: Buffer): ZipEntry[] {
  const minEocd = 22;
  if (bytes.length < minEocd) throw new ZipError("not a zip archive");
  let eocd = -1;
  for (let i = bytes.length - minEocd; i >= Math.max(0, bytes.length - minEocd - 0xffff); i--) {
    if (bytes.readUInt32LE(i) === EOCD) {
      eocd = i;
      break;
    }
  }
  if (eocd < 0) throw new ZipError("not a zip archive");
  const count = bytes.readUInt16LE(eocd + 10);
  const cdSize = bytes.readUInt32LE(eocd + 12);
  const cdOffset = bytes.readUInt32LE(eocd + 16);
  if (count === 0xffff || cdOffset === 0xffffffff)
    throw new ZipError("zip64 archives are not supported");
  if (cdOffset + cdSize > eocd) throw new ZipError("corrupt zip archive");
  const entries: ZipEntry[] = [];
  let p = cdOffset;
  for (let n = 0; n < count; n++) {
    if (p + 46 > bytes.length || bytes.readUInt32LE(p) !== CENTRAL) {
      throw new ZipError("corrupt zip archive");
    }
    const madeBy = bytes.readUInt16LE(p + 4);
    const flags = bytes.readUInt16LE(p + 8);
    const method = bytes.readUInt16LE(p + 10);
    const crc = bytes.readUInt32LE(p + 16);
    const compressedSize = bytes.readUInt32LE(p + 20);
    const uncompressedSize = bytes.readUInt32LE(p + 24);
    const nameLen = bytes.readUInt16LE(p + 28);
    const extraLen = bytes.readUInt16LE(p + 30);
    const commentLen = bytes.readUInt16LE(p + 32);
    const external = bytes.readUInt32LE(p + 38);
    const localOffset = bytes.readUInt32LE(p + 42);
    const path = bytes.subarray(p + 46, p + 46 + nameLen).toString("utf8");
    p += 46 + nameLen + extraLen + commentLen;
    if (flags & 1) throw new ZipError(`${path}: encrypted entries are not supported`);
    if (method !== 0 && method !== 8) {
      throw new ZipError(`${path}: compression method ${method} is not supported`);
    }
    if (localOffset + 30 > bytes.length || bytes.readUInt32LE(localOffset) !== LOCAL) {
      throw new ZipError("corrupt zip archive");
    }
    const dataStart =
      localOffset +
      30 +
      bytes.readUInt16LE(localOffset + 26) +
      bytes.readUInt16LE(localOffset + 28);
    if (dataStart + compressedSize > bytes.length) throw new ZipError("corrupt zip archive");
    // Unix hosts (3) keep st_mode in the high half of the external attributes.
    const mode = madeBy >> 8 === 3 ? external >>> 16 : 0;
    const data = bytes.subarray(dataStart, dataStart + compressedSize);
    entries.push({
      path,
      mode,
      isDirectory: path.endsWith("/") || (mode & 0o170000) === 0o040000,
      uncompressedSize,
      read(maxBytes: number) {
        if (uncompressedSize > maxBytes)
          throw new ZipError(`${path}: larger than ${maxBytes} bytes`);
        let out: Buffer;
        try {
          out =
            method === 0 ? Buffer.from(data) : inflateRawSync(data, { maxOutputLength: maxBytes });
        } catch {
          throw new ZipError(`${path}: corrupt or larger than ${maxBytes} bytes`);
        }
        if (out.length !== uncompressedSize || crc32(out) !== crc) {
          throw new ZipError(`${path}: corrupt entry`);
        }
        return out;
      },
    });
  }
  return entries;
}

export interface ZipInput {
  path: string;
  data: Buffer;
  /** Permission bits (0o644, 0o755); regular files only. */
  mode: number;
}

/** A deterministic zip (fixed timestamps, given order) of regular files. */
export function writeZip(files: ZipInput[]): Buffer {
  const locals: Buffer[] = [];
  const centrals: Buffer[] = [];
  let offset = 0;
  const dosDate = (1 << 5) | 1; // 1980-01-01
  for (const file of files) {
    const name = Buffer.from(file.path, "utf8");
    const compressed = deflateRawSync(file.data);
    const crc = crc32(file.data);
    const local = Buffer.alloc(30);
    local.writeUInt32LE(LOCAL, 0);
    local.writeUInt16LE(20, 4);
    local.writeUInt16LE(0x0800, 6); // UTF-8 names
    local.writeUInt16LE(8, 8);
    local.writeUInt16LE(0, 10);
    local.writeUInt16LE(dosDate, 12);
    local.writeUInt32LE(crc, 14);
    local.writeUInt32LE(compressed.length, 18);
    local.writeUInt32LE(file.data.length, 22);
    local.writeUInt16LE(name.length, 26);
    local.writeUInt16LE(0, 28);
    const central = Buffer.alloc(46);
    central.writeUInt32LE(CENTRAL, 0);
    central.writeUInt16LE((3 << 8) | 20, 4);
    central.writeUInt16LE(20, 6);
    central.writeUInt16LE(0x0800, 8);
    central.writeUInt16LE(8, 10);
    central.writeUInt16LE(0, 12);
    central.writeUInt16LE(dosDate, 14);
    central.writeUInt32LE(crc, 16);
    central.writeUInt32LE(compressed.length, 20);
    central.writeUInt32LE(file.data.length, 24);
    central.writeUInt16LE(name.length, 28);
    central.writeUInt32LE(((0o100000 | (file.mode & 0o777)) << 16) >>> 0, 38);
    central.writeUInt32LE(offset, 42);
    locals.push(local, name, compressed);
    centrals.push(central, name);
    offset += local.length + name.length + compressed.length;
  }
  const cd = Buffer.concat(centrals);
  const end = Buffer.alloc(22);
  end.writeUInt32LE(EOCD, 0);
  end.writeUInt16LE(files.length, 8);
  end.writeUInt16LE(files.length, 10);
  end.writeUInt32LE(cd.length, 12);
  end.writeUInt32LE(offset, 16);
  return Buffer.concat([...locals, cd, end]);
}
