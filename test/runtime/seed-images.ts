import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import {
  existsSync,
  linkSync,
  mkdirSync,
  readFileSync,
  renameSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import path from "node:path";
import type Docker from "dockerode";
import { z } from "zod";

// Puts images of the machine's engine into a test swarm node's data root before that node's
// dockerd starts, instead of `docker save | docker load`: an 860 MB gateway image costs a load
// ~29 s of CPU per node (tar, untar and digests; about 90 CPU-seconds of a fresh run for the
// gateway and platform images on two nodes). Both engines use the overlay2 graph driver, whose
// on-disk layout is copied: the image config (imagedb), each layer's metadata (layerdb, by chain
// id) and its extracted files (overlay2/<cache id>; hard links where the two data roots share a
// mount, else a plain copy; never written to: a container writes to its own upper dir), the
// layer's short link and the tag. Only for overlay2 on both sides; otherwise nothing is seeded
// and the caller's `loadImage` loads the image as before (it skips an image a node holds).

const HostInfo = z.object({ Driver: z.string(), DockerRootDir: z.string() });
const ImageInfo = z.object({
  Id: z.string().regex(/^sha256:[0-9a-f]{64}$/),
  RepoTags: z.array(z.string()).nullish(),
  RootFS: z.object({ Layers: z.array(z.string().regex(/^sha256:[0-9a-f]{64}$/)) }),
});
const Repositories = z.object({
  Repositories: z.record(z.string(), z.record(z.string(), z.string())).default({}),
});

const hex = (digest: string) => digest.replace(/^sha256:/, "");

/** The layer chain ids of an image's diff ids (the layer store's keys). */
function chainIds(diffIds: string[]): string[] {
  const out: string[] = [];
  for (const diff of diffIds) {
    const parent = out.at(-1);
    out.push(
      parent ? `sha256:${createHash("sha256").update(`${parent} ${diff}`).digest("hex")}` : diff,
    );
  }
  return out;
}

/**
 * `cp -a` (with `link`: hard links for files) under a temporary name, then renamed: a run killed
 * mid-copy leaves nothing that looks whole. The target's parent must exist.
 */
function copy(from: string, to: string, link = false): void {
  const partial = `${to}.partial`;
  rmSync(partial, { recursive: true, force: true });
  execFileSync("cp", ["-a", link ? "--link" : "--reflink=auto", from, partial], { stdio: "pipe" });
  renameSync(partial, to);
}

/** Whether files under `from` can be hard-linked into `to` (one mount: a bind mount is not). */
function canLink(from: string, to: string): boolean {
  const probe = path.join(to, `.link-probe-${process.pid}`);
  try {
    linkSync(from, probe);
    return true;
  } catch {
    return false;
  } finally {
    rmSync(probe, { force: true });
  }
}

/**
 * Seeds `images` (references on `host`) into `dataRoot`, whose dockerd must not be running, from
 * the data root `sourceRoot` (default: the host engine's own; another node's seeded data root
 * holds the same files under the same ids, and shares a mount with this one, so it links).
 * Returns the references it seeded; none when the engines' storage does not allow it.
 */
export async function seedImages(
  host: Docker,
  dataRoot: string,
  images: string[],
  sourceRoot?: string,
): Promise<string[]> {
  const info = HostInfo.parse(await host.info());
  const hostRoot = sourceRoot ?? info.DockerRootDir;
  mkdirSync(dataRoot, { recursive: true });
  if (info.Driver !== "overlay2" || !existsSync(path.join(hostRoot, "overlay2"))) return [];
  // A node data root that already holds another graph driver's data is left to `docker load`.
  const others = ["vfs", "fuse-overlayfs", "btrfs", "zfs", "devicemapper"];
  if (others.some((d) => existsSync(path.join(dataRoot, d)))) return [];

  const from = {
    image: path.join(hostRoot, "image/overlay2"),
    graph: path.join(hostRoot, "overlay2"),
  };
  const to = {
    image: path.join(dataRoot, "image/overlay2"),
    graph: path.join(dataRoot, "overlay2"),
  };
  for (const dir of [
    path.join(to.image, "layerdb/sha256"),
    path.join(to.image, "imagedb/content/sha256"),
    path.join(to.image, "imagedb/metadata/sha256"),
    path.join(to.graph, "l"),
  ]) {
    mkdirSync(dir, { recursive: true });
  }
  const reposFile = path.join(to.image, "repositories.json");
  const repos = existsSync(reposFile)
    ? Repositories.parse(JSON.parse(readFileSync(reposFile, "utf8")))
    : { Repositories: {} as Record<string, Record<string, string>> };

  // Hard links where the two data roots share a mount; copies otherwise (no tar, no digests).
  let link: boolean | undefined;
  const seeded: string[] = [];
  for (const ref of images) {
    const image = ImageInfo.parse(await host.getImage(ref).inspect());
    // By tag only (`name:tag`, as the tests name their images): that is what the node is asked for.
    if (!image.RepoTags?.includes(ref)) continue;
    const chains = chainIds(image.RootFS.Layers).map(hex);
    const cacheIdOf = (root: string, chain: string) => {
      const file = path.join(root, "layerdb/sha256", chain, "cache-id");
      return existsSync(file) ? readFileSync(file, "utf8").trim() : undefined;
    };
    // A layer the node loaded itself has its own cache id, and the source's layers above it name
    // their lower layers by the source's links: such an image is left to `docker load`, as is
    // one the source does not hold whole.
    if (
      chains.some((c) => {
        const source = cacheIdOf(from.image, c);
        const own = cacheIdOf(to.image, c);
        return source === undefined || (own !== undefined && own !== source);
      }) ||
      !existsSync(path.join(from.image, "imagedb/content/sha256", hex(image.Id)))
    ) {
      continue;
    }
    link ??= canLink(path.join(from.image, "imagedb/content/sha256", hex(image.Id)), to.image);
    for (const chain of chains) {
      const layer = path.join(to.image, "layerdb/sha256", chain);
      if (existsSync(layer)) continue;
      const source = path.join(from.image, "layerdb/sha256", chain);
      const cacheId = cacheIdOf(from.image, chain) as string;
      const short = readFileSync(path.join(from.graph, cacheId, "link"), "utf8").trim();
      const files = path.join(to.graph, cacheId);
      if (!existsSync(files)) copy(path.join(from.graph, cacheId), files, link);
      const shortLink = path.join(to.graph, "l", short);
      if (!existsSync(shortLink)) symlinkSync(`../${cacheId}/diff`, shortLink);
      // Last: a layer the store lists is a complete one.
      copy(source, layer);
    }
    const id = hex(image.Id);
    const content = path.join(to.image, "imagedb/content/sha256", id);
    if (!existsSync(content)) copy(path.join(from.image, "imagedb/content/sha256", id), content);
    const metadata = path.join(from.image, "imagedb/metadata/sha256", id);
    const metadataTo = path.join(to.image, "imagedb/metadata/sha256", id);
    if (existsSync(metadata) && !existsSync(metadataTo)) copy(metadata, metadataTo);
    const repo = ref.slice(0, ref.lastIndexOf(":"));
    repos.Repositories[repo] = { ...repos.Repositories[repo], [ref]: image.Id };
    seeded.push(ref);
  }
  writeFileSync(reposFile, JSON.stringify(repos));
  return seeded;
}
