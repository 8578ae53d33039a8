// vitest config for radicle-explorer's `http-client` suite against seedd
// (scripts/explorer/run.sh copies it to <explorer>/http-client/seedd/).
import nodeConfig from "config";
import path from "node:path";
import { defineConfig } from "vitest/config";

// run.sh runs vitest from the explorer checkout.
const root = process.cwd();

export default defineConfig({
  root,
  define: {
    buildTimeConfig: JSON.stringify(nodeConfig.util.toObject()),
  },
  test: {
    environment: "node",
    include: ["http-client/tests/*.test.ts"],
    reporters: "verbose",
    globalSetup: "./http-client/seedd/globalSetup.ts",
    testTimeout: 30_000,
    hookTimeout: 600_000,
  },
  resolve: {
    alias: {
      "@tests": path.resolve(root, "tests"),
      "@app": path.resolve(root, "src"),
      "@http-client": path.resolve(root, "http-client"),
    },
  },
});
