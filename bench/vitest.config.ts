import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

// The bench's own tests (npm test here, or npm run test:bench at the root): its machinery, not the product.
export default defineConfig({
  test: {
    root: fileURLToPath(new URL('.', import.meta.url)),
    include: ['test/**/*.test.ts'],
    testTimeout: 120_000,
    pool: 'forks',
  },
});
