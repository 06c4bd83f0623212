// Which URLs the fleet takes and which hosts a worker may fetch from (docs/fleet.md#urls).
//
// A job's input is an absolute path or an http(s) URL; anything else that looks like a URL
// (file:, data:, ftp:, gopher:, ...) is refused where it is enqueued, so it never becomes a job
// for a "relative path" called `file:/etc/passwd`.
//
// A fleet takes URLs from whoever can enqueue, and its workers sit inside a network: a URL (or a
// redirect) to 127.0.0.1, to the cloud's metadata service at 169.254.169.254 or to an internal
// service would make a worker fetch what only it can reach and write it out as an "image"
// (server-side request forgery). So by default a worker refuses every address that is not public:
// the host's addresses are checked after DNS resolution, at the moment of connecting (the lookup
// the socket uses is the checked one, so a name cannot resolve to a public address for the check
// and a private one for the connection), at every redirect hop, of which there are at most
// MAX_REDIRECTS. Fleets that fetch from their own network opt in with `--allow-private-urls`
// (createWorker: `fetch: { allowPrivateUrls: true }`, or a list of the addresses and subnets
// allowed, `['10.1.2.0/24', '127.0.0.1']`, every other non-public address staying refused).
import { lookup as dnsLookup, type LookupAddress, type LookupOptions } from 'node:dns';
import { BlockList, isIP } from 'node:net';
import { TesseraError } from '../errors.js';

/** The schemes a job's input may have. */
const FETCHED_SCHEMES = ['http:', 'https:'];

/** An http(s) URL (a job fetched by the worker) rather than a path. */
export function isHttpUrl(s: string): boolean {
  return /^https?:\/\//i.test(s);
}

/**
 * Refuses an input that looks like a URL of a scheme the fleet does not fetch (`file:`, `data:`,
 * `ftp:`, ...): RFC 3986's scheme, two characters or more (a one-letter "scheme" is a drive).
 */
export function checkInputScheme(input: string): void {
  const scheme = /^([a-z][a-z0-9+.-]+):/i.exec(input)?.[1];
  if (scheme && !isHttpUrl(input))
    throw new TesseraError(
      'ERR_INVALID_ARGUMENT',
      `input ${JSON.stringify(input.length > 200 ? input.slice(0, 200) + '...' : input)} is a ${scheme.toLowerCase()}: URL; the fleet takes absolute paths and http(s) URLs ` +
        `(a local file of that name: write it as ./NAME)`,
    );
}

/** How many redirects one fetch follows (Node's fetch follows 20). */
export const MAX_REDIRECTS = 5;

/** The address ranges a worker refuses by default, by what they are (IPv4 ranges also match IPv4-mapped IPv6). */
const REFUSED_RANGES: [kind: string, ranges: [prefix: string, bits: number, family: 'ipv4' | 'ipv6'][]][] = [
  ['loopback', [['127.0.0.0', 8, 'ipv4'], ['::1', 128, 'ipv6']]],
  ['unspecified', [['0.0.0.0', 8, 'ipv4'], ['::', 128, 'ipv6']]],
  ['private', [['10.0.0.0', 8, 'ipv4'], ['172.16.0.0', 12, 'ipv4'], ['192.168.0.0', 16, 'ipv4'], ['100.64.0.0', 10, 'ipv4'], ['fec0::', 10, 'ipv6']]],
  ['link-local', [['169.254.0.0', 16, 'ipv4'], ['fe80::', 10, 'ipv6']]],
  ['unique-local', [['fc00::', 7, 'ipv6']]],
  ['multicast or reserved', [['224.0.0.0', 4, 'ipv4'], ['240.0.0.0', 4, 'ipv4'], ['ff00::', 8, 'ipv6']]],
];

const REFUSED = REFUSED_RANGES.map(([kind, ranges]) => {
  const list = new BlockList();
  for (const [prefix, bits, family] of ranges) list.addSubnet(prefix, bits, family);
  return { kind, list };
});

