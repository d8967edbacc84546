import { encodePng } from '../images/png.js';
import type { UiWorkflow } from './stock-workflows.js';

// A template's picture in the template dialog: the graph itself, drawn small (node boxes with
// their title bars, links coloured by type as the front end colours them), so the picture always
// matches the workflow it stands for.

const WIDTH = 512;
const TITLE = 30;
const MARGIN = 24;
type Rgb = [number, number, number];
const BACKGROUND: Rgb = [32, 32, 32];
const BODY: Rgb = [53, 53, 53];
const TITLE_BAR: Rgb = [34, 34, 34];
const LINK_COLORS: Record<string, Rgb> = {
  MODEL: [179, 157, 219],
  CLIP: [255, 213, 0],
  VAE: [255, 110, 110],
  CONDITIONING: [255, 169, 49],
  LATENT: [255, 156, 249],
  IMAGE: [100, 181, 246],
};

export function graphThumbnail(workflow: UiWorkflow): Buffer {
  const xs = workflow.nodes.flatMap((n) => [n.pos[0], n.pos[0] + n.size[0]]);
  const ys = workflow.nodes.flatMap((n) => [n.pos[1] - TITLE, n.pos[1] + n.size[1]]);
  const [minX, minY] = [Math.min(...xs) - MARGIN, Math.min(...ys) - MARGIN];
  const scale = WIDTH / (Math.max(...xs) + MARGIN - minX);
  const height = Math.ceil((Math.max(...ys) + MARGIN - minY) * scale);
  const rgba = new Uint8Array(WIDTH * height * 4);
  const at = (x: number, y: number): [number, number] => [Math.round((x - minX) * scale), Math.round((y - minY) * scale)];
  const put = (x: number, y: number, [r, g, b]: Rgb) => {
    if (x < 0 || y < 0 || x >= WIDTH || y >= height) return;
    rgba.set([r, g, b, 255], (y * WIDTH + x) * 4);
  };
  const fill = (x0: number, y0: number, x1: number, y1: number, color: Rgb) => {
    for (let y = y0; y < y1; y++) for (let x = x0; x < x1; x++) put(x, y, color);
  };
  fill(0, 0, WIDTH, height, BACKGROUND);
  for (const [, from, fromSlot, to, toSlot, type] of workflow.links) {
    const a = workflow.nodes.find((n) => n.id === from);
    const b = workflow.nodes.find((n) => n.id === to);
    if (!a || !b) continue;
    const [x0, y0] = at(a.pos[0] + a.size[0], a.pos[1] + 14 + fromSlot * 20);
    const [x1, y1] = at(b.pos[0], b.pos[1] + 14 + toSlot * 20);
    const steps = Math.max(Math.abs(x1 - x0), Math.abs(y1 - y0), 1);
    for (let i = 0; i <= steps; i++) {
      const x = Math.round(x0 + ((x1 - x0) * i) / steps);
      const y = Math.round(y0 + ((y1 - y0) * i) / steps);
      fill(x, y, x + 2, y + 2, LINK_COLORS[type] ?? [200, 200, 200]);
    }
  }
  for (const n of workflow.nodes) {
    const [x0, top] = at(n.pos[0], n.pos[1] - TITLE);
    const [x1, y0] = at(n.pos[0] + n.size[0], n.pos[1]);
    const [, y1] = at(n.pos[0], n.pos[1] + n.size[1]);
    fill(x0, top, x1, y0, TITLE_BAR);
    fill(x0, y0, x1, y1, BODY);
  }
  return encodePng({ width: WIDTH, height, rgba }, 9);
}
