/**
 * Values a caller should not pass, of every type: what a JavaScript caller
 * (or `any`) can hand to a public call. Each is made fresh by a factory, so
 * a call that mutates or consumes one cannot affect the next.
 */
export type Hostile = [label: string, make: () => unknown];

function nested(depth: number): unknown {
  let value: unknown = 'deep';
  for (let i = 0; i < depth; i++) value = { next: value };
  return value;
}

function cyclic(): unknown {
  const a: Record<string, unknown> = { name: 'a' };
  a.child = { parent: a };
  return a;
}

const throwing = () => {
  throw new Error('hostile trap');
};

/** A proxy each of whose traps throws. */
function trapsThrow(target: object = {}): unknown {
  return new Proxy(target, new Proxy({}, { get: () => throwing }));
}

function revoked(): unknown {
  const { proxy, revoke } = Proxy.revocable({}, {});
  revoke();
  return proxy;
}

export const HOSTILE: Hostile[] = [
  ['undefined', () => undefined],
  ['null', () => null],
  ['true', () => true],
  ['0', () => 0],
  ['-0', () => -0],
  ['-1', () => -1],
  ['1.5', () => 1.5],
  ['2 ** 53', () => 2 ** 53],
  ['NaN', () => Number.NaN],
  ['Infinity', () => Number.POSITIVE_INFINITY],
  ['-Infinity', () => Number.NEGATIVE_INFINITY],
  ['a bigint', () => 1n],
  ['a symbol', () => Symbol('hostile')],
  ['a function', () => () => 1],
  ['a class', () => class Hostile {}],
  ['an empty string', () => ''],
  ['a blank string', () => '   '],
  ['a 100,000-character string', () => 'x'.repeat(100_000)],
  ['a string with a NUL', () => 'a\u0000b'],
  ['a lone high surrogate', () => 'x\ud800'],
  ['a lone low surrogate', () => '\udc00x'],
  ['SQL', () => "'); DROP TABLE cyclone_runs; --"],
  ['a placeholder', () => '$1'],
  ['a UUID nobody has', () => '00000000-0000-7000-8000-000000000000'],
  ['a number as a string', () => '42'],
  ['an empty object', () => ({})],
  ['an empty array', () => []],
  ['an array with holes', () => [1, , 3]],
  ['an object without a prototype', () => Object.create(null)],
  ['an object without a prototype, with a key', () => Object.assign(Object.create(null), { a: 1 })],
  ['a Date', () => new Date('2026-01-02T03:04:05Z')],
  ['an invalid Date', () => new Date(Number.NaN)],
  ['a Date before 4713 BC', () => new Date(-8.64e15)],
  ['a Map', () => new Map([['a', 1]])],
  ['a Set', () => new Set([1])],
  ['a RegExp', () => /x/],
  ['a Promise', () => Promise.resolve(1)],
  ['an Error', () => new Error('hostile')],
  ['a Buffer', () => Buffer.from('hi')],
  ['a typed array', () => new Uint8Array([1, 2])],
  ['a boxed string', () => new String('boxed')],
  ['a boxed number', () => new Number(7)],
  ['a cyclic object', cyclic],
  ['an object nested 5,000 levels deep', () => nested(5_000)],
  ['an object with a NUL in a key', () => ({ ['k\u0000']: 1 })],
  ['an object whose toJSON throws', () => ({ toJSON: throwing })],
  ['an object whose toJSON returns a bigint', () => ({ toJSON: () => 1n })],
  ['an object whose toJSON returns a NUL', () => ({ toJSON: () => 'a\u0000b' })],
  ['an object with a getter that throws', () => Object.defineProperty({}, 'queue', { get: throwing, enumerable: true })],
  ['a proxy whose traps throw', () => trapsThrow()],
  ['a proxy of an array whose traps throw', () => trapsThrow([])],
  ['a revoked proxy', revoked],
  ['an object with __proto__ as a key', () => JSON.parse('{"__proto__": {"polluted": true}}')],
];