/** What kind of non-public address `ip` is ('loopback', 'private', ...), or undefined for a public one. */
export function nonPublicKind(ip: string): string | undefined {
  const family = isIP(ip) === 6 ? 'ipv6' : 'ipv4';
  return REFUSED.find((r) => r.list.check(ip, family))?.kind;
}

function refusal(url: string, host: string, ip: string, kind: string): TesseraError {
  const via = host === ip ? ip : `${host} (${ip})`;
  return new TesseraError(
    'ERR_INVALID_ARGUMENT',
    `image URL ${url}: refused to fetch from ${via}, a ${kind} address; workers fetch from public addresses only unless started with --allow-private-urls`,
  );
}

export interface UrlPolicy {
  /** true: every address; a list: these addresses and subnets (CIDR) besides the public ones. */
  allowPrivateUrls: boolean | readonly string[];
}

/** The BlockList of an allow list (addresses and CIDR subnets), checked once per policy. */
const allowLists = new WeakMap<readonly string[], BlockList>();

function allowListOf(entries: readonly string[]): BlockList {
  let list = allowLists.get(entries);
  if (list) return list;
  list = new BlockList();
  for (const entry of entries) {
    const [address, bits] = entry.split('/');
    const family = isIP(address ?? '');
    const n = bits === undefined ? (family === 6 ? 128 : 32) : Number(bits);
    if (!family || !Number.isInteger(n) || n < 0 || n > (family === 6 ? 128 : 32))
      throw new TesseraError('ERR_INVALID_ARGUMENT', `allowPrivateUrls: ${JSON.stringify(entry)} is not an IP address or a CIDR subnet`);
    list.addSubnet(address!, n, family === 6 ? 'ipv6' : 'ipv4');
  }
  allowLists.set(entries, list);
  return list;
}

/** Refuses an allow list with an entry that is not an address or a subnet (createWorker checks at start). */
export function checkUrlPolicy(policy: UrlPolicy): void {
  if (Array.isArray(policy.allowPrivateUrls)) allowListOf(policy.allowPrivateUrls);
}

/** Why the policy refuses `ip` (its kind: 'loopback', 'private', ...), or undefined when it may be fetched from. */
function refusedKind(ip: string, policy: UrlPolicy): string | undefined {
  if (policy.allowPrivateUrls === true) return undefined;
  const kind = nonPublicKind(ip);
  if (!kind || policy.allowPrivateUrls === false) return kind;
  return allowListOf(policy.allowPrivateUrls).check(ip, isIP(ip) === 6 ? 'ipv6' : 'ipv4') ? undefined : kind;
}

/**
 * Checks one hop's URL before it is requested: its scheme, and its host when that is an address
 * (a name is checked by lookupFor, once resolved). Returns the URL parsed.
 */
export function checkFetchUrl(url: string, policy: UrlPolicy): URL {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new TesseraError('ERR_INVALID_ARGUMENT', `image URL ${url} is not a valid URL`);
  }
  if (!FETCHED_SCHEMES.includes(u.protocol)) throw new TesseraError('ERR_INVALID_ARGUMENT', `image URL ${url}: the fleet fetches http(s) URLs only, not ${u.protocol}`);
  const host = u.hostname.replace(/^\[|\]$/g, '');
  const kind = isIP(host) ? refusedKind(host, policy) : undefined;
  if (kind) throw refusal(url, host, host, kind);
  return u;
}

type LookupCallback = (err: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;

/**
 * The `lookup` a request for `url` connects through: DNS as usual, then every address the name
 * resolves to is checked (one non-public address refuses the host: a name that mixes them is
 * not one to trust).
 */
export function lookupFor(url: string, policy: UrlPolicy) {
  return (hostname: string, options: LookupOptions, callback: LookupCallback): void => {
    dnsLookup(hostname, { ...options, all: true }, (err, addresses) => {
      if (err) return callback(err, []);
      for (const a of addresses) {
        const kind = refusedKind(a.address, policy);
        if (kind) return callback(refusal(url, hostname, a.address, kind) as unknown as NodeJS.ErrnoException, []);
      }
      if (options.all) callback(null, addresses);
      else callback(null, addresses[0]!.address, addresses[0]!.family);
    });
  };
}
