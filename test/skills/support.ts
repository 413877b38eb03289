import { writeZip, type ZipInput } from "../../app/server/skills/zip.server.ts";

// Skill folders for the marketplace tests: SKILL.md texts and zip archives, hostile ones too.

export function skillMd(
  name: string,
  version: string,
  body = "Answer with the word SKILLFUL.",
  extra = "",
): string {
  return `---\nname: ${name}\ndescription: "A test skill called ${name}."\nversion: ${version}\nuser-invocable: true\n${extra}---\n\n# ${name}\n\n${body}\n`;
}

export const zipBase64 = (files: ZipInput[]) => writeZip(files).toString("base64");

/** A zip whose one entry has the given raw unix mode (e.g. a symlink, 0o120777). */
export function zipWithMode(path: string, data: string, mode: number): string {
  const zip = writeZip([{ path, data: Buffer.from(data), mode: 0o644 }]);
  // writeZip stores regular-file modes; patch the central directory's external attributes.
  const cd = zip.lastIndexOf(Buffer.from([0x50, 0x4b, 0x01, 0x02]));
  zip.writeUInt32LE((mode << 16) >>> 0, cd + 38);
  return zip.toString("base64");
}
