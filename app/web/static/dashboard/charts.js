// Charts: uPlot (vendored, global `uPlot`) for time series; bars and the heatmap are plain
// elements sized with CSSOM (allowed by the page's style-src 'self'). Colours are the
// Okabe-Ito palette, which stays distinguishable with every common colour-vision deficiency.

import { el, percent } from "./dom.js";

export const PALETTE = {
  open: "#0072B2", click: "#E69F00", report: "#009E73", fail: "#D55E00", other: "#CC79A7",
};

/** A line chart of rates (0 to 1) by period; series are [label, values, colour]. */
export function rateChart(title, periods, series) {
  const box = el("figure", { class: "chart", role: "img", "aria-label": title });
  const xs = periods.map((day) => Date.parse(`${day}T00:00:00Z`) / 1000);
  const options = {
    title,
    width: 640,
    height: 260,
    scales: { y: { range: [0, 1] } },
    axes: [{}, { values: (u, ticks) => ticks.map((tick) => `${Math.round(tick * 100)} %`) }],
    series: [{ value: (u, ts) => (ts ? new Date(ts * 1000).toISOString().slice(0, 10) : "") },
      ...series.map(([label, , stroke]) => ({
        label, stroke, width: 2, value: (u, value) => percent(value),
      }))],
  };
  const plot = new uPlot(options, [xs, ...series.map(([, values]) => values)], box);
  const fit = () => plot.setSize({ width: Math.max(280, box.clientWidth), height: 260 });
  requestAnimationFrame(fit);
  new ResizeObserver(fit).observe(box);
  return box;
}

/** A campaign's funnel as horizontal bars: each step's count of the API, against targets. */
export function funnel(title, record) {
  const steps = [["Targets", record.targets, PALETTE.other], ["Opened", record.opened, PALETTE.open],
    ["Clicked", record.clicked, PALETTE.click], ["Reported", record.reported, PALETTE.report],
    ["Failed", record.failed, PALETTE.fail]];
  return el("figure", { class: "funnel", "aria-label": title },
    el("figcaption", {}, title),
    steps.map(([label, count, colour]) => {
      const bar = el("span", { class: "bar" });
      bar.style.width = `${record.targets ? (100 * count) / record.targets : 0}%`;
      bar.style.background = colour;
      return el("div", { class: "step" }, el("span", { class: "label" }, label),
        el("span", { class: "track" }, bar), el("span", { class: "count num" }, String(count)));
    }));
}

/** WCAG 2's relative luminance of an sRGB colour ([r, g, b], 0 to 255). */
function luminance(rgb) {
  const [r, g, b] = rgb.map((value) => {
    const c = value / 255;
    return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4;
  });
  return 0.2126 * r + 0.7152 * g + 0.0722 * b;
}

/**
 * A sequential colour (light yellow to dark blue, like cividis) for a rate of 0 to 1, and
 * its text colour: black or white, whichever contrasts more. Mid-scale colours fall below
 * 4.5:1 (WCAG AA) with the page's dark grey and with white, but the better of black and
 * white is at least 4.58:1 on any background.
 */
export function heatColour(rate) {
  const low = [255, 234, 70], high = [0, 34, 78];
  const mix = low.map((start, i) => Math.round(start + (high[i] - start) * rate));
  const light = luminance(mix) + 0.05;
  return { background: `rgb(${mix.join(",")})`, text: 1.05 / light > light / 0.05 ? "#fff" : "#000" };
}
