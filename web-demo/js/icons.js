// Small inline SVG icons: the page must not depend on an emoji font being installed.

const PATHS = {
  restart: '<rect x="2.5" y="3" width="2" height="10"/><path d="M13 3 5.5 8l7.5 5z"/>',
  back: '<path d="M11 3 4 8l7 5z"/>',
  play: '<path d="M4 2.5v11L13 8z"/>',
  pause: '<path d="M4 3h3v10H4zM9 3h3v10H9z"/>',
  fwd: '<path d="M5 3l7 5-7 5z"/>',
  end: '<rect x="11.5" y="3" width="2" height="10"/><path d="M3 3l7.5 5L3 13z"/>',
  link: '<path d="M7 9a3 3 0 0 0 4.2 0l2-2a3 3 0 0 0-4.2-4.2l-.8.8M9 7a3 3 0 0 0-4.2 0l-2 2a3 3 0 0 0 4.2 4.2l.8-.8" fill="none" stroke="currentColor" stroke-width="1.6" stroke-linecap="round"/>',
  download: '<path d="M8 2v8M4.5 6.5 8 10l3.5-3.5M3 13h10" fill="none" stroke="currentColor" stroke-width="1.7" stroke-linecap="round" stroke-linejoin="round"/>',
  replay: '<path d="M3.5 8a4.5 4.5 0 1 0 1.4-3.3M4.5 2v3h3" fill="none" stroke="currentColor" stroke-width="1.6" stroke-linecap="round" stroke-linejoin="round"/>',
  dice: '<rect x="2.5" y="2.5" width="11" height="11" rx="2.5" fill="none" stroke="currentColor" stroke-width="1.5"/><circle cx="5.7" cy="5.7" r="1.1"/><circle cx="10.3" cy="10.3" r="1.1"/><circle cx="8" cy="8" r="1.1"/>',
  check: '<path d="M3 8.5 6.5 12 13 4.5" fill="none" stroke="currentColor" stroke-width="2" stroke-linecap="round" stroke-linejoin="round"/>',
};

/** An icon as inline SVG (decorative: pair it with text or an aria-label). */
export function icon(name) {
  return `<svg class="icon" viewBox="0 0 16 16" width="14" height="14" aria-hidden="true" fill="currentColor">${PATHS[name]}</svg>`;
}

/** Puts icons into every `[data-icon]` element of `root`, before its text. */
export function decorate(root = document) {
  for (const el of root.querySelectorAll("[data-icon]")) {
    if (!el.querySelector("svg.icon")) el.insertAdjacentHTML("afterbegin", icon(el.dataset.icon));
  }
}
