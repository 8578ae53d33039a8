// Global setup for running radicle-explorer's own `http-client` test suite against seedd
// (scripts/explorer/run.sh copies this file into the explorer checkout). It makes the same
// fixtures as the explorer's tests/support/globalSetup.ts, with the real `rad` and
// `radicle-node` on loopback (network "test", no preferred seeds), but it does not build the
// web app, and it starts the HTTP server only once the fixtures are written and palm's node is
// stopped: seedd indexes the storage it finds at start, where radicle-httpd reads it per request.
// The `radicle-httpd` on PATH is scripts/explorer/radicle-httpd (seedd, or the real httpd).
import * as Fs from "node:fs";
import * as Path from "node:path";
import { removeWorkspace, tmpDir } from "@tests/support/support.js";
import {
  defaultConfig,
  createCobsFixture,
  createCommitsFixture,
  createMarkdownFixture,
  createSourceBrowsingFixture,
  gitOptions,
} from "@tests/support/fixtures.js";
import config from "@tests/support/config.js";
import { createPeerManager } from "@tests/support/peerManager.js";

export default async function globalSetup(): Promise<() => void> {
  const reuse = process.env.SEEDD_CONTRACT_REUSE_FIXTURES === "1";
  if (!reuse) {
    await removeWorkspace();
  }
  const peerManager = await createPeerManager({
    dataDir: Path.resolve(tmpDir, "peers"),
    outputLog: Fs.createWriteStream(
      Path.resolve(tmpDir, "globalPeerManager.log"),
    ).setMaxListeners(16),
  });
  const palm = await peerManager.createPeer({
    name: "palm",
    gitOptions: gitOptions["alice"],
  });
  if (!reuse) {
    await palm.startNode({
      web: {
        pinned: { repositories: ["rad:z4BwwjPCFNVP27FwVbDFgwVwkjcir"] },
        description: "seedd contract run",
      },
      node: {
        ...defaultConfig.node,
        seedingPolicy: { default: "allow", scope: "all" },
        alias: "palm",
      },
    });
    console.log("  creating source-browsing fixture");
    await createSourceBrowsingFixture(peerManager, palm);
    console.log("  creating markdown fixture");
    await createMarkdownFixture(palm);
    console.log("  creating cobs fixture");
    await createCobsFixture(peerManager, palm);
    console.log("  creating commits fixture");
    await createCommitsFixture(palm);
    await palm.stopNode();
  }
  await palm.startHttpd(config.nodes.defaultHttpdPort);
  // seedd answers once its index is built; wait for the API, not only the port.
  const base = `http://127.0.0.1:${config.nodes.defaultHttpdPort}`;
  const deadline = Date.now() + 60_000;
  for (;;) {
    try {
      const r = await fetch(`${base}/api/v1/repos?show=all`);
      if (r.ok && ((await r.json()) as unknown[]).length >= 4) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      throw new Error(`${base} did not list the 4 fixture repositories`);
    }
    await new Promise(resolve => setTimeout(resolve, 200));
  }
  console.log(`  serving the fixtures at ${base}`);
  return async () => {
    await peerManager.shutdown();
  };
}
