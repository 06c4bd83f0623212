// Compile-time agreement between a public interface and the zod schema that checks it at run time.
// The interfaces are what a user's TypeScript reads (the published .d.ts never mentions zod); the
// schemas are the one validator. Beside each pair stands a non-exported
//   type _Agrees = Assert<Equals<z.input<typeof Schema>, PublicInterface>>;
// so `npm run typecheck` fails the moment the two describe different objects.

/**
 * true when A and B are the same type, not merely assignable to each other: optional and required
 * keys, readonly, `any` and a narrower literal union all tell apart.
 * @internal
 */
export type Equals<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;

/** Compiles only when T is `true`. @internal */
export type Assert<T extends true> = T;

/** T's keys as one object type: an intersection or an Omit flattened, for Equals. @internal */
export type Flat<T> = { [K in keyof T]: T[K] };
