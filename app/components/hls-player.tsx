import { useEffect, useRef, useState } from "react";

/** native: the browser plays HLS itself; loading/ready/error: hls.js over Media Source. */
type PlayerState = "native" | "loading" | "ready" | "error" | "unsupported";

const HLS_TYPE = "application/vnd.apple.mpegurl";

/**
 * A video player for an HLS playback URL. Safari and mobile browsers play HLS natively (the
 * `<source>` works without JavaScript); elsewhere hls.js, loaded only when needed, feeds the
 * stream to the video element through Media Source Extensions.
 */
export function HlsPlayer({ src, className }: { src: string; className?: string }) {
  const video = useRef<HTMLVideoElement>(null);
  const [state, setState] = useState<PlayerState>("native");

  useEffect(() => {
    const element = video.current;
    if (!element || element.canPlayType(HLS_TYPE)) return;
    let cancelled = false;
    let destroy: (() => void) | undefined;
    setState("loading");
    import("hls.js")
      .then(({ default: Hls }) => {
        if (cancelled) return;
        if (!Hls.isSupported()) {
          setState("unsupported");
          return;
        }
        const hls = new Hls();
        destroy = () => hls.destroy();
        hls.on(Hls.Events.MANIFEST_PARSED, () => setState("ready"));
        hls.on(Hls.Events.ERROR, (_event, data) => {
          if (data.fatal) setState("error");
        });
        hls.loadSource(src);
        hls.attachMedia(element);
      })
      .catch(() => {
        if (!cancelled) setState("error");
      });
    return () => {
      cancelled = true;
      destroy?.();
    };
  }, [src]);

  return (
    <div>
      <video ref={video} controls muted playsInline className={className} data-player={state}>
        <source src={src} type={HLS_TYPE} />
        <track kind="captions" />
      </video>
      {state === "error" ? (
        <p className="text-sm text-slate-600">The stream is not live yet, or cannot be reached.</p>
      ) : null}
      {state === "unsupported" ? (
        <p className="text-sm text-slate-600">This browser cannot play HLS; open the link above.</p>
      ) : null}
    </div>
  );
}
