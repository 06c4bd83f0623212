// A dependency-free SVG line plot with log-log axes (ms vs patches) for BENCHMARKS.md.
//   svgPlot({ title, xLabel, yLabel, series: [{ label, color, dash?, points: [[x, y], ...] }] }) -> string

const W = 720, H = 440, L = 78, R = 210, T = 40, B = 56;
const esc = (s) => String(s).replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
const fmt = (v) => (v >= 1000 ? `${+(v / 1000).toPrecision(3)} s`.replace(/\.0+ s/, ' s') : `${+v.toPrecision(3)} ms`);

/** Decade ticks (1, 2, 5 x 10^k) within [lo, hi]. */
function ticks(lo, hi) {
  const out = [];
  for (let e = Math.floor(Math.log10(lo)); e <= Math.ceil(Math.log10(hi)); e++)
    for (const m of [1, 2, 5]) { const v = m * 10 ** e; if (v >= lo * 0.999 && v <= hi * 1.001) out.push(v); }
  return out;
}

export function svgPlot({ title, xLabel, yLabel, series, xTicks }) {
  const pts = series.flatMap((s) => s.points);
  if (!pts.length) throw new Error('svgPlot: no points');
  const xs = pts.map((p) => p[0]), ys = pts.map((p) => p[1]);
  const x0 = Math.min(...xs) / 1.25, x1 = Math.max(...xs) * 1.25, y0 = Math.min(...ys) / 1.6, y1 = Math.max(...ys) * 1.6;
  const px = (x) => L + ((Math.log(x) - Math.log(x0)) / (Math.log(x1) - Math.log(x0))) * (W - L - R);
  const py = (y) => H - B - ((Math.log(y) - Math.log(y0)) / (Math.log(y1) - Math.log(y0))) * (H - T - B);
  const o = [`<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="12">`,
    `<rect width="${W}" height="${H}" fill="white"/>`,
    `<text x="${L}" y="${T - 16}" font-size="14" font-weight="bold">${esc(title)}</text>`];
  for (const v of ticks(y0, y1)) {
    o.push(`<line x1="${L}" x2="${W - R}" y1="${py(v).toFixed(1)}" y2="${py(v).toFixed(1)}" stroke="#ddd"/>`,
      `<text x="${L - 6}" y="${(py(v) + 4).toFixed(1)}" text-anchor="end">${esc(fmt(v))}</text>`);
  }
  for (const v of xTicks ?? [...new Set(xs)]) {
    o.push(`<line x1="${px(v).toFixed(1)}" x2="${px(v).toFixed(1)}" y1="${T}" y2="${H - B}" stroke="#ddd"/>`,
      `<text x="${px(v).toFixed(1)}" y="${H - B + 16}" text-anchor="middle">${v.toLocaleString('en-US')}</text>`);
  }
  o.push(`<rect x="${L}" y="${T}" width="${W - L - R}" height="${H - T - B}" fill="none" stroke="#444"/>`,
    `<text x="${(L + W - R) / 2}" y="${H - 14}" text-anchor="middle">${esc(xLabel)}</text>`,
    `<text transform="translate(16 ${(T + H - B) / 2}) rotate(-90)" text-anchor="middle">${esc(yLabel)}</text>`);
  series.forEach((s, i) => {
    const p = [...s.points].sort((a, b) => a[0] - b[0]);
    const dash = s.dash ? ` stroke-dasharray="${s.dash}"` : '';
    if (p.length > 1) o.push(`<polyline fill="none" stroke="${s.color}" stroke-width="2"${dash} points="${p.map(([x, y]) => `${px(x).toFixed(1)},${py(y).toFixed(1)}`).join(' ')}"/>`);
    for (const [x, y] of p) o.push(`<circle cx="${px(x).toFixed(1)}" cy="${py(y).toFixed(1)}" r="3" fill="${s.color}"/>`);
    const ly = T + 10 + i * 20;
    o.push(`<line x1="${W - R + 14}" x2="${W - R + 40}" y1="${ly}" y2="${ly}" stroke="${s.color}" stroke-width="2"${dash}/>`,
      `<text x="${W - R + 46}" y="${ly + 4}">${esc(s.label)}</text>`);
  });
  o.push('</svg>');
  return o.join('\n') + '\n';
}
