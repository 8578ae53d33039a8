// Creates radicle-explorer's fixtures and serves them with seedd, exactly as run.sh's vitest
// globalSetup does, then lets seedd join the fixture nodes' gossip (browserSetup.ts, which runs
// that same http-client/seedd/globalSetup.ts first; both through Vite's module runner so the
// explorer's `@tests`/`@app`/`@http-client` aliases resolve), then keeps seedd and the nodes
// running until SIGTERM/SIGINT, when it runs the setup's teardown (stops every peer).
// Started by browser.sh from the explorer checkout with NODE_CONFIG_ENV=test; prints
// "FIXTURES READY" once seedd lists the fixture repositories and the nodes are started.
import * as Path from "node:path";
import nodeConfig from "config";
import { runnerImport } from "vite";

const root = process.cwd();
const { module } = await runnerImport(
  Path.join(root, "http-client/seedd/browserSetup.ts"),
  {
    root,
    configFile: false,
    logLevel: "warn",
    define: {
      buildTimeConfig: JSON.stringify(nodeConfig.util.toObject()),
    },
    resolve: {
      alias: {
        "@tests": Path.join(root, "tests"),
        "@app": Path.join(root, "src"),
        "@http-client": Path.join(root, "http-client"),
      },
    },
  },
);

const teardown = await module.default();
console.log("FIXTURES READY");

let stopping = false;
async function stop() {
  if (stopping) return;
  stopping = true;
  try {
    await teardown();
  } finally {
    process.exit(0);
  }
}
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
// Keep the event loop alive.
setInterval(() => {}, 1 << 30);
