import { useEffect, useState } from 'preact/hooks';
import { fetchText, type Output } from './api.js';
import { bytes } from './format.js';

/** What player an output or asset gets: by its declared type, else by its media type. */
export function mediaKind(type: string | null, contentType: string): 'image' | 'video' | 'audio' | 'text' | 'file' {
  if (type === 'image' || type === 'video' || type === 'audio' || type === 'text') return type;
  if (type) return 'file';
  const major = contentType.split('/')[0];
  if (major === 'image' || major === 'video' || major === 'audio') return major;
  if (major === 'text' || /json|xml/.test(contentType)) return 'text';
  return 'file';
}

function TextPreview({ url }: { url: string }) {
  const [text, setText] = useState<string | null>(null);
  const [failed, setFailed] = useState(false);
  useEffect(() => {
    let live = true;
    fetchText(url).then(
      (t) => live && setText(t),
      () => live && setFailed(true),
    );
    return () => {
      live = false;
    };
  }, [url]);
  if (failed) return <p class="muted">The text could not be shown here; download it instead.</p>;
  return <pre class="text-output">{text ?? 'Loading…'}</pre>;
}

/** One file with the right player: image, video, audio, text, or just its download link. */
export function MediaView({ name, url, contentType, type = null, size }: { name: string; url: string; contentType: string; type?: string | null; size?: number }) {
  const kind = mediaKind(type, contentType);
  return (
    <figure class={`media media-${kind}`}>
      {kind === 'image' ? <img src={url} alt={name} loading="lazy" /> : null}
      {kind === 'video' ? <video src={url} controls preload="metadata" aria-label={name} /> : null}
      {kind === 'audio' ? <audio src={url} controls preload="metadata" aria-label={name} /> : null}
      {kind === 'text' ? <TextPreview url={url} /> : null}
      <figcaption>
        <span class="name">{name}</span> <span class="muted">{contentType}{size !== undefined ? `, ${bytes(size)}` : ''}</span>{' '}
        <a href={url} download={name} rel="noreferrer">
          Download<span class="visually-hidden"> {name}</span>
        </a>
      </figcaption>
    </figure>
  );
}

export function OutputGallery({ outputs }: { outputs: Output[] }) {
  if (outputs.length === 0) return <p class="muted">No outputs yet.</p>;
  return (
    <div class="gallery">
      {outputs.map((o) => (
        <MediaView key={o.id} name={o.name} url={o.url} contentType={o.content_type} type={o.type} size={o.size_bytes} />
      ))}
    </div>
  );
}
