/*
 * The only way the dashboard puts anything on the page: elements made with
 * createElement, text set as text nodes, attributes with setAttribute. No
 * HTML string is ever parsed, so a value from a job (an input, an error, a
 * kind, a queue name) is shown as the characters it is, whatever it holds.
 */

export type Child = Node | string | number | null | undefined | false | Child[];
type Listener = (event: Event) => void;
export type Attributes = Record<string, string | number | boolean | null | undefined | Listener>;

const SVG_NS = 'http://www.w3.org/2000/svg';

export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attributes?: Attributes | null,
  ...children: Child[]
): HTMLElementTagNameMap[K] {
  const element = document.createElement(tag);
  apply(element, attributes);
  append(element, children);
  return element;
}

export function s<K extends keyof SVGElementTagNameMap>(
  tag: K,
  attributes?: Attributes | null,
  ...children: Child[]
): SVGElementTagNameMap[K] {
  const element = document.createElementNS(SVG_NS, tag);
  apply(element, attributes);
  append(element, children);
  return element;
}

/** Replaces what an element holds. */
export function show(parent: Element, ...children: Child[]): void {
  parent.replaceChildren();
  append(parent, children);
}

function apply(element: Element, attributes: Attributes | null | undefined): void {
  for (const [name, value] of Object.entries(attributes ?? {})) {
    if (typeof value === 'function') {
      if (!name.startsWith('on')) throw new Error(`A listener needs an on... name, not ${name}`);
      element.addEventListener(name.slice(2), value);
    } else if (name.startsWith('on')) {
      // A value never becomes a handler.
      throw new Error(`Attribute ${name} takes a function`);
    } else if (value === true) {
      element.setAttribute(name, '');
    } else if (value !== false && value !== null && value !== undefined) {
      element.setAttribute(name, String(value));
    }
  }
}

function append(parent: Node, children: Child[]): void {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    if (Array.isArray(child)) append(parent, child);
    else parent.appendChild(typeof child === 'object' ? child : document.createTextNode(String(child)));
  }
}
