// Accessibility checks run in the page by test_accessibility.py.
({
  // Controls without an accessible name: no <label for>, no wrapping label, no aria-label.
  unlabelled: () => [...document.querySelectorAll(
      "input:not([type=hidden]), select, textarea, button")]
    .filter(el => !(el.labels && el.labels.length) && !el.getAttribute("aria-label")
      && !(el.tagName === "BUTTON" && el.textContent.trim()))
    .map(el => el.outerHTML),

  // WCAG 2 contrast of each visible text's colour on its nearest opaque background.
  lowContrast: () => {
    const rgb = s => (s.match(/[\d.]+/g) || []).map(Number);
    const lum = ([r, g, b]) => [r, g, b].map(v => {
      v /= 255;
      return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4);
    }).reduce((a, v, i) => a + v * [0.2126, 0.7152, 0.0722][i], 0);
    const bg = el => {
      for (; el; el = el.parentElement) {
        const c = rgb(getComputedStyle(el).backgroundColor);
        if (c.length === 3 || c[3] > 0.5) return c.slice(0, 3);
      }
      return [255, 255, 255];
    };
    const bad = [];
    for (const el of document.querySelectorAll("body *")) {
      const own = [...el.childNodes].some(n => n.nodeType === 3 && n.textContent.trim());
      if (!own || !el.getClientRects().length) continue;
      const a = lum(rgb(getComputedStyle(el).color)), b = lum(bg(el));
      const ratio = (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
      if (ratio < 4.5) bad.push(el.tagName + " " + el.textContent.trim().slice(0, 30)
                                + " " + ratio.toFixed(2));
    }
    return bad;
  },
})
